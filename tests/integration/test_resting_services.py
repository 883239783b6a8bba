"""An idle leader's controllers rest where the worker hears of every commit (SQLite's
change watcher): the batch, workflow, hold and count passes that found nothing to do
wait for the next commit instead of looking every interval, and a commit from another
process wakes them at once. The stager rests too, until the next job falls due. On
PostgreSQL, whose notifications tell of new jobs only, they keep their interval (#16: an
idle worker costs under 1% of a core)."""

from __future__ import annotations

import asyncio
import time

import rota
from rota.drivers.base import JobInsert
from rota.maintenance.service import DUE_SLACK, PeriodicService
from rota.maintenance.stager import Stager, StageReport
from tests.helpers import fast_settings

RESTING = ("batches", "workflows", "holds", "counts", "stager", "expirer", "sagas", "cron")


def _service(worker: rota.Worker, name: str) -> PeriodicService:
    return next(s for s in worker.services if s.name == name)


async def _lead(worker: rota.Worker, task: asyncio.Task[None]) -> None:
    deadline = time.monotonic() + 10
    while not (worker.elector.is_leader and all(_service(worker, n).runs for n in RESTING)):
        assert not task.done() and time.monotonic() < deadline, "the worker never led"
        await asyncio.sleep(0.02)


def _idle_passes(app: rota.App, seconds: float) -> tuple[dict[str, int], rota.Worker]:
    """Passes each service ran in `seconds` of an idle leader whose controllers look every
    0.2 s and its hold service, stager, expirer, saga supervisor and cron every 0.1 s
    (resting, every 2 and 1 s), and
    whose rescuer, which never rests, every 0.1 s. (The count folder looks every 2 s: its
    rest shows in its `resting` flag, not in a count over 2 s.) Leadership and the
    worker's advertised row are renewed at their default pace (every 5 and 10 s), so the
    worker's own commits seldom wake anything."""
    settings = fast_settings(
        batch_interval=0.2,
        workflow_interval=0.2,
        hold_interval=0.1,
        stage_interval=0.1,
        cron_interval=0.1,
        rescue_interval=0.1,
        leader_ttl=15.0,
        lease=30.0,
        heartbeat=10.0,
    )
    worker = rota.Worker(app, settings)

    async def scenario() -> dict[str, int]:
        task = asyncio.create_task(worker.run())
        try:
            await _lead(worker, task)
            await asyncio.sleep(0.5)  # past the first passes and their writes
            before = {s.name: s.runs for s in worker.services}
            await asyncio.sleep(seconds)
            passes = {s.name: s.runs - before[s.name] for s in worker.services}
            passes.update({f"{s.name} resting": int(s.resting) for s in worker.services})
            return passes
        finally:
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    return asyncio.run(scenario()), worker


def test_an_idle_sqlite_leader_rests_its_controllers(sqlite_url: str) -> None:
    app = rota.App(sqlite_url)
    app.migrate()
    passes, worker = _idle_passes(app, 2.0)
    assert passes["rescuer"] >= 8, passes  # the yardstick: a service that never rests
    for name in RESTING:
        assert _service(worker, name).rests
        assert passes[f"{name} resting"], (name, passes)
        if name != "counts":
            assert passes[name] <= passes["rescuer"] / 4, (name, passes)


def test_a_postgres_leader_keeps_its_intervals(pg_url: str) -> None:
    app = rota.App(pg_url)
    app.migrate()
    passes, worker = _idle_passes(app, 2.0)
    for name in ("batches", "workflows", "holds", "stager", "expirer", "sagas", "cron"):
        assert not _service(worker, name).rests and not passes[f"{name} resting"]
        assert passes[name] >= passes["rescuer"] / 4, (name, passes)


def test_a_commit_from_elsewhere_wakes_a_resting_batch_controller(sqlite_url: str) -> None:
    """A batch created by another process after the controller went to rest (5 s at the
    default 0.5 s interval) still finishes within a fraction of that rest."""

    def part(ctx: rota.Context) -> int:
        return ctx.index

    app = rota.App(sqlite_url)
    app.task(part)
    app.migrate()
    worker = rota.Worker(app, fast_settings(leader_ttl=15.0, lease=30.0, heartbeat=10.0))
    controller = _service(worker, "batches")

    async def scenario() -> float:
        task = asyncio.create_task(worker.run())
        try:
            await _lead(worker, task)
            await asyncio.sleep(0.5)
            assert controller.resting and controller.rest == 5.0
            other = rota.App(sqlite_url)  # another connection, as another process would
            same = other.task(part)
            status = await asyncio.to_thread(other.batch, same, completions=4, indexed=True)
            started = time.monotonic()
            while not (await asyncio.to_thread(app.batches.get, status.id)).finished:
                assert time.monotonic() - started < 10, "the batch never finished"
                await asyncio.sleep(0.02)
            return time.monotonic() - started
        finally:
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    assert asyncio.run(scenario()) < 2.5


def test_a_resting_stager_starts_a_scheduled_job_when_it_falls_due(sqlite_url: str) -> None:
    """A job scheduled 1.5 s ahead by another connection wakes the resting stager (its
    rest is 5 s at the default 1 s interval), which then rests until the job falls due
    and stages it then: the job starts on time, not at the end of a rest."""
    app = rota.App(sqlite_url)
    ran: list[float] = []
    app.task(name="payout.report")(lambda: ran.append(time.time()))
    app.migrate()
    worker = rota.Worker(
        app, fast_settings(stage_interval=1.0, leader_ttl=15.0, lease=30.0, heartbeat=10.0)
    )
    stager = _service(worker, "stager")

    async def scenario() -> rota.Job:
        task = asyncio.create_task(worker.run())
        try:
            await _lead(worker, task)
            await asyncio.sleep(1.2)  # past the first pass: nothing waits, so it rests
            assert stager.resting and stager.rest == 5.0
            other = rota.App(sqlite_url)  # another connection, as another process would
            report = other.task(name="payout.report")(lambda: None)
            job = await asyncio.to_thread(report.enqueue, delay=1.5)
            deadline = time.monotonic() + 10
            while not ran:
                assert time.monotonic() < deadline, "the scheduled job never ran"
                await asyncio.sleep(0.02)
            return job
        finally:
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    job = asyncio.run(scenario())
    late = ran[0] - job.run_at.timestamp()
    assert -0.05 < late < 0.6, late


def _not_asked() -> float | None:
    raise AssertionError("a service that may not rest asked when its work falls due")


def test_the_stager_rests_until_the_next_job_falls_due(sqlite_url: str) -> None:
    """Where it may rest, the stager looks first (a read): with nothing due it writes
    nothing and rests until the earliest waiting job falls due (a hair after), the whole
    rest when none waits; it stages what is due, and then does not rest (more may be due
    at once)."""
    app = rota.App(sqlite_url)
    app.migrate()
    stager = Stager(app.driver, 1.0)
    stager.rests = True
    idle, rest = stager.pass_once()
    assert idle is None and app.driver.job_next_due() is None  # looked, did not write
    assert rest == stager.rest == 5.0
    app.driver.job_insert_many([JobInsert("t", "q", "{}", 0, 3, delay=60.0)])
    assert stager.pass_once()[1] == 5.0  # at most the whole rest
    app.driver.job_insert_many([JobInsert("t", "q", "{}", 0, 3, delay=3.0)])
    waiting, rest = stager.pass_once()
    assert waiting is None and app.driver.job_next_due() is not None
    assert 2.5 < (rest or 0.0) <= 3.01 + DUE_SLACK
    app.driver.job_insert_many([JobInsert("t", "q", "{}", 0, 3, delay=0.01)])
    time.sleep(0.05)
    staged, rest = stager.pass_once()
    assert staged == StageReport(staged=1) and rest is None
    stager.rests = False  # PostgreSQL: no rest, so the extra query is not made
    stager.due = _not_asked  # type: ignore[method-assign]
    assert stager.pass_once() == (StageReport(staged=0), None)


def test_a_hold_service_with_a_breaker_to_watch_does_not_rest(sqlite_url: str) -> None:
    """A breaker's cool-down ends with time, not with a commit: while a queue has one (or
    windows), the hold service keeps its interval."""
    app = rota.App(sqlite_url)
    app.migrate()
    app.queues.set_breaker("mail", cooldown=5.0)
    passes, worker = _idle_passes(app, 2.0)
    holds = _service(worker, "holds")
    assert holds.rests and not holds.resting
    assert passes["holds"] >= 3, passes  # every 0.5 s (it would rest 5 s)


def test_a_resting_service_looks_no_more_often_than_its_interval(sqlite_url: str) -> None:
    """Commits streaming in (here one every 10 ms, from another connection) each wake a
    resting service, but it still runs at most one pass per interval."""
    app = rota.App(sqlite_url)
    app.migrate()
    settings = fast_settings(batch_interval=0.2, leader_ttl=15.0, lease=30.0, heartbeat=10.0)
    worker = rota.Worker(app, settings)
    controller = _service(worker, "batches")
    other = rota.App(sqlite_url)
    elsewhere = other.task(name="elsewhere", queue="not-served")(lambda: None)

    def commits(seconds: float) -> int:
        count, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            elsewhere.enqueue()
            count += 1
            time.sleep(0.01)
        return count

    async def scenario() -> tuple[int, int]:
        task = asyncio.create_task(worker.run())
        try:
            await _lead(worker, task)
            before = controller.runs
            made = await asyncio.to_thread(commits, 2.0)
            return controller.runs - before, made
        finally:
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    passes, made = asyncio.run(scenario())
    assert made >= 50, made
    assert 2 <= passes <= 2.0 / 0.2 + 2, passes
