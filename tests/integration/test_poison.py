"""Poison-proof workers (#17), on both dialects with a real worker: bad input is refused
the same way on SQLite and PostgreSQL, and no value a task raises or returns can stall
the worker, jam its completions or lose an outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import rota
from rota.worker.fetcher import claim_now
from tests.helpers import async_wait_for, fast_settings, run_worker_until


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _finished(app: rota.App, *ids: int) -> bool:
    return all((j := app.get_job(i)) is not None and j.state.finished for i in ids)


# --- case 3 and 4: the same clear error on both dialects, before anything is written ---


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"x": "a\ud800b"}, r"arguments of .* contains a lone surrogate \(\\ud800\)"),
        ({"x": nested(10_000)}, "arguments of .* is nested too deeply"),
        ({"x": "a\x00b"}, "arguments of .* contains a NUL character"),
        ({"key": "order\x00-1"}, "key contains a NUL character"),
        ({"key": "order-\udc80"}, r"key contains a lone surrogate \(\\udc80\)"),
        ({"partition_key": "p\x00"}, "partition_key contains a NUL character"),
        ({"partition_key": "p\ud800"}, "partition_key contains a lone surrogate"),
    ],
)
def test_unstorable_arguments_and_keys_are_a_payload_error_on_both_dialects(
    app: rota.App, options: dict[str, Any], message: str
) -> None:
    @app.task(name="poison.take")
    def take(x: Any = None) -> None: ...

    with pytest.raises(rota.PayloadError, match=message):
        take.enqueue(**options)
    if "key" not in options:  # enqueue_many has no per-job key; all or nothing is written
        with pytest.raises(rota.PayloadError, match=message):
            take.enqueue_many([{"x": 1}, {"x": options.get("x")}], **_partition(options))
    assert app.list_jobs() == []


def _partition(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k == "partition_key"}


def test_other_keys_and_names_refuse_unstorable_text(app: rota.App) -> None:
    with pytest.raises(rota.TaskDefinitionError, match="task name contains a NUL"):
        app.task(name="bad\x00name")(lambda: None)
    assert "bad\x00name" not in app.tasks
    with pytest.raises(rota.PayloadError, match="key contains a NUL"):
        app.publish("order.placed", {"id": 1}, key="k\x00")
    with pytest.raises(rota.ArgumentsError, match=r"payload .* contains a lone surrogate"):
        app.publish("order.placed", {"id": "\ud800"})


def test_queue_names_tenants_and_labels_refuse_unstorable_text_alike(app: rota.App) -> None:
    """Queue names, tenants and labels are short ASCII names on both dialects, so a NUL or
    a lone surrogate in them is an ArgumentsError before anything is written."""

    @app.task(name="poison.take2")
    def take() -> None: ...

    for options, message in [
        ({"queue": "q\x00"}, "bad queue name"),
        ({"queue": "q\ud800"}, "bad queue name"),
        ({"tenant": "t\x00"}, "bad queue name"),
        ({"requires": {"gpu\x00"}}, "bad label"),
        ({"requires": {"gpu\udcff"}}, "bad label"),
    ]:
        with pytest.raises(rota.ArgumentsError, match=message):
            take.enqueue(**options)
    assert app.list_jobs() == []


def test_a_progress_message_that_cannot_be_stored_fails_the_task_clearly(app: rota.App) -> None:
    """ctx.progress refuses a message the progress writer could never store (a NUL on
    PostgreSQL): the task sees a PayloadError, instead of the writer failing for ever."""

    @app.task(name="poison.progress", max_attempts=1)
    def report(ctx: rota.Context) -> None:
        ctx.progress(0.5, "half\x00way")

    job = report.enqueue()
    worker = rota.Worker(app, fast_settings())
    asyncio.run(run_worker_until(worker, lambda: _finished(app, job.id)))
    done = app.get_job(job.id)
    assert done is not None and done.state is rota.JobState.DISCARDED
    assert done.history[0].error_type == "rota.errors.PayloadError"
    assert "a progress message contains a NUL character" in (done.history[0].message or "")


# --- case 10: the pool checks a connection before handing it out -----------------------


def test_after_the_server_drops_a_connection_the_next_enqueue_succeeds(pg_url: str) -> None:
    """A PostgreSQL restart ends every session (FATAL 57P01, then the socket closes); here
    the app's pooled session is ended the same way, with pg_terminate_backend. The next
    enqueue gets a fresh connection instead of failing on the dead one (#17, case 10).
    (SQLite has no server and no pool of sessions to go stale.)"""
    from tests.conftest import end_backend

    app = rota.App(pg_url)
    app.migrate()
    try:

        @app.task(name="poison.note")
        def note(n: int) -> None: ...

        note.enqueue(n=0)
        with app.transaction() as conn:
            pid = conn.info.backend_pid
        end_backend(pid)
        jobs = [note.enqueue(n=n) for n in range(1, 4)]  # none of them fails
        assert [j.args["n"] for j in jobs] == [1, 2, 3]
        assert len(app.list_jobs()) == 4
    finally:
        app.close()


# --- cases 1, 2, 3 and 5: whatever a task raises or returns, its attempt ends ----------


class StrRaises(Exception):
    """An exception whose str() itself raises (a buggy __str__ in a client library)."""

    def __str__(self) -> str:
        raise ValueError("__str__ is broken")


def poison_tasks(app: rota.App) -> dict[str, rota.Task[Any, Any]]:
    backoff = rota.Backoff(base=0.01, cap=0.01)

    @app.task(name="poison.nul", max_attempts=2, backoff=backoff)
    def nul() -> None:
        raise RuntimeError("a\x00b")

    @app.task(name="poison.surrogate", max_attempts=2, backoff=backoff)
    def surrogate() -> None:
        raise RuntimeError("a\ud800b")

    @app.task(name="poison.str", max_attempts=2, backoff=backoff)
    def str_raises() -> None:
        raise StrRaises()

    @app.task(name="poison.discard_nul")
    def discard_nul() -> None:
        raise rota.Discard("refunded\x00 order \udcff")

    @app.task(name="poison.result_surrogate")
    def result_surrogate() -> str:
        return "x\ud800"

    @app.task(name="poison.result_deep")
    def result_deep() -> list[Any]:
        return nested(10_000)

    @app.task(name="poison.healthy")
    def healthy(n: int) -> int:
        return n

    return {
        "nul": nul,
        "surrogate": surrogate,
        "str": str_raises,
        "discard_nul": discard_nul,
        "result_surrogate": result_surrogate,
        "result_deep": result_deep,
        "healthy": healthy,
    }


def test_no_value_a_task_raises_or_returns_stalls_the_worker(app: rota.App) -> None:
    """Cases 1, 2 and 3: a NUL or a lone surrogate in an error message, an exception whose
    str() raises, an unstorable result: each attempt ends with its outcome recorded, and
    the healthy jobs beside them complete. The stored text is the same on both dialects."""
    tasks = poison_tasks(app)
    poison = {name: tasks[name].enqueue() for name in tasks if name != "healthy"}
    healthy = [tasks["healthy"].enqueue(n=n) for n in range(5)]
    ids = [j.id for j in [*poison.values(), *healthy]]
    worker = rota.Worker(app, fast_settings(queues={"default": 2}))
    asyncio.run(run_worker_until(worker, lambda: _finished(app, *ids), timeout=30))

    def job(name: str) -> rota.Job:
        found = app.get_job(poison[name].id)
        assert found is not None
        return found

    for j in healthy:
        done = app.get_job(j.id)
        assert done is not None and done.state is rota.JobState.COMPLETED, done
    nul, surrogate, broken = job("nul"), job("surrogate"), job("str")
    for failed in (nul, surrogate, broken):
        assert failed.state is rota.JobState.DISCARDED, failed.history
        assert [a.outcome.value for a in failed.history] == ["failed", "discarded"]
    # Escaped, never dropped: the text says what it held.
    assert nul.history[0].message == "a\\x00b"
    assert surrogate.history[0].message == "a\\ud800b"
    assert "RuntimeError: a\\x00b" in (nul.history[0].traceback or "")
    assert broken.history[0].error_type == f"{StrRaises.__module__}.StrRaises"
    assert broken.history[0].message == "<str() of StrRaises failed: ValueError>"
    assert "raise StrRaises()" in (broken.history[0].traceback or "")
    discarded = job("discard_nul")
    assert discarded.state is rota.JobState.DISCARDED
    assert discarded.history[0].message == "refunded\\x00 order \\udcff"
    for name, message in [
        ("result_surrogate", "contains a lone surrogate (\\ud800)"),
        ("result_deep", "is nested too deeply"),
    ]:
        unstorable = job(name)
        assert unstorable.state is rota.JobState.DISCARDED, unstorable.history
        (attempt,) = unstorable.history
        assert attempt.error_type == "rota.errors.PayloadError"
        assert message in (attempt.message or ""), attempt.message
        assert unstorable.result is None
    assert worker.completer.refused == 0


def test_jobs_show_prints_a_stored_lone_surrogate_escaped(
    app: rota.App, database_url: str, dialect: str
) -> None:
    """Case 5: `rota jobs show` in rich output on a job whose stored text has a lone
    surrogate. New text is escaped before it is stored (above); SQLite may still hold one
    from an older version, written here as that version did. PostgreSQL cannot store one."""
    import sqlite3

    from click.testing import CliRunner

    from rota.cli.main import cli

    tasks = poison_tasks(app)
    job = tasks["surrogate"].enqueue()
    asyncio.run(
        run_worker_until(
            rota.Worker(app, fast_settings()), lambda: _finished(app, job.id), timeout=30
        )
    )
    if dialect == "sqlite":
        with app.transaction() as conn:
            assert isinstance(conn, sqlite3.Connection)
            # As JSON text with the escape, the way json.dumps wrote it before (#17).
            conn.execute(
                "UPDATE rota_jobs SET history = json_set(history, '$[0].message', json(?)) "
                "WHERE id = ?",
                ('"old \\ud800 text"', job.id),
            )
    result = CliRunner().invoke(
        cli, ["jobs", "show", str(job.id), "--database-url", database_url], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "a\\ud800b" in result.output
    if dialect == "sqlite":
        assert "old \\ud800 text" in result.output


# --- one bad row never blocks the others ------------------------------------------------


def test_a_completion_the_database_refuses_is_recorded_as_a_failed_attempt(
    app: rota.App,
) -> None:
    """The completer writes in batches. When the database refuses a value of one outcome
    (SQLSTATE class 22 on PostgreSQL, malformed JSON on SQLite), the batch is split, the
    rest is written, and the offender is recorded as a failed attempt whose entry says the
    outcome could not be stored. Here the executor's outcome for one job is corrupted on
    its way to the completer, as an unforeseen bug would; nothing else is changed."""
    import dataclasses
    import threading

    gate = threading.Barrier(6, timeout=10)  # the six finish together: one batch

    @app.task(name="poison.plain", max_attempts=2, backoff=rota.Backoff(base=0.01, cap=0.01))
    def plain(ctx: rota.Context, n: int) -> int:
        if ctx.attempt == 1:
            gate.wait()
        return n

    jobs = [plain.enqueue(n=n) for n in range(6)]
    victim = jobs[2].id
    worker = rota.Worker(app, fast_settings(queues={"default": 6}))
    run = worker.executor.run

    async def corrupting(job: rota.Job, ctx: rota.Context, *runner: Any) -> Any:
        execution = await run(job, ctx, *runner)
        if job.id == victim and job.attempt == 1 and execution.completion is not None:
            execution.completion = dataclasses.replace(
                execution.completion, entry_json='{"outcome": "completed", broken'
            )
        return execution

    worker.executor.run = corrupting  # type: ignore[method-assign]
    asyncio.run(run_worker_until(worker, lambda: _finished(app, *(j.id for j in jobs)), timeout=30))
    for job in jobs:
        done = app.get_job(job.id)
        assert done is not None and done.state is rota.JobState.COMPLETED, done
    bad = app.get_job(victim)
    assert bad is not None
    first, second = bad.history
    assert first.outcome is rota.Outcome.FAILED and first.error_type == "rota.errors.PayloadError"
    assert (first.message or "").startswith("the outcome (completed) could not be stored")
    assert second.outcome is rota.Outcome.COMPLETED
    assert worker.completer.unwritable == 1 and worker.completer.refused == 0


def test_the_heartbeater_stops_renewing_an_outcome_that_is_never_written(
    app: rota.App,
) -> None:
    """A finished job is renewed while its outcome waits for the completer, but for one
    lease at most: an outcome that can never be written must not keep its job running
    for ever. Its lease runs out, and the rescuer runs the job again (a clock the test
    moves decides when)."""
    from rota.context import Context
    from rota.worker.heartbeat import Heartbeater

    @app.task(name="poison.plain2")
    def plain() -> None: ...

    plain.enqueue()
    (job,) = claim_now(app, "default", 1, "w", 5.0)
    now = [1000.0]
    beater = Heartbeater(app.driver, _db, lease=5.0, interval=1.0, clock=lambda: now[0])
    ctx = Context(job, worker_id="w", driver=app.driver)
    beater.track(job.id, job.lease_token or "", ctx)
    beater.submitted(job.id)  # its outcome went to the completer
    asyncio.run(beater.beat())
    first = app.get_job(job.id)
    assert first is not None and first.lease_expires_at is not None
    now[0] += 4.0  # within one lease of the hand-over: still renewed
    asyncio.run(beater.beat())
    second = app.get_job(job.id)
    assert second is not None and second.lease_expires_at is not None
    assert second.lease_expires_at > first.lease_expires_at
    now[0] += 2.0  # past it: left to expire, and the task is not told it lost its lease
    asyncio.run(beater.beat())
    third = app.get_job(job.id)
    assert third is not None and third.lease_expires_at == second.lease_expires_at
    assert beater.held == 0 and ctx.cancel_reason is None


async def _db(func: Any, *args: Any) -> Any:
    return await asyncio.to_thread(func, *args)


# --- case 6: returned jobs keep their place in line -------------------------------------


def test_jobs_returned_at_shutdown_keep_their_place_in_line(app: rota.App) -> None:
    """A job returned at SIGTERM keeps its run_at and priority: the next worker starts it
    before the jobs enqueued after it (#17, case 6)."""
    order: list[str] = []

    @app.task(name="poison.long")
    async def long(ctx: rota.Context) -> str:
        order.append(f"long#{ctx.attempt}")
        if ctx.attempt == 1:
            await asyncio.sleep(60)  # cut off by the shutdown
        return "done"

    @app.task(name="poison.short")
    def short(n: int) -> int:
        order.append(f"short{n}")
        return n

    first = long.enqueue()

    async def scenario() -> None:
        a = rota.Worker(app, fast_settings(queues={"default": 1}, grace=0.0, worker_id="A"))
        task_a = asyncio.create_task(a.run())
        await async_wait_for(lambda: order == ["long#1"])
        for n in range(20):  # enqueued after it, due before it if it were put at the back
            short.enqueue(n=n)
        a.stop()
        await asyncio.wait_for(task_a, 30)
        returned = app.get_job(first.id)
        assert returned is not None and returned.state is rota.JobState.AVAILABLE
        assert returned.run_at == first.run_at and returned.priority == first.priority
        b = rota.Worker(app, fast_settings(queues={"default": 1}, worker_id="B"))
        await run_worker_until(b, lambda: len(order) == 22, timeout=30)

    asyncio.run(scenario())
    assert order[:2] == ["long#1", "long#2"], order


def test_a_job_returned_at_shutdown_wakes_an_idle_worker(app: rota.App) -> None:
    """Another worker takes a returned job at once: it is woken, it does not wait for its
    next poll (30 s here)."""
    started: list[str] = []

    @app.task(name="poison.long2")
    async def long(ctx: rota.Context) -> str:
        started.append(ctx.worker_id)
        if ctx.attempt == 1:
            await asyncio.sleep(60)
        return "done"

    job = long.enqueue()

    async def scenario() -> None:
        a = rota.Worker(app, fast_settings(queues={"default": 1}, grace=0.0, worker_id="A"))
        b = rota.Worker(
            app, fast_settings(queues={"default": 1}, poll_interval=30.0, worker_id="B")
        )
        task_a = asyncio.create_task(a.run())
        await async_wait_for(lambda: started == ["A"])
        task_b = asyncio.create_task(b.run())
        try:
            await async_wait_for(lambda: b.ready and b.fetchers["default"].fetches > 0)
            a.stop()
            await asyncio.wait_for(task_a, 30)
            await async_wait_for(lambda: started == ["A", "B"], timeout=5)
        finally:
            b.stop()
            await asyncio.wait_for(task_b, 30)

    asyncio.run(scenario())
    done = app.get_job(job.id)
    assert done is not None and done.state is rota.JobState.COMPLETED


# --- case 7: the whole shutdown fits in the grace plus 1 s ------------------------------


def test_shutdown_takes_at_most_the_grace_plus_one_second(app: rota.App) -> None:
    """A plain task that ignores the stop keeps its thread; the worker still returns its
    job and is done within --grace plus 1 s (#17, case 7)."""
    import threading
    import time

    release = threading.Event()

    @app.task(name="poison.stuck")
    def stuck() -> None:
        release.wait(60)  # ignores ctx.cancelled, like a call with no timeout

    job = stuck.enqueue()
    worker = rota.Worker(app, fast_settings(grace=0.5))

    async def scenario() -> float:
        task = asyncio.create_task(worker.run())
        await async_wait_for(lambda: worker.running == 1)
        started = time.monotonic()
        worker.stop()
        await asyncio.wait_for(task, 30)
        return time.monotonic() - started

    try:
        took = asyncio.run(scenario())
    finally:
        release.set()
    assert took < 0.5 + 1.0, took
    returned = app.get_job(job.id)
    assert returned is not None and returned.state is rota.JobState.AVAILABLE
    assert [a.outcome for a in returned.history] == [rota.Outcome.SHUTDOWN]


# --- case 8: hung sync tasks are seen, and their slots come back ------------------------


def test_hung_sync_tasks_are_logged_counted_and_shown_in_readyz(
    app: rota.App, caplog: pytest.LogCaptureFixture
) -> None:
    """A plain task past its timeout keeps its thread and its slot; the worker says so in
    its log, counts it, and /readyz turns false once every slot is hung. When the threads
    return, the slots come back and the worker is ready again (#17, case 8)."""
    import threading

    import httpx

    from rota.telemetry.prometheus import render_text
    from rota.worker.metrics import worker_registry

    release = threading.Event()

    @app.task(name="poison.hang", timeout=0.2, max_attempts=1)
    def hang() -> None:
        release.wait(60)

    @app.task(name="poison.after")
    def after() -> str:
        return "ran"

    hung = [hang.enqueue() for _ in range(2)]
    worker = rota.Worker(app, fast_settings(queues={"default": 2}, health_port=0))

    def readyz() -> httpx.Response:
        assert worker.health is not None
        return httpx.get(f"http://127.0.0.1:{worker.health.port}/readyz", timeout=5)

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        try:
            await async_wait_for(lambda: _finished(app, *(j.id for j in hung)))
            await async_wait_for(lambda: worker.hung == 2)
            answer = await asyncio.to_thread(readyz)
            assert answer.status_code == 503, answer.text
            assert answer.json()["hung"] == 2
            assert "all 2 slots are hung" in answer.json()["reason"]
            text = render_text(worker_registry(worker))
            assert "rota_worker_hung_slots 2.0" in text
            assert "rota_worker_tasks_hung_total 2.0" in text
            release.set()
            await async_wait_for(lambda: worker.hung == 0)
            assert (await asyncio.to_thread(readyz)).status_code == 200
            later = after.enqueue()  # a slot is free again
            await async_wait_for(lambda: _finished(app, later.id))
            assert "rota_worker_hung_slots 0.0" in render_text(worker_registry(worker))
        finally:
            release.set()
            worker.stop()
            await asyncio.wait_for(task, 30)

    with caplog.at_level("WARNING", logger="rota.worker"):
        asyncio.run(scenario())
    for job in hung:
        done = app.get_job(job.id)
        assert done is not None and done.state is rota.JobState.DISCARDED
        assert done.history[0].error_type == "rota.errors.TaskTimeoutError"
    warnings = [r.getMessage() for r in caplog.records if "still running" in r.getMessage()]
    assert len(warnings) == 2, warnings
    assert "poison.hang" in warnings[0] and "slot" in warnings[0]


# --- case 9: loops back off, say why, and never swallow a cancellation ------------------


def test_the_fetcher_backs_off_exponentially_and_recovers(
    app: rota.App, caplog: pytest.LogCaptureFixture
) -> None:
    """While claims fail (the jobs table is renamed away under the worker), the fetcher
    waits longer after each failure, with jitter, and logs an expected failure as one
    line; when the table is back, it claims again (#17, case 9)."""
    import re

    @app.task(name="poison.later")
    def later() -> str:
        return "ran"

    def rename(old: str, new: str) -> None:
        with app.transaction() as conn:
            conn.execute(f"ALTER TABLE {old} RENAME TO {new}")

    def failures() -> list[float]:
        pattern = re.compile(r"fetching from queue 'default' failed .* retrying in ([0-9.]+)s")
        found = [pattern.search(r.getMessage()) for r in caplog.records]
        return [float(m.group(1)) for m in found if m]

    worker = rota.Worker(app, fast_settings(queues={"default": 1}, maintenance=False))

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        try:
            await async_wait_for(lambda: worker.ready and worker.fetchers["default"].fetches)
            await asyncio.to_thread(rename, "rota_jobs", "rota_jobs_away")
            worker.fetchers["default"].wake()
            await async_wait_for(lambda: len(failures()) >= 4, timeout=20)
            await asyncio.to_thread(rename, "rota_jobs_away", "rota_jobs")
            job = later.enqueue()
            await async_wait_for(lambda: _finished(app, job.id), timeout=20)
        finally:
            worker.stop()
            await asyncio.wait_for(task, 30)

    with caplog.at_level("WARNING", logger="rota.worker"):
        asyncio.run(scenario())
    delays = failures()
    # Each delay is jittered within [d/2, d] with d doubling from 0.5 s: the fourth is
    # at least 2 s, where a backoff that never grows would stay at 0.5 s.
    assert delays[3] >= 2.0, delays
    assert all(d <= 30.0 for d in delays)
    fetch_records = [r for r in caplog.records if "fetching from queue" in r.getMessage()]
    assert all(r.exc_info is None for r in fetch_records)  # expected: one line each


def test_an_unexpected_error_in_a_loop_is_logged_with_its_traceback(
    app: rota.App, caplog: pytest.LogCaptureFixture
) -> None:
    """A maintenance service that fails with a bug (not a database outage) is logged with
    its traceback, then retried with backoff; an expected failure is one line."""
    from rota.errors import DatabaseUnavailableError
    from rota.maintenance.service import PeriodicService

    class Flaky(PeriodicService):
        name = "flaky"
        leader_only = False

        def run_once(self) -> object:
            self.runs += 1
            if self.runs == 1:
                raise KeyError("a bug")
            if self.runs == 2:
                raise DatabaseUnavailableError("the database is away")
            return 0

    service = Flaky(app.driver, 0.01)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(_db, lambda: True, stop))
        await async_wait_for(lambda: service.runs >= 3)
        stop.set()
        await asyncio.wait_for(task, 10)

    with caplog.at_level("WARNING", logger="rota.maintenance"):
        asyncio.run(scenario())
    (bug,) = [r for r in caplog.records if "KeyError" in r.getMessage()]
    assert bug.exc_info is not None and "a bug" in caplog.text
    (away,) = [r for r in caplog.records if "the database is away" in r.getMessage()]
    assert away.exc_info is None


def test_cancelling_a_running_job_task_is_not_swallowed(app: rota.App) -> None:
    """When the loop tears the worker down, a job's task is cancelled; the cancellation
    must propagate, not be logged away as a crash (#17, case 9)."""

    @app.task(name="poison.wait")
    async def wait() -> None:
        await asyncio.sleep(60)

    job = wait.enqueue()
    worker = rota.Worker(app, fast_settings())

    async def scenario() -> bool:
        task = asyncio.create_task(worker.run())
        try:
            await async_wait_for(lambda: job.id in worker._running)
            job_task, _ = worker._running[job.id]
            job_task.cancel()
            await asyncio.wait([job_task], timeout=5)
            return job_task.cancelled()
        finally:
            worker.stop()
            await asyncio.wait_for(task, 30)

    assert asyncio.run(scenario())
