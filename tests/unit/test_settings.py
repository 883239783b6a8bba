"""Worker settings and the --queues syntax."""

from __future__ import annotations

import pytest

import rota
from rota.errors import ConfigurationError
from rota.settings import parse_queues


def test_parse_queues() -> None:
    assert parse_queues("tickets=4,reports=1") == {"tickets": 4, "reports": 1}
    assert parse_queues(" tickets ") == {"tickets": 10}


@pytest.mark.parametrize("spec", ["", "a=x", "a=1,a=2", "=3", "a b=1"])
def test_bad_queue_specs(spec: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_queues(spec)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"queues": {}},
        {"queues": {"a": 0}},
        {"lease": 0},
        {"lease": 10, "heartbeat": 10},
        {"grace": -1},
        {"fetch_batch": 0},
    ],
)
def test_bad_settings(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        rota.WorkerSettings(**kwargs)  # type: ignore[arg-type]


def test_heartbeat_defaults_to_a_third_of_the_lease() -> None:
    assert rota.WorkerSettings(lease=30).heartbeat_interval == 10
