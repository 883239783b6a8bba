"""Cut off, not stuck (#21): a worker behind a TCP proxy (tests/proxy.py) that stops
forwarding in both directions, sockets open, on real PostgreSQL. Each test is one numbered
case of the issue; short leases keep them short. The database is watched directly (not
through the proxy), as another worker would see it."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

import rota
from rota.telemetry.prometheus import render_text
from rota.worker.health import LoopMonitor, WorkerHealth
from rota.worker.metrics import worker_registry
from tests.conftest import PG_URL
from tests.helpers import async_wait_for, fast_settings
from tests.proxy import TcpProxy

pytestmark = [pytest.mark.postgres]

LEASE = 3.0
HEARTBEAT = 0.5


@dataclass
class Partition:
    direct: rota.App  # how the database looks from elsewhere
    app: rota.App  # the worker's app, behind the proxy
    proxy: TcpProxy
    url: str
    events: list[tuple[float, str]] = field(default_factory=list)

    def task(self, **options: Any) -> Callable[[Callable[..., Any]], rota.Task[Any, Any]]:
        """Register a task on both apps under one name: the worker runs it, the direct
        app can enqueue it while the worker is cut off."""

        def register(func: Callable[..., Any]) -> rota.Task[Any, Any]:
            self.direct.task(name=func.__name__, **options)(func)
            return self.app.task(name=func.__name__, **options)(func)

        return register

    def note(self, what: str) -> None:
        self.events.append((time.monotonic(), what))

    def db_now_before(self, job_id: int) -> bool:
        """The job's lease in the database has not run out yet (read directly)."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT lease_expires_at > now() FROM rota_jobs WHERE id = %s", (job_id,)
            ).fetchone()
        return bool(row and row[0])


@pytest.fixture
def part(pg_url: str) -> Iterator[Partition]:
    direct = rota.App(pg_url)
    direct.migrate()
    server = urlsplit(PG_URL)
    proxy = TcpProxy((server.hostname or "127.0.0.1", server.port or 5432)).start()
    app = rota.App(proxy.url(pg_url))
    try:
        yield Partition(direct, app, proxy, pg_url)
    finally:
        proxy.forward()
        app.close()
        direct.close()
        proxy.stop()


def settings(**overrides: object) -> rota.WorkerSettings:
    values: dict[str, object] = dict(
        lease=LEASE, heartbeat=HEARTBEAT, maintenance=False, queues={"default": 4}
    )
    values.update(overrides)
    return fast_settings(**values)


async def started(worker: rota.Worker) -> asyncio.Task[None]:
    task = asyncio.create_task(worker.run())
    await async_wait_for(lambda: worker.ready, timeout=10)
    return task


async def stopped(worker: rota.Worker, task: asyncio.Task[None]) -> None:
    worker.halt()
    await asyncio.wait_for(task, timeout=30)


# --- 1. a database call on a silent connection waits for ever ------------------------------


def test_1_a_transaction_on_a_silent_link_is_cut_and_its_slot_comes_back(
    part: Partition,
) -> None:
    """A sync task blocked in ctx.transaction() when the link goes silent gets an error
    while the link is still cut (at its lease deadline), and after the heal every slot
    runs jobs again."""
    entered = threading.Event()
    returned: list[tuple[float, str]] = []
    running = 0
    most = 0
    lock = threading.Lock()

    @part.task()
    def write(ctx: rota.Context) -> None:
        try:
            with ctx.transaction() as conn:
                conn.execute("SELECT 1")
                entered.set()
                conn.execute("SELECT pg_sleep(0.2)")  # sent into the black hole
        except Exception as exc:
            returned.append((time.monotonic(), type(exc).__name__))
            raise
        returned.append((time.monotonic(), "ok"))

    @part.task()
    def count(ctx: rota.Context) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.4)
        with lock:
            running -= 1

    async def scenario() -> None:
        worker = rota.Worker(part.app, settings(queues={"default": 2}))
        task = await started(worker)
        try:
            for _ in range(2):
                part.direct.enqueue("write")
            await async_wait_for(lambda: worker.running == 2 and entered.is_set())
            await asyncio.sleep(0.1)  # both are inside their transaction
            part.proxy.blackhole()
            cut_at = time.monotonic()
            # Both threads come back while the link is still silent, within the lease.
            await async_wait_for(lambda: len(returned) == 2, timeout=LEASE + 2)
            assert all(at - cut_at < LEASE for at, _ in returned), returned
            assert all(what != "ok" for _, what in returned), returned
            part.proxy.forward()
            healed = time.monotonic()
            more = [part.direct.enqueue("count") for _ in range(4)]
            await async_wait_for(
                lambda: all(_state(part.direct, j.id) == "completed" for j in more),
                timeout=15,
            )
            assert most == 2, "every slot runs jobs again after the heal"
            assert time.monotonic() - healed < 8
        finally:
            part.proxy.forward()
            await stopped(worker, task)

    asyncio.run(scenario())


# --- 2. a worker keeps running jobs whose lease has run out --------------------------------


def test_2_jobs_are_stopped_before_their_lease_runs_out_while_cut_off(
    part: Partition, caplog: pytest.LogCaptureFixture
) -> None:
    """ctx.cancelled turns true (and an async task is cancelled) before the lease can run
    out in the database, while the worker is still cut off; LeaseLost names the jobs."""
    seen: dict[str, float] = {}

    @part.task()
    def slow_sync(ctx: rota.Context) -> None:
        while not ctx.wait_cancelled(0.05):
            pass
        seen["sync"] = time.monotonic()

    @part.task()
    async def slow_async(ctx: rota.Context) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen["async"] = time.monotonic()
            raise

    async def scenario() -> None:
        worker = rota.Worker(part.app, settings())
        task = await started(worker)
        try:
            a = part.direct.enqueue("slow_sync")
            b = part.direct.enqueue("slow_async")
            await async_wait_for(lambda: worker.running == 2)
            beats = worker.heartbeater.beats
            await async_wait_for(lambda: worker.heartbeater.beats > beats)  # renewed once
            with caplog.at_level(logging.ERROR, logger="rota.worker"):
                part.proxy.blackhole()
                cut_at = time.monotonic()
                await async_wait_for(lambda: len(seen) == 2, timeout=LEASE + 2)
                # The database still holds both leases: the worker stopped first.
                assert part.db_now_before(a.id) and part.db_now_before(b.id)
                assert all(at - cut_at < LEASE for at in seen.values()), seen
                # The fast rescue (#17) frees a worker's jobs once the server drops its
                # presence session; with the keepalives the worker asks the server for,
                # that comes after the worker stopped them, never before.
                earliest = worker.settings.server_detection.earliest
                assert all(at - cut_at < earliest for at in seen.values()), (seen, earliest)
                lost = [r.getMessage() for r in caplog.records if "LeaseLost" in r.message]
                assert lost and str(a.id) in lost[0] and str(b.id) in lost[0], lost
        finally:
            part.proxy.forward()
            await stopped(worker, task)

    asyncio.run(scenario())


def test_2_a_lost_presence_session_stops_every_job_at_once(part: Partition) -> None:
    """When the database may hand a worker's jobs on at once (its presence session
    ended, #17), the worker stops them at once, whatever their lease clock says."""
    seen: list[float] = []

    @part.task()
    def slow(ctx: rota.Context) -> None:
        while not ctx.wait_cancelled(0.05):
            pass
        seen.append(time.monotonic())

    async def scenario() -> None:
        worker = rota.Worker(part.app, settings())
        task = await started(worker)
        try:
            part.direct.enqueue("slow")
            await async_wait_for(lambda: worker.running == 1)
            asked = time.monotonic()
            assert len(worker.heartbeater.fence_all("presence session ended")) == 1
            await async_wait_for(lambda: seen, timeout=2)
            assert seen[0] - asked < 0.5
        finally:
            await stopped(worker, task)

    asyncio.run(scenario())


# --- 3. claiming ignores the heartbeat -----------------------------------------------------


def test_3_claims_pause_while_cut_off_and_no_job_starts_on_a_late_claim(
    part: Partition,
) -> None:
    """A claim whose answer is held back past the lease never starts its job; claims
    pause while heartbeats fail and resume the moment one succeeds."""
    starts: list[tuple[int, int, bool]] = []

    @part.task()
    def record(ctx: rota.Context) -> None:
        starts.append((ctx.job.id, ctx.attempt, part.db_now_before(ctx.job.id)))

    async def scenario() -> None:
        worker = rota.Worker(part.app, settings(maintenance=True, rescue_interval=0.2))
        task = await started(worker)
        try:
            fetcher = worker.fetchers["default"]
            # Requests pass, answers are held: the claim takes the job in the database
            # and its answer arrives after the lease has run out.
            part.proxy.mute()
            job = part.direct.enqueue("record")
            await asyncio.sleep(LEASE + 1)
            knew = worker.cut_off
            # Paused, not merely backing off after a failed claim: the gate is shut and
            # no claim goes out while it is.
            gate_shut = fetcher.paused()
            sent = fetcher.claim_sent
            await asyncio.sleep(1.0)
            paused = gate_shut and fetcher.paused() and fetcher.claim_sent == sent
            part.proxy.forward()
            await async_wait_for(lambda: _state(part.direct, job.id) == "completed", timeout=20)
            assert starts and all(in_time for _, _, in_time in starts), starts
            assert knew, "heartbeats got no answer: the worker knew it"
            assert paused, "no claim was sent while cut off"
        finally:
            part.proxy.forward()
            await stopped(worker, task)

    asyncio.run(scenario())


def test_3_a_job_claimed_longer_ago_than_its_lease_is_not_started(part: Partition) -> None:
    """The start path itself: a claim sent a lease ago starts nothing."""
    ran: list[int] = []

    @part.task()
    def record(ctx: rota.Context) -> None:
        ran.append(ctx.job.id)

    async def scenario() -> None:
        worker = rota.Worker(part.app, settings())
        task = await started(worker)
        try:
            fetcher = worker.fetchers["default"]
            part.direct.enqueue("record")
            await async_wait_for(lambda: ran)
            # The real run must be over (its slot back) before the late claim is replayed.
            await async_wait_for(lambda: not worker._running and fetcher.free == 4)
            job = part.app.get_job(ran[0])
            assert job is not None
            fetcher.free -= 1
            fetcher.claim_sent = time.monotonic() - LEASE
            worker._start_jobs([job], fetcher)
            assert job.id not in {j for j in worker._running}
            assert worker.heartbeater.lease_lost == 1 and fetcher.free == 4
        finally:
            await stopped(worker, task)

    asyncio.run(scenario())


# --- 4. a hung worker is silent -------------------------------------------------------------


def test_4_a_silent_database_is_logged_shown_and_counted(
    part: Partition, caplog: pytest.LogCaptureFixture
) -> None:
    """Within one heartbeat interval of the cut /readyz says no; the hung call is logged
    once with its age, counted, and cut at its deadline; the probe recovers after."""

    @part.task()
    def idle(ctx: rota.Context) -> None:
        ctx.wait_cancelled(30)

    async def scenario() -> None:
        worker = rota.Worker(part.app, settings())
        probes = WorkerHealth(worker, LoopMonitor())
        task = await started(worker)
        try:
            part.direct.enqueue("idle")
            await async_wait_for(lambda: worker.running == 1)
            await async_wait_for(lambda: probes.ready().ok and worker.heartbeater.beats >= 1)
            with caplog.at_level(logging.WARNING, logger="rota"):
                part.proxy.blackhole()
                cut_at = time.monotonic()
                await async_wait_for(lambda: not probes.ready().ok, timeout=HEARTBEAT * 4)
                assert time.monotonic() - cut_at < HEARTBEAT + worker.hang_after + 1.0

                def hung() -> list[str]:
                    return [
                        r.getMessage()
                        for r in caplog.records
                        if "job_lease_renew has had no answer for" in r.getMessage()
                    ]

                await async_wait_for(hung, timeout=15)  # logged, with its age
                assert worker.calls.hung_total >= 1
                # Cut at its deadline, so the next beat is tried (and logged) again.
                await async_wait_for(lambda: worker.heartbeater.failures >= 1, timeout=15)
                assert probes.live().ok, "a silent database is not a reason to restart"
                metrics = render_text(worker_registry(worker))
                assert "rota_worker_cut_off 1.0" in metrics
                assert _sample(metrics, "rota_worker_db_calls_hung_total") >= 1
                assert _sample(metrics, "rota_worker_db_calls_failed_total") >= 1
                assert _sample(metrics, "rota_worker_heartbeat_age_seconds") > HEARTBEAT
                assert _sample(metrics, "rota_worker_db_call_seconds_count") >= 1
            part.proxy.forward()
            await async_wait_for(lambda: probes.ready().ok, timeout=5)
            assert "rota_worker_cut_off 0.0" in render_text(worker_registry(worker))
        finally:
            part.proxy.forward()
            await stopped(worker, task)

    asyncio.run(scenario())


# --- 7. whole again at once -----------------------------------------------------------------


@pytest.mark.parametrize("how", ["blackhole", "reset"])
def test_7_whole_again_within_seconds_of_the_heal(part: Partition, how: str) -> None:
    """After a cut longer than the lease (black hole, or connections reset and new ones
    refused), every slot runs jobs again within 5 s of the heal, without a restart."""
    running = 0
    most_after: list[int] = []
    lock = threading.Lock()

    @part.task()
    def step(ctx: rota.Context, hold: float) -> None:
        nonlocal running
        with lock:
            running += 1
            most_after.append(running)
        # A job stopped by the cut runs again once rescued: briefly, then.
        ctx.wait_cancelled(hold if ctx.attempt == 1 else 0.5)
        with lock:
            running -= 1

    async def scenario() -> None:
        worker = rota.Worker(part.app, settings(maintenance=True, rescue_interval=0.2))
        task = await started(worker)
        try:
            for _ in range(4):
                part.direct.enqueue("step", {"hold": 30.0})
            await async_wait_for(lambda: worker.running == 4)
            if how == "blackhole":
                part.proxy.blackhole()
            else:
                part.proxy.refuse()
                part.proxy.reset()
            await asyncio.sleep(LEASE + 1)
            assert worker.running == 0, "every job was stopped while cut off"
            part.proxy.forward()
            healed = time.monotonic()
            most_after.clear()
            fresh = [part.direct.enqueue("step", {"hold": 1.0}) for _ in range(4)]
            await async_wait_for(lambda: max(most_after, default=0) == 4, timeout=10)
            recovered = time.monotonic() - healed
            assert recovered < 5.0, f"whole again after {recovered:.1f}s"
            await async_wait_for(
                lambda: all(_state(part.direct, j.id) == "completed" for j in fresh), timeout=10
            )
        finally:
            part.proxy.forward()
            await stopped(worker, task)

    asyncio.run(scenario())


def _state(app: rota.App, job_id: int) -> str | None:
    job = app.get_job(job_id)
    return None if job is None else job.state.value


# --- 5. two workers believed they were leader ------------------------------------------------


def test_5_a_cut_off_leader_steps_down_before_another_can_take_over(part: Partition) -> None:
    """The leader behind the proxy clears its flag before its term can end in the
    database, so that the other worker's election never overlaps it."""
    ttl = 2.0
    overlap: list[float] = []

    async def scenario() -> None:
        cut_off = rota.Worker(part.app, settings(maintenance=True, leader_ttl=ttl))
        first = await started(cut_off)
        await async_wait_for(lambda: cut_off.elector.is_leader, timeout=10)
        other = rota.Worker(part.direct, settings(maintenance=True, leader_ttl=ttl))
        second = await started(other)
        try:
            await asyncio.sleep(ttl)
            assert cut_off.elector.is_leader and not other.elector.is_leader
            part.proxy.blackhole()
            cut_at = time.monotonic()
            deadline = cut_at + 3 * ttl
            while time.monotonic() < deadline and not other.elector.is_leader:
                if cut_off.elector.is_leader and other.elector.is_leader:
                    overlap.append(time.monotonic() - cut_at)
                await asyncio.sleep(0.005)
            assert other.elector.is_leader, "the other worker took over"
            assert not cut_off.elector.is_leader
            assert not overlap, f"two leaders at once {overlap[0]:.2f}s into the cut"
            assert cut_off.elector.lapses == 1
            part.proxy.forward()
            await asyncio.sleep(ttl)
            assert not (cut_off.elector.is_leader and other.elector.is_leader)
        finally:
            part.proxy.forward()
            await stopped(other, second)
            await stopped(cut_off, first)

    asyncio.run(scenario())


# --- 6. a silently dead LISTEN goes unnoticed ------------------------------------------------


def test_6_a_silent_listen_connection_is_noticed_counted_and_replaced(
    part: Partition, caplog: pytest.LogCaptureFixture
) -> None:
    """The LISTEN connection NOTIFYs itself; when that stops coming back it warns once,
    counts it and reconnects, and after the heal wake-ups flow again."""
    woken: list[str | None] = []

    async def scenario() -> None:
        notifier: Any = part.app.driver.notifier()
        notifier.probe_every, notifier.probe_timeout = 0.3, 0.5
        task = asyncio.create_task(notifier.run(woken.append, lambda _: None))
        try:
            await async_wait_for(lambda: getattr(notifier, "proved_at", None) is not None)
            with caplog.at_level(logging.WARNING, logger="rota.postgres"):
                part.proxy.blackhole()
                await async_wait_for(lambda: notifier.silences == 1, timeout=5)
                await asyncio.sleep(0.5)
                silent = [r for r in caplog.records if "went silent" in r.getMessage()]
                assert len(silent) == 1, "warned once"
            proved = notifier.proved_at
            part.proxy.forward()  # the reconnect made during the cut goes through
            await async_wait_for(lambda: notifier.proved_at != proved, timeout=10)
            woken.clear()
            with psycopg.connect(part.url, autocommit=True) as conn:
                conn.execute("NOTIFY rota_jobs, 'default'")
            await async_wait_for(lambda: "default" in woken, timeout=5)
        finally:
            part.proxy.forward()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


def test_6_notifications_that_never_arrive_mean_polling_and_it_says_so(
    part: Partition, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection that answers queries but never receives its own NOTIFY (what a
    transaction-mode pooler does to LISTEN) is reported once: the worker polls."""
    part.proxy.drop_notifications = True
    # The proxy reads the protocol to drop notifications: no TLS or GSS encryption.
    plain = rota.App(part.proxy.url(part.url) + "&sslmode=disable&gssencmode=disable")

    async def scenario() -> None:
        notifier: Any = plain.driver.notifier()
        notifier.probe_every, notifier.probe_timeout = 0.3, 0.5
        with caplog.at_level(logging.WARNING, logger="rota.postgres"):
            task = asyncio.create_task(notifier.run(lambda _: None, lambda _: None))
            try:
                await async_wait_for(lambda: notifier.state == "polling", timeout=5)
                assert part.proxy.dropped >= 1
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        said = [r.getMessage() for r in caplog.records if "falls back to polling" in r.message]
        assert len(said) == 1 and "transaction-mode pooler" in said[0]

    try:
        asyncio.run(scenario())
    finally:
        plain.close()


def _sample(text: str, name: str) -> float:
    """The value of the unlabelled sample `name` in a Prometheus text exposition."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} is not exposed")
