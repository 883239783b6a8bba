"""Deadlines of database calls (#21): derived from the lease, merged into the conninfo
with the user's own settings winning, validated, and ordered so that a silent worker
stops its jobs before the server can notice it and free them (the fast rescue, #17)."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

import rota
from rota.drivers.deadlines import Deadlines, server_detection
from rota.drivers.postgres.deadlines import conninfo_with
from rota.errors import ConfigurationError
from rota.worker.lease_clock import LeaseClock


def test_defaults_notice_a_silent_peer_within_a_third_of_the_lease() -> None:
    settings = rota.WorkerSettings()
    d = settings.deadlines
    assert (d.detect, d.connect, d.call) == (10.0, 10.0, 10.0)
    assert d.statement == 10.0
    idle, interval, count = d.keepalives()
    assert idle + interval * count <= d.detect
    assert settings.fence_after == 27.0


@pytest.mark.parametrize("lease", [1.0, 2.0, 3.0, 6.0, 30.0, 120.0, 600.0])
def test_every_derived_deadline_leaves_room_before_the_fence(lease: float) -> None:
    settings = rota.WorkerSettings(lease=lease)
    d = settings.deadlines
    idle, interval, count = d.keepalives()
    assert idle + interval * count <= max(d.detect, 3)  # libpq counts whole seconds
    assert d.call < settings.fence_after
    assert d.statement >= 5.0 and d.connect >= 2.0


def test_the_users_conninfo_wins() -> None:
    merged = conninfo_to_dict(
        conninfo_with(
            "postgresql://u@h/db?keepalives_idle=7&options=-c%20statement_timeout%3D0",
            Deadlines(detect=10, connect=5, statement=10, call=10),
        )
    )
    assert merged["keepalives_idle"] == "7"
    assert merged["options"] == "-c statement_timeout=0"
    assert merged["connect_timeout"] == "5"
    assert merged["tcp_user_timeout"] == "10000"
    assert merged["keepalives"] == "1"


def test_rotas_statement_timeout_joins_the_users_options() -> None:
    merged = conninfo_to_dict(
        conninfo_with(
            "host=h dbname=db options='-c search_path=x'",
            Deadlines(statement=4),
        )
    )
    assert merged["options"] == "-c search_path=x -c statement_timeout=4000"


def test_outside_a_worker_there_is_no_statement_timeout() -> None:
    assert "options" not in conninfo_to_dict(conninfo_with("host=h", Deadlines()))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"db_call_timeout": 0}, "db_call_timeout must be a positive"),
        ({"db_statement_timeout": -1}, "db_statement_timeout must be seconds >= 0"),
        ({"lease_margin": 20.0}, "lease_margin (20.0s) must be under half the lease"),
        ({"db_call_timeout": 28.0}, "db_call_timeout (28.0s) must be shorter"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rota.WorkerSettings(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("lease", [2.0, 5.0, 30.0, 90.0])
@pytest.mark.parametrize("heartbeat_fraction", [0.1, 1 / 3, 0.5])
def test_the_worker_stops_its_jobs_before_the_server_can_free_them(
    lease: float, heartbeat_fraction: float
) -> None:
    """Cut at time 0. The worker's last confirmed renewal was sent at or before the cut,
    so it stops its jobs at most fence_after later. The server may drop the presence
    session no earlier than its unanswered keepalive probes allow after the cut."""
    settings = rota.WorkerSettings(lease=lease, heartbeat=lease * heartbeat_fraction)
    detection = settings.server_detection
    worker_stops_by = settings.fence_after  # last confirmation at the cut, at the latest
    assert worker_stops_by < detection.earliest
    assert detection.latest <= 2 * lease + 2  # and a dead worker is still found soon
    options = detection.options()
    assert int(options["tcp_keepalives_interval"]) * int(options["tcp_keepalives_count"]) == (
        detection.earliest
    )


def test_server_detection_never_undercuts_the_fence() -> None:
    assert server_detection(30.0, 27.0).earliest >= 30.0
    assert server_detection(30.0, 45.0).earliest >= 45.0


def test_the_lease_clock_counts_from_the_statement_sent() -> None:
    now = [100.0]
    clock = LeaseClock(fence_after=2.7, clock=lambda: now[0])
    clock.confirmed([1, 2], sent_at=100.0)
    clock.confirmed([2], sent_at=101.0)
    clock.confirmed([2], sent_at=100.5)  # an older answer arriving late moves nothing
    assert clock.deadline(1) == pytest.approx(102.7)
    assert clock.deadline(2) == pytest.approx(103.7)
    now[0] = 102.7
    assert clock.expired() == [1]
    assert clock.late(100.0) and not clock.late(100.1)
    clock.forget(1)
    assert clock.expired() == [] and clock.next_deadline() == pytest.approx(103.7)


def test_presence_sessions_get_server_keepalives_as_libpq_options() -> None:
    options = rota.WorkerSettings(lease=30).server_detection.conninfo_options()
    assert options == (
        "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3"
    )


def test_expired_leases_are_fenced_at_once() -> None:
    clock = LeaseClock(fence_after=27.0, clock=lambda: 5.0)
    clock.confirmed([1, 2], sent_at=5.0)
    assert clock.expired() == []
    clock.expire([2])
    assert clock.expired() == [2]
