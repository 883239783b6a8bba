"""`rota db copy`: a SQLite installation with jobs in every state (history, steps,
checkpoints, progress), schedules with runs, API tokens and a batch moves to a fresh
PostgreSQL schema, verified by counts, and a worker carries on there."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

import rota
import rota.testing
from rota.auth.store import TokenStore
from rota.cli.main import cli
from rota.copier import copy_installation
from rota.web.records import SeriesPoint
from rota.web.store import WebStore
from tests.helpers import fast_settings, run_worker_until


def _register(app: rota.App) -> dict[str, Any]:
    @app.task(name="ship", max_attempts=2, backoff=rota.Backoff(base=0.01, cap=0.01))
    def ship(ctx: rota.Context, order: int) -> dict[str, int]:
        ctx.step("label", lambda: f"label-{order}")
        ctx.checkpoint({"at": order})
        if order == 13:
            raise ValueError("unlucky order")
        return {"shipped": order}

    @app.task(name="report")
    def report() -> str:
        return "done"

    return {"ship": ship, "report": report}


@pytest.fixture
def installation(sqlite_url: str) -> rota.App:
    """A SQLite installation with some history."""
    app = rota.App(sqlite_url)
    app.migrate()
    tasks = _register(app)
    tasks["ship"].enqueue_many([{"order": i} for i in (1, 2, 13)])
    tasks["ship"].enqueue(order=4, key="order-4")
    tasks["ship"].enqueue(order=5, delay=3600)
    app.schedule(tasks["report"], "0 3 * * *", name="nightly")
    app.sync_schedules()
    rota.testing.drain(app)  # 1, 2 complete; 13 fails twice -> discarded
    app.trigger_schedule("nightly")  # a manual run whose job waits
    app.tokens.create("ops", "operator")
    app.batch(tasks["ship"], items=[{"order": 20}, {"order": 21}], name="wave-1")
    return app


def _flow(series: list[SeriesPoint]) -> dict[str, int]:
    """Jobs per kind (enqueued, completed, ...) over a queue series' buckets."""
    flow: dict[str, int] = {}
    for point in series:
        flow[point.kind] = flow.get(point.kind, 0) + point.count
    return flow


def test_copy_moves_everything_and_a_worker_carries_on(
    installation: rota.App, sqlite_url: str, pg_url: str
) -> None:
    source = installation
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        # A history made three hours ago.
        conn.execute(
            "UPDATE rota_jobs SET created_at = created_at - 10800, "
            "attempted_at = attempted_at - 10800, finished_at = finished_at - 10800"
        )
    before = {j.id: j for j in source.list_jobs(limit=1000)}
    runner = CliRunner()
    dry = runner.invoke(
        cli, ["db", "copy", "--from", sqlite_url, "--to", pg_url, "--dry-run", "--json"]
    )
    assert dry.exit_code == 0, dry.output
    planned = {t["table"]: t for t in json.loads(dry.output)["tables"]}
    assert planned["rota_jobs"]["source"] == len(before) and planned["rota_jobs"]["target"] is None
    with psycopg.connect(pg_url) as conn:  # the dry run wrote nothing, not even the schema
        assert conn.execute("SELECT to_regclass('rota_jobs')").fetchone() == (None,)

    result = runner.invoke(cli, ["db", "copy", "--from", sqlite_url, "--to", pg_url, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ok"] and not report["source_changed"]
    tables = {t["table"]: t for t in report["tables"]}
    for name in (
        "rota_jobs",
        "rota_steps",
        "rota_schedules",
        "rota_schedule_runs",
        "rota_api_tokens",
        "rota_batches",
    ):
        assert tables[name]["source"] == tables[name]["target"] > 0, name
    assert tables["rota_migrations"]["skipped"]

    target = rota.App(pg_url)
    try:
        tasks = _register(target)
        after = {j.id: j for j in target.list_jobs(limit=1000)}
        assert after.keys() == before.keys()
        # The target's kept counts (PostgreSQL, 0019) counted the copied jobs, once.
        counted = {(q.name, st): n for q in target.list_queues() for st, n in q.counts.items()}
        expected: dict[tuple[str, str], int] = {}
        for job in after.values():
            slot = (job.queue, str(job.state))
            expected[slot] = expected.get(slot, 0) + 1
        assert {k: v for k, v in counted.items() if v} == expected
        # Throughput comes from the jobs' own times (three hours ago), not from when the
        # copy wrote them: nothing in the last hour, all of them in the last day.
        web = WebStore(target.driver)
        assert _flow(web.queue_series(3600.0, 60.0)) == {}
        finished = [j for j in after.values() if j.state.finished]
        assert _flow(web.queue_series(86400.0, 86400.0)) == {
            "enqueued": len(after),
            **{
                str(state): sum(1 for j in finished if j.state is state)
                for state in {j.state for j in finished}
            },
        }
        for job_id, old in before.items():
            new = after[job_id]
            assert (new.task, new.state, new.args, new.result, new.key, new.checkpoint) == (
                old.task,
                old.state,
                old.args,
                old.result,
                old.key,
                old.checkpoint,
            )
            assert new.run_at == old.run_at and new.finished_at == old.finished_at
            assert [(a.outcome, a.message, a.started_at) for a in new.history] == [
                (a.outcome, a.message, a.started_at) for a in old.history
            ]
            assert target.driver.step_list(job_id) == source.driver.step_list(job_id)
        assert [r.name for r in TokenStore(target.driver).all()] == ["ops"]
        (nightly,) = target.list_schedules()
        assert nightly.name == "nightly" and len(target.schedule_history("nightly")) == 1
        assert target.batches.get("wave-1").name == "wave-1"
        # Ids continue after the copied ones; the key still guards its job.
        fresh = tasks["ship"].enqueue(order=6)
        assert fresh.id > max(before)
        assert not tasks["ship"].enqueue(order=4, key="order-4").created
        # A worker on the target runs what was waiting.
        waiting = [j.id for j in after.values() if j.state is rota.JobState.AVAILABLE]
        asyncio.run(
            run_worker_until(
                rota.Worker(target, fast_settings()),
                lambda: all(target.get_job(i).state.finished for i in waiting),  # type: ignore[union-attr]
            )
        )
        # Copying again into a schema that has data is refused, before anything is written.
        again = runner.invoke(cli, ["db", "copy", "--from", sqlite_url, "--to", pg_url])
        assert again.exit_code == 1 and "already has" in again.output
    finally:
        target.close()
        source.close()


def test_copy_refuses_other_directions_and_old_sources(
    sqlite_url: str, pg_url: str, tmp_path: Any
) -> None:
    rota.App(sqlite_url).migrate()
    other = f"sqlite:///{tmp_path / 'other.db'}"
    out = CliRunner().invoke(cli, ["db", "copy", "--from", pg_url, "--to", other])
    assert out.exit_code == 1 and "from SQLite" in out.output
    fresh = rota.App(other)
    target = rota.App(pg_url)
    try:
        with pytest.raises(rota.SchemaError, match="run `rota migrate` on the source"):
            copy_installation(fresh.driver, target.driver)
    finally:
        fresh.close()
        target.close()
