"""`rota run TASK` and `rota scale-hint` in-process on both dialects: one job run here to
its end with the task's retries, recorded like any job, with an exit status per outcome;
the one-shot runner's stop and follow paths; and the replica hint from real counts."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import rota
import rota.testing
from rota import JobState, Outcome
from rota.cli.main import cli
from rota.cli.run import EXIT_INTERRUPTED, _exit_code
from rota.worker import oneshot
from rota.worker.oneshot import OneShot
from tests.drivers.test_conformance import done
from tests.helpers import async_wait_for

APPS = Path(__file__).parents[1] / "e2e" / "apps"
APP = "k8s_app:app"

Invoke = Callable[..., Result]


@pytest.fixture
def run(app: rota.App, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Invoke]:
    """`run("run", ...)` against this test's migrated database."""
    monkeypatch.syspath_prepend(str(APPS))
    runner = CliRunner()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level

    def invoke(*args: str) -> Result:
        env: dict[str, str | None] = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None}
        return runner.invoke(cli, list(args), env=env, catch_exceptions=False)

    yield invoke
    root.handlers[:], root.level = handlers, level


def jobs(app: rota.App) -> list[rota.Job]:
    return app.list_jobs(limit=100)


def test_run_retries_in_process_until_completed(run: Invoke, app: rota.App) -> None:
    result = run("run", "k8s_app.flaky", "--app", APP, "--args", '{"failures": 2}')
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "job 1 completed after 3 attempt(s): 3"
    assert "attempt 1/3 failed (ConnectionError: downstream unavailable (try 1))" in result.stderr
    assert "attempt 3/3 completed" in result.stderr
    (job,) = jobs(app)
    assert job.state is JobState.COMPLETED and job.result == 3
    assert [a.outcome for a in job.history] == [Outcome.FAILED, Outcome.FAILED, Outcome.COMPLETED]
    assert {a.worker for a in job.history} == {job.worker}
    assert job.worker is not None and job.worker.startswith("rota-run:")
    # Like any job: the ordinary commands see it.
    shown = run("jobs", "show", "1", "--json")
    assert json.loads(shown.stdout)["state"] == "completed"


def test_run_exits_non_zero_when_the_job_is_dead_lettered(run: Invoke, app: rota.App) -> None:
    result = run("run", "k8s_app.flaky", "--app", APP, "--args", '{"failures": 9}', "--json")
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert body["state"] == "discarded" and body["attempt"] == 3
    # A permanent error is not retried.
    result = run("run", "k8s_app.refuse", "--app", APP, "--args", '{"reason": "no seat"}')
    assert result.exit_code == 1
    assert "discarded after 1 attempt(s)" in result.stdout


def test_run_with_a_key_resumes_instead_of_adding_a_job(run: Invoke, app: rota.App) -> None:
    first = run("run", "k8s_app.flaky", "--app", APP, "--args", '{"failures": 0}', "--key", "k1")
    assert first.exit_code == 0 and "enqueued job 1" in first.stderr
    again = run("run", "k8s_app.flaky", "--app", APP, "--args", '{"failures": 0}', "--key", "k1")
    assert again.exit_code == 0 and "resuming job 1" in again.stderr
    assert again.stdout.strip() == "job 1 completed after 1 attempt(s): 1"
    assert len(jobs(app)) == 1


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["k8s_app.flaky", "--args", '{"failures": "x"}'], 1, "failures"),
        (["k8s_app.flaky", "--args", "[1]"], 2, "must be a JSON object"),
        (["k8s_app.nope"], 1, "unknown task"),
    ],
)
def test_run_refuses_bad_input_before_anything_is_written(
    run: Invoke, app: rota.App, args: list[str], code: int, message: str
) -> None:
    result = run("run", *args, "--app", APP)
    assert result.exit_code == code
    assert message in result.output
    assert jobs(app) == []


def test_run_needs_an_app_and_a_current_schema(run: Invoke, tmp_path: Path) -> None:
    assert run("run", "k8s_app.flaky").exit_code == 2
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = run("run", "k8s_app.flaky", "--app", APP, "--database-url", fresh)
    # A SQLite file that does not exist is not created (#19): migrate makes it.
    assert result.exit_code == 2 and "no such file" in result.stderr
    assert "rota migrate" in result.stderr and not (tmp_path / "fresh.db").exists()
    rota.App(fresh).close()  # an empty file: no schema yet
    (tmp_path / "fresh.db").touch()
    result = run("run", "k8s_app.flaky", "--app", APP, "--database-url", fresh)
    assert result.exit_code == 1 and "rota migrate" in result.stderr


# --- the one-shot runner on its own ---------------------------------------------------------


def test_sigterm_gives_the_job_back_without_spending_the_attempt(app: rota.App) -> None:
    started = threading.Event()

    @app.task
    def long(ctx: rota.Context) -> None:
        started.set()
        while not ctx.wait_cancelled(0.01):
            pass
        raise RuntimeError("stopped")

    job = long.enqueue()
    runner = OneShot(app, grace=0.2, lease=5)

    async def scenario() -> rota.Job:
        running = asyncio.create_task(runner.run(job.id))
        await async_wait_for(started.is_set, timeout=10)
        runner.stop()  # SIGTERM: the grace runs, then the job goes back
        return await asyncio.wait_for(running, timeout=10)

    final = asyncio.run(scenario())
    assert final.state is JobState.AVAILABLE and final.max_attempts == 21
    assert final.history[-1].outcome is Outcome.SHUTDOWN
    assert _exit_code(final) == EXIT_INTERRUPTED


def test_a_stop_during_the_backoff_leaves_the_retry_to_the_queue(app: rota.App) -> None:
    @app.task
    def later() -> None:
        raise rota.Retry("not yet", after=600)

    job = later.enqueue()
    runner = OneShot(app)

    async def scenario() -> rota.Job:
        running = asyncio.create_task(runner.run(job.id))
        await async_wait_for(lambda: app.get_job(job.id).state is JobState.RETRYABLE)  # type: ignore[union-attr]
        runner.stop()
        return await asyncio.wait_for(running, timeout=10)

    final = asyncio.run(scenario())
    assert final.state is JobState.RETRYABLE and final.attempt == 1 and runner.attempts == 1
    assert _exit_code(final) == EXIT_INTERRUPTED


def test_a_job_taken_by_a_worker_is_followed_to_its_end(
    app: rota.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oneshot, "FOLLOW_INTERVAL", 0.02)

    @app.task
    def noop() -> str:
        return "ran here"

    job = noop.enqueue()
    taken = app.driver.job_claim(job.id, "another-worker", 30)  # a worker got there first
    assert taken is not None
    looked = threading.Event()
    job_get = app.driver.job_get

    def spy(job_id: int) -> rota.Job | None:
        found = job_get(job_id)
        looked.set()
        return found

    monkeypatch.setattr(app.driver, "job_get", spy)
    runner = OneShot(app)

    async def scenario() -> rota.Job:
        running = asyncio.create_task(runner.run(job.id))
        await async_wait_for(looked.is_set, timeout=10)  # it found the job taken: following
        assert not running.done()
        await asyncio.to_thread(app.driver.job_complete_many, [done(taken)])  # the worker ends it
        return await asyncio.wait_for(running, timeout=10)

    final = asyncio.run(scenario())
    assert final.state is JobState.COMPLETED and final.worker == "another-worker"
    assert runner.attempts == 0


# --- scale-hint ---------------------------------------------------------------------------


def test_scale_hint_reads_the_signal_and_the_run_times(run: Invoke, app: rota.App) -> None:
    @app.task(queue="tickets")
    def sell(n: int) -> None: ...

    sell.enqueue_many([{"n": i} for i in range(5)])
    assert rota.testing.drain(app, ["tickets"]).completed == 5
    sell.enqueue_many([{"n": i} for i in range(40)])
    result = run("scale-hint", "--queue", "tickets", "--concurrency", "2", "--max", "8", "--json")
    assert result.exit_code == 0, result.output
    (hint,) = json.loads(result.stdout)
    assert (hint["queue"], hint["value"], hint["backlog"], hint["running"]) == (
        "tickets",
        40,
        40,
        0,
    )
    assert hint["samples"] == 5 and hint["mean_s"] is not None
    assert hint["keda_replicas"] == 8  # ceil(40 / (2 x 2)) = 10, capped at --max 8
    assert 1 <= hint["desired"] <= 8 and hint["suggested_target"] >= 2
    text = run("scale-hint", "--queue", "tickets", "--concurrency", "2", "--max", "8")
    assert "queue tickets: 40 runnable, 0 running" in text.stdout
    assert "KEDA with target 4 per replica: 8 replica(s) (active, bounds 0..8)" in text.stdout
    bad = run("scale-hint", "--queue", "tickets", "--min", "9", "--max", "8")
    assert bad.exit_code == 2
