"""Retention of finished sagas and published events: the pruner deletes them past their
period, in batches, and keeps running and failed sagas and recent events."""

from __future__ import annotations

import math
from typing import Any

import pytest

import rota
from rota.events.feature import EventsFeature
from rota.maintenance.pruner import RetentionService
from rota.ops.retention import parse_retention
from rota.plugin import Feature, ServiceContext
from rota.sagas.feature import SagasFeature
from rota.testing import drain

DAY = 86400.0


def backdate(app: rota.App, table: str, column: str, ids: list[int], seconds: float) -> None:
    """Move rows' timestamps into the past (the test's stand-in for waiting)."""
    marks = ",".join(str(int(i)) for i in ids)
    with app.transaction() as conn:
        if app.driver.dialect == "sqlite":
            sql = f"UPDATE {table} SET {column} = {column} - {seconds} WHERE id IN ({marks})"
        else:
            sql = (
                f"UPDATE {table} SET {column} = {column} - make_interval(secs => {seconds}) "
                f"WHERE id IN ({marks})"
            )
        conn.execute(sql)


def retention(app: rota.App, feature: type[Feature], age: float, batch: int = 1000) -> Any:
    """The feature's own retention service, as a worker builds it from its settings."""
    settings = rota.WorkerSettings(saga_retention=age, event_retention=age, prune_batch=batch)
    services = app.feature(feature).services(ServiceContext("test", settings, app.driver))
    return next(s for s in services if isinstance(s, RetentionService))


def test_finished_sagas_are_pruned_and_running_or_failed_ones_kept(app: rota.App) -> None:
    saga = rota.Saga("checkout", max_attempts=1)

    @saga.step
    def book(data: dict[str, Any]) -> None:
        if data.get("fail"):
            raise RuntimeError("no seats")

    app.sagas.register(saga)
    done = [app.sagas.start(saga, key=f"done-{i}", data={}) for i in range(3)]
    failed = app.sagas.start(saga, key="failed", data={"fail": True})
    drain(app)
    app.sagas.supervise()  # the failed step: nothing to compensate, status settles
    drain(app)
    running = app.sagas.start(saga, key="running", data={})
    statuses = {s.key: s.status for s in app.sagas.list()}
    assert {statuses[f"done-{i}"] for i in range(3)} == {rota.SagaStatus.COMPLETED}
    assert statuses["failed"] in (rota.SagaStatus.COMPENSATED, rota.SagaStatus.FAILED)
    everything = [*done, failed, running]
    backdate(app, "rota_sagas", "updated_at", [s.id for s in everything], 40 * DAY)

    report = retention(app, SagasFeature, 30 * DAY, batch=2).run_once()  # two batches: 2 + 1(+1)
    left = {s.key for s in app.sagas.list()}
    assert "running" in left and not {f"done-{i}" for i in range(3)} & left
    if statuses["failed"] is rota.SagaStatus.FAILED:
        assert "failed" in left  # a failed saga waits for a person
    assert report.deleted == len(everything) - len(left)


def test_old_events_are_pruned_and_recent_ones_kept(app: rota.App) -> None:
    old = [app.publish("seat.sold", {"seat": i}) for i in range(5)]
    recent = app.publish("seat.sold", {"seat": 99}, key="seat-99")
    backdate(app, "rota_events", "published_at", [e.id for e in old], 10 * DAY)
    report = retention(app, EventsFeature, 7 * DAY, batch=2).run_once()
    assert report.deleted == 5
    assert [e.id for e in app.events.list()] == [recent.id]
    # Kept forever by default when the period is infinite.
    assert retention(app, EventsFeature, math.inf).run_once().deleted == 0


def test_retention_flags_cover_sagas_and_events() -> None:
    assert parse_retention(["saga=forever", "event=7d"]) == {
        "saga_retention": math.inf,
        "event_retention": 7 * DAY,
    }
    with pytest.raises(rota.ConfigurationError, match="saga"):
        parse_retention(["sagas=1d"])
    with pytest.raises(rota.ConfigurationError, match="event_retention"):
        rota.WorkerSettings(event_retention=-1)
