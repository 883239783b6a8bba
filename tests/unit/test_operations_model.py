"""Pure parts of rota.ops: selections, limits and retention parsing refuse bad input."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from rota.ops import Selection
from rota.ops.model import check_global_limit, check_rate
from rota.ops.retention import parse_retention


def test_selection_is_bounded_by_any_filter() -> None:
    assert not Selection().bounded
    assert not Selection(all=True).bounded
    assert Selection(task="t").bounded and Selection(ids=(1,)).bounded
    assert Selection.of({"queue": "q"}, text="boom") == Selection(queue="q", text="boom")
    assert Selection.of(ids=[3, 4]).ids == (3, 4)
    now = datetime.now(UTC)
    assert Selection(since=now, all=False).to_json() == {"since": now.isoformat()}


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"ids": []}, "ids must list"),
        ({"ids": [0]}, "positive integers"),
        ({"ids": [True]}, "positive integers"),
        ({"ids": 5}, "list of job ids"),
        ({"task": ""}, "non-empty"),
        ({"text": "x" * 501}, "at most 500"),
        ({"since": "yesterday"}, "datetime"),
        ({"until": datetime(2026, 1, 1)}, "timezone-aware"),
        ({"colour": "red"}, "unknown selection filter"),
    ],
)
def test_selection_refuses_bad_filters(filters: dict[str, object], message: str) -> None:
    with pytest.raises(rota.ArgumentsError, match=message):
        Selection.of(filters)


def test_selection_refuses_an_empty_time_range() -> None:
    now = datetime.now(UTC)
    with pytest.raises(rota.ArgumentsError, match="earlier than until"):
        Selection(since=now, until=now - timedelta(seconds=1))


def test_limits() -> None:
    assert check_global_limit(None) is None and check_global_limit(3) == 3
    assert check_rate((100, 60)) == (100, 60.0) and check_rate(None) is None
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(rota.ArgumentsError):
            check_global_limit(bad)
    for bad_rate in ((0, 1), (1, 0), (1, math.inf), (1, 0.01), (1.5, 1), "5/s", (1, 2, 3)):
        with pytest.raises(rota.ArgumentsError):
            check_rate(bad_rate)


def test_parse_retention() -> None:
    assert parse_retention(["completed=12h", "discarded=30d", "cancelled=forever"]) == {
        "completed_retention": 43_200.0,
        "discarded_retention": 2_592_000.0,
        "cancelled_retention": math.inf,
    }
    assert parse_retention(["completed=90"]) == {"completed_retention": 90.0}
    for bad in ("running=1h", "completed", "completed=soon"):
        with pytest.raises(rota.ConfigurationError, match="bad"):
            parse_retention([bad])


def test_worker_cli_refuses_bad_retention() -> None:
    result = CliRunner().invoke(
        cli,
        ["worker", "--app", "x:y", "--retention", "running=1h"],
        env={"ROTA_DATABASE_URL": "sqlite:///unused.db"},
    )
    assert result.exit_code == 2 and "STATE=AGE" in result.output
