"""`rota cron ...` in-process (click's CliRunner) on both dialects: listing with next runs in
each schedule's zone, show, trigger, suspend, resume, history, delete and next, in text and
--json, and bad input refused with a clear message."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import rota
from rota.cli.main import cli

Invoke = Callable[..., Result]

APP_MODULE = """
import rota

app = rota.App()

@app.cron("30 2 * * *", tz="America/New_York", concurrency="forbid", starting_deadline=300)
def nightly(ctx: rota.Context) -> None:
    pass

@app.task(queue="reports")
def digest(team: str) -> None:
    pass

app.schedule(digest, "*/5 * * * *", args={"team": "ops"}, name="digest-ops", tz="Europe/Berlin")
"""


@pytest.fixture
def run(
    app: rota.App, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Invoke]:
    (tmp_path / "cronapp.py").write_text(textwrap.dedent(APP_MODULE))
    (tmp_path / "badcron.py").write_text(
        "import rota\napp = rota.App()\n@app.cron('0 0 30 2 *')\ndef never() -> None: ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        env = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None, "COLUMNS": "200"}
        return runner.invoke(cli, list(args), env=env, catch_exceptions=False)

    yield invoke


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_migrate_with_an_app_stores_its_schedules(run: Invoke) -> None:
    out = ok_json(run("migrate", "--app", "cronapp:app", "--json"))
    assert sorted(out["schedules"]) == ["cronapp.nightly", "digest-ops"]
    text = run("migrate", "--app", "cronapp:app")
    assert "stored 2 schedule(s)" in text.output


def test_ls_shows_next_runs_in_each_schedules_zone(run: Invoke) -> None:
    run("migrate", "--app", "cronapp:app")
    rows = {r["name"]: r for r in ok_json(run("cron", "ls", "--json"))}
    nightly, digest = rows["cronapp.nightly"], rows["digest-ops"]
    assert nightly["timezone"] == "America/New_York" and nightly["concurrency"] == "forbid"
    assert nightly["starting_deadline"] == 300.0 and nightly["suspended"] is False
    (upcoming,) = nightly["next_runs"]
    assert upcoming[11:19] in ("02:30:00", "03:00:00")  # 03:00 on a spring-forward day
    assert upcoming.endswith(("-04:00", "-05:00"))
    assert digest["args"] == {"team": "ops"} and digest["queue"] == "reports"
    assert digest["next_runs"][0].endswith(("+01:00", "+02:00"))
    text = run("cron", "ls")
    assert text.exit_code == 0
    assert "cronapp.nightly" in text.output and "America/New_York" in text.output
    assert ("EST" in text.output or "EDT" in text.output) and "forbid" in text.output


def test_show_trigger_history_suspend_resume_delete(run: Invoke) -> None:
    run("migrate", "--app", "cronapp:app")
    shown = ok_json(run("cron", "show", "digest-ops", "--next", "3", "--json"))
    assert len(shown["next_runs"]) == 3 and shown["runs"] == []
    triggered = ok_json(run("cron", "trigger", "digest-ops", "--name", "by-hand", "--json"))
    assert triggered["trigger"] == "manual" and triggered["name"] == "by-hand"
    assert triggered["state"] == "available" and triggered["job_id"]
    text = run("cron", "trigger", "digest-ops")
    assert text.exit_code == 0 and "run digest-ops-manual-" in text.output
    history = ok_json(run("cron", "history", "digest-ops", "--json"))
    assert [h["trigger"] for h in history] == ["manual", "manual"]
    assert history[1]["scheduled_at"].endswith(("+01:00", "+02:00"))
    assert "by-hand" in run("cron", "history", "digest-ops").output
    assert ok_json(run("cron", "suspend", "digest-ops", "--json")) == {
        "name": "digest-ops",
        "suspended": True,
    }
    assert "suspended" in run("cron", "ls").output
    assert ok_json(run("cron", "show", "digest-ops", "--json"))["next_runs"] == []
    assert run("cron", "resume", "digest-ops").output.strip() == "schedule digest-ops resumed"
    show = run("cron", "show", "digest-ops")
    assert show.exit_code == 0 and "next" in show.output and "by-hand" in show.output
    assert ok_json(run("cron", "delete", "digest-ops", "--json"))["deleted"] is True
    assert [r["name"] for r in ok_json(run("cron", "ls", "--json"))] == ["cronapp.nightly"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("cron", "show", "nope"), "no schedule named 'nope'"),
        (("cron", "trigger", "nope"), "no schedule named 'nope'"),
        (("cron", "suspend", "nope"), "no schedule named 'nope'"),
        (("cron", "delete", "nope"), "no schedule named 'nope'"),
        (("cron", "history", "nope"), "no schedule named 'nope'"),
        (("cron", "trigger", "digest-ops", "--name", "digest-ops-123"), "scheduled run"),
        (("cron", "next", "0 0 30 2 *"), "never fires"),
        (("cron", "next", "61 * * * *"), "bad minute field '61'"),
        (("cron", "next", "TZ=UTC * * * * *"), "not supported"),
        (("cron", "next", "* * * * *", "--tz", "Mars/X"), "unknown time zone 'Mars/X'"),
        (("cron", "next", "* * * * *", "--after", "yesterday"), "not an ISO 8601 time"),
        (("cron", "ls", "--app", "badcron:app"), "never fires"),
        (("worker", "--app", "cronapp:app", "--cron-interval", "0"), "--cron-interval"),
    ],
)
def test_bad_input_is_refused_with_a_message(
    run: Invoke, args: tuple[str, ...], message: str
) -> None:
    run("migrate", "--app", "cronapp:app")
    result = run(*args)
    assert result.exit_code != 0
    assert message in result.output


def test_next_checks_an_expression_under_both_dst_policies(run: Invoke) -> None:
    base = ("cron", "next", "30 2 * * *", "--tz", "America/New_York", "--after", "2025-03-08T12:00")
    once = ok_json(run(*base, "--count", "2", "--json"))
    assert once["next_runs"] == ["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"]
    assert once["next_runs_utc"][0] == "2025-03-09T07:00:00+00:00"
    k8s = ok_json(run(*base, "--dst", "kubernetes", "--count", "1", "--json"))
    assert k8s["next_runs"] == ["2025-03-10T02:30:00-04:00"]
    text = run("cron", "next", "@daily", "--tz", "Europe/Berlin", "--count", "1")
    assert text.exit_code == 0 and "00:00:00 CE" in text.output


def test_next_reads_day_of_week_steps_as_kubernetes_does(run: Invoke) -> None:
    """`1/2` is Monday, Wednesday, Friday: 2026-12-06 (a Sunday) is not a run (#17)."""
    result = ok_json(
        run("cron", "next", "0 0 * * 1/2", "--after", "2026-12-01T12:00", "--count", "4", "--json")
    )
    assert [t[:10] for t in result["next_runs"]] == [
        "2026-12-02",
        "2026-12-04",
        "2026-12-07",
        "2026-12-09",
    ]
