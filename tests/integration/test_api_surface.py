"""The consistent surface of the Python API (#19): one NotFoundError base, the schedules
namespace with the flat delegates, app.migrate() storing @app.cron schedules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import rota


def test_every_not_found_error_shares_one_base(app: rota.App) -> None:
    lookups: list[tuple[Callable[[], Any], type[rota.RotaError]]] = [
        (lambda: app.cancel_job(987_654), rota.JobNotFoundError),
        (lambda: app.schedules.get_stored("no-such-schedule"), rota.ScheduleNotFoundError),
        (lambda: app.batches.get("no-such-batch"), rota.BatchNotFoundError),
        (lambda: app.workflows.get("no-such-workflow"), rota.WorkflowNotFoundError),
        (lambda: app.sagas.get("no-such-saga"), rota.SagaNotFoundError),
    ]
    for lookup, specific in lookups:
        with pytest.raises(rota.NotFoundError) as caught:
            lookup()
        assert isinstance(caught.value, specific)
    # The saga's error is still a SagaError for code that caught that before.
    assert issubclass(rota.SagaNotFoundError, rota.SagaError)
    assert "NotFoundError" in rota.__all__


def test_chain_runs_tasks_in_order_passing_results(app: rota.App) -> None:
    from rota.testing import drain

    @app.task
    def fetch(url: str) -> str:
        return f"<html>{url}</html>"

    @app.task
    def parse(fetch: str) -> int:
        return len(fetch)

    @app.task
    def store(parse: int, url: str) -> str:
        return f"{url}: {parse}"

    flow = rota.chain(fetch, parse, store)
    assert [s.name for s in flow.steps] == ["fetch", "parse", "store"]
    assert [s.after for s in flow.steps] == [(), ("fetch",), ("parse",)]
    run = app.workflows.start(flow, args={"url": "a.example"}, key="chain-1")
    for _ in range(10):  # three steps: a chain that does not move fails, not hangs
        if app.workflows.get(run.id).state != "running":
            break
        drain(app)
        app.workflows.advance()
    done = app.workflows.get(run.id)
    assert done.state == "completed"
    assert done.results["store"] == "a.example: 22"
    # The same task twice gets a numbered step; nothing is not a chain.
    assert [s.name for s in rota.chain(fetch, fetch).steps] == ["fetch", "fetch_2"]
    with pytest.raises(rota.WorkflowError):
        rota.chain()


def test_migrate_stores_cron_schedules_like_the_cli(database_url: str) -> None:
    app = rota.App(database_url)
    try:

        @app.cron("*/5 * * * *", name="digest")
        def digest(ctx: rota.Context) -> None:
            pass

        app.migrate()
        stored = app.schedules.get_stored("digest")
        assert stored.expression == "*/5 * * * *"
        # The flat names are delegates of the namespace.
        assert [s.name for s in app.list_schedules()] == ["digest"]
        assert app.get_schedule("digest") == stored
        assert app.suspend_schedule("digest").suspended
        assert not app.schedules.resume("digest").suspended
    finally:
        app.close()
