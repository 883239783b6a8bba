"""The "features in use" installation: the benchmark's app plus every feature at work on
queues the measured worker does not serve (a cron schedule, a queue with a global limit, a
partitioned queue with waiting jobs, running workflows, sagas in flight, routed jobs with
`requires`). Only rota's public API is used, so the scenario survives engine rewrites."""

from __future__ import annotations

from typing import Any

import rota
from bench import tasks

LIMITED = "bench-limited"
PARTITIONED = "bench-partitioned"
ROUTED = "bench-routed"
CRON = "bench-cron"
FLOWS = "bench-flows"
SAGAS = "bench-sagas"
OTHER_QUEUES = (LIMITED, PARTITIONED, ROUTED, CRON, FLOWS, SAGAS)

WAITING = 200  # jobs waiting on each of the limited, partitioned and routed queues
PARTITIONS = 20
RUNS = 5  # workflows running and sagas in flight


def make_features_app(url: str | None) -> rota.App:
    """The benchmark's app (tasks on `bench`) with every feature declared on other queues."""
    return _build(url)[0]


def _build(url: str | None) -> tuple[rota.App, rota.Workflow]:
    app = tasks.make_app(url)

    @app.task(name="bench.other", queue=LIMITED)
    def other(n: int = 0) -> None:
        return None

    @app.task(name="bench.gpu", queue=ROUTED, requires={"gpu"})
    def gpu(n: int = 0) -> None:
        return None

    # Every minute: the leader's cron service stays busy with it throughout the drain.
    @app.cron("* * * * *", name="bench-every-minute")
    @app.task(name="bench.tick", queue=CRON)
    def tick() -> None:
        return None

    @app.task(name="bench.extract", queue=FLOWS)
    def extract(day: str) -> int:
        return 1

    @app.task(name="bench.load", queue=FLOWS)
    def load(extract: int) -> int:
        return extract

    flow = rota.Workflow("bench-flow")
    flow.step(load, after=flow.step(extract))
    app.workflows.register(flow)

    saga = rota.Saga("bench-saga", queue=SAGAS)

    @saga.step
    def reserve(data: dict[str, Any]) -> dict[str, Any]:
        return {"reserved": True}

    @reserve.compensate
    def release(data: dict[str, Any]) -> None:
        return None

    @saga.step
    def charge(data: dict[str, Any]) -> dict[str, Any]:
        return {"charged": True}

    app.sagas.register(saga)
    return app, flow


def put_in_use(url: str) -> dict[str, int]:
    """Make every feature busy in the database at `url` (already migrated); returns what
    was created, for the report."""
    app, flow = _build(url)
    with app:
        app.queues.configure(LIMITED, global_limit=2)
        other = app.get_task("bench.other")
        gpu = app.get_task("bench.gpu")
        other.enqueue_many([{"n": i} for i in range(WAITING)])
        for i in range(WAITING):
            other.enqueue(n=i, queue=PARTITIONED, partition_key=f"customer-{i % PARTITIONS}")
        gpu.enqueue_many([{"n": i} for i in range(WAITING)])
        for i in range(RUNS):
            app.workflows.start(flow, args={"day": f"2026-12-{i + 1:02d}"}, key=f"flow-{i}")
            app.sagas.start("bench-saga", key=f"order-{i}", data={"order_id": i})
    return {
        "limited_waiting": WAITING,
        "partitioned_waiting": WAITING,
        "routed_waiting": WAITING,
        "workflows_running": RUNS,
        "sagas_in_flight": RUNS,
        "cron_schedules": 1,
    }
