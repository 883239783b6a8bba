"""Worker: wires the parts (fetchers, executor, completer, heartbeater, notifier,
maintenance) on one asyncio loop, and owns the shutdown order:
stop fetching -> let running jobs finish within the grace -> return the rest ->
flush completions -> resign leadership, all within the grace plus SHUTDOWN_MARGIN."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rota.app import App, ServiceContext
from rota.context import Context
from rota.drivers.base import Completion, Notifier
from rota.drivers.deadlines import call_deadline, run_with_deadline
from rota.errors import DatabaseUnavailableError
from rota.job import Job
from rota.maintenance.counts import CountFolder
from rota.maintenance.horizon import HorizonWatch
from rota.maintenance.leader import Elector
from rota.maintenance.pruner import Pruner
from rota.maintenance.rescuer import PresenceRescuer, Rescuer
from rota.maintenance.service import PeriodicService, backoff_delay, rest_interval, wait_set
from rota.maintenance.stager import Stager
from rota.settings import WorkerSettings
from rota.telemetry.attempts import AttemptObserver
from rota.telemetry.logging import configure_default
from rota.worker.completer import Completer
from rota.worker.db_calls import DbCalls
from rota.worker.executor import Executor
from rota.worker.fetcher import Fetcher
from rota.worker.heartbeat import Heartbeater
from rota.worker.presence import PresenceKeeper
from rota.worker.progress import ProgressWriter
from rota.worker.supervisor import DRAIN_SIGNAL, EXIT_HUNG, HALT_SIGNAL

if TYPE_CHECKING:
    from rota.telemetry.server import MetricsServer
    from rota.worker.health import HealthServer

log = logging.getLogger("rota.worker")

# Seconds a stop may take beyond the grace: returning the unfinished jobs, writing their
# outcomes and resigning share it (docs/workers.md). A thread that ignores the stop is
# not waited for; its job is fenced and the thread dies with the process.
SHUTDOWN_MARGIN = 1.0
# A database call unanswered this long (or half a heartbeat interval, if shorter) counts
# as hung: it is logged once, the worker turns unready and, if it is a heartbeat, stops
# claiming until a beat succeeds (#21).
HANG_AFTER_MAX = 2.0
# How often the guard looks at the lease clock and the calls in flight; with nothing to
# guard (no job held, no call in flight, heartbeats fine) every GUARD_IDLE_TICK: a call
# that starts meanwhile is seen hung at most that much later than HANG_AFTER.
GUARD_TICK = 0.1
GUARD_IDLE_TICK = 0.5


class Worker:
    def __init__(self, app: App, settings: WorkerSettings | None = None) -> None:
        self.app = app
        self.settings = settings or WorkerSettings()
        # Started from Python with no logging set up, a worker would say nothing.
        configure_default()
        self.id = self.settings.worker_id
        self.driver = app.driver
        self._db_pool = concurrent.futures.ThreadPoolExecutor(
            self.settings.db_threads, thread_name_prefix="rota-db"
        )
        self._task_pool = concurrent.futures.ThreadPoolExecutor(
            self.settings.threads or self.settings.total_concurrency,
            thread_name_prefix="rota-task",
        )
        self.executor = Executor(app, self._task_pool)
        self._stop = asyncio.Event()
        self._halt = asyncio.Event()
        self._signals = 0  # SIGTERM/SIGINT received: the second one stops now
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: dict[int, tuple[asyncio.Task[None], Context]] = {}
        self._idle = asyncio.Event()  # set when no job is running (in the shutdown)
        # Sync tasks running in their thread past their timeout (or past the loss of
        # their lease): job id -> (task name, since when). Each keeps its slot until the
        # thread returns; Python cannot stop a thread.
        self._hung: dict[int, tuple[str, float]] = {}
        self.hung_total = 0
        self.exit_code = 0
        self.ready = False  # connected, schema current, not draining
        self.completed = 0
        self.fetchers: dict[str, Fetcher] = {}
        # Every database call has a deadline derived from the lease (docs/workers.md).
        self.driver.deadlines_set(self.settings.deadlines)
        self._call_timeout = self.settings.deadlines.call
        self.hang_after = min(HANG_AFTER_MAX, self.settings.heartbeat_interval / 2)
        self.calls = DbCalls(self.hang_after)
        # Set while heartbeats fail or hang: claims wait, and the lease clock runs down.
        self.cut_off_since: float | None = None
        self.notifier: Notifier | None = None  # set when the worker runs
        self.heartbeater = Heartbeater(
            self.driver,
            self.db,
            lease=self.settings.lease,
            interval=self.settings.heartbeat_interval,
            fence_after=self.settings.fence_after,
        )
        self.completer = Completer(
            self.driver,
            self.db,
            self._written,
            replacement=self._replacement,
            give_up_after=self.settings.lease,
        )
        self.progress = ProgressWriter(self.driver, self.db)
        self.elector = Elector(self.driver, self.id, self.settings.leader_ttl)
        # Present before the first claim, and claiming only while present (#17).
        self.presence = PresenceKeeper(
            self.driver,
            self.db,
            self.id,
            on_present=lambda: self._wake(None),
            on_gone=self._presence_gone,
            enabled=self.settings.presence,
            grace=self.settings.presence_grace,
            # The server drops a silent presence session no sooner than this worker stops
            # its jobs (#21): its keepalives are set from the lease, not postgresql.conf.
            server_options=self.settings.server_detection.conninfo_options(),
        )
        # The engine's own services, then whatever the plugged features bring: the worker
        # names none of them.
        settings = self.settings
        self.services: list[PeriodicService] = [
            Stager(self.driver, settings.stage_interval),
            Rescuer(self.driver, settings.rescue_interval),
            PresenceRescuer(self.driver, settings.presence_interval, settings.presence_grace),
            Pruner(
                self.driver,
                settings.prune_interval,
                completed_age=settings.completed_retention,
                discarded_age=settings.discarded_retention,
                inbox_age=settings.inbox_retention,
                cancelled_age=settings.cancelled_retention,
                batch=settings.prune_batch,
            ),
        ]
        # What the dashboard and /metrics read (#23): the counts rota_jobs' triggers keep,
        # folded and pruned; and, on PostgreSQL, a word when a transaction holds VACUUM back.
        self.services.append(CountFolder(self.driver))
        if self.driver.dialect == "postgres":
            self.services.append(HorizonWatch(self.driver))
        context = ServiceContext(worker_id=self.id, settings=settings, driver=self.driver)
        for feature in app.features.values():
            self.services.extend(feature.services(context))
        self.health: HealthServer | None = None
        if self.settings.health_port is not None:
            from rota.worker.health import worker_server  # uvicorn loads only when asked for

            self.health = worker_server(self)
        # Counters, spans and the log context of each attempt (rota.telemetry).
        self.observer = AttemptObserver(app.metrics, quiet_queues=self.settings.quiet_queues)
        self.metrics_server: MetricsServer | None = None
        if self.settings.metrics_port is not None:
            from rota.worker.metrics import worker_metrics_server

            self.metrics_server = worker_metrics_server(self)

    async def db(self, func: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """Run a blocking driver call on the worker's database threads (timed from the
        request: a call waiting for a free thread behind hung ones counts as waiting),
        cut after `timeout` seconds (default: db_call_timeout) without an answer."""
        loop = asyncio.get_running_loop()
        key = self.calls.begin(getattr(func, "__name__", "call"))
        ok = False
        seconds = self._call_timeout if timeout is None else timeout
        try:
            call = functools.partial(run_with_deadline, seconds, func, *args)
            result = await loop.run_in_executor(self._db_pool, call)
            ok = True
            return result
        finally:
            self.calls.end(key, ok)

    @property
    def cut_off(self) -> bool:
        """Heartbeats fail or hang: the leases this worker holds may not be renewed."""
        return self.cut_off_since is not None

    # --- control ------------------------------------------------------------------------

    def stop(self) -> None:
        """Graceful stop (SIGTERM): no new jobs; running ones get the grace period."""
        self._call_in_loop(self._begin_stop)

    def halt(self) -> None:
        """Stop now (a second signal): running jobs are returned to the queue at once."""
        self._call_in_loop(self._halt.set)
        self._call_in_loop(self._begin_stop)

    def _begin_stop(self) -> None:
        # Unready first, in the same loop step that tells the fetchers to stop: nothing
        # can see "not fetching" while the readiness probe still says ready.
        self.ready = False
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True from the stop request on: no new jobs are claimed."""
        return self._stop.is_set()

    @property
    def running(self) -> int:
        """Jobs this worker is running now."""
        return len(self._running)

    @property
    def hung(self) -> int:
        """Slots held by a sync task still running in its thread past its timeout."""
        return len(self._hung)

    @property
    def all_hung(self) -> bool:
        """Every slot is held by a hung thread: this worker can run nothing."""
        return bool(self._hung) and len(self._hung) >= self.settings.total_concurrency

    def _call_in_loop(self, func: Callable[[], None]) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(func)
        else:
            func()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, DRAIN_SIGNAL, HALT_SIGNAL):
            loop.add_signal_handler(sig, self.on_signal, sig.name)

    def on_signal(self, signame: str) -> None:
        """SIGTERM or SIGINT: the first drains, the second stops now. The supervisor of
        `--processes` asks with SIGUSR1 (drain) and SIGUSR2 (stop now) instead, which are
        not counted: a Ctrl-C that reached this process from the terminal's process group
        (or systemd's control group) and again through the supervisor is one drain."""
        if signame == DRAIN_SIGNAL.name:
            if self._stop.is_set():
                log.info("%s: drain requested (already draining)", signame)
            else:
                log.info("%s: drain requested (grace %gs)", signame, self.settings.grace)
                self.stop()
            return
        if signame == HALT_SIGNAL.name:
            if not self._halt.is_set():
                log.warning("stop requested: stopping now")
                self.halt()
            return
        self._signals += 1
        if self._signals > 1:
            log.warning("%s again: stopping now", signame)
            self.halt()
        else:
            log.info("%s: draining (grace %gs)", signame, self.settings.grace)
            self.stop()

    # --- main ---------------------------------------------------------------------------

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        # The probes answer from the first moment (live, not ready) to the last (draining).
        if self.health is not None:
            await self.health.start()
        try:
            if self.metrics_server is not None:
                await self.metrics_server.start()
            await self._run()
        finally:
            if self.metrics_server is not None:
                await self.metrics_server.stop()
            if self.health is not None:
                await self.health.stop()

    async def _run(self) -> None:
        await self._wait_for_database()
        if self._stop.is_set():
            return
        # What the code declares (schedules, subscriptions) is stored before any job runs.
        # Several statements per plugged feature: a whole lease, not one call's deadline.
        await self.db(self.app.prepare, timeout=self.settings.lease)
        stop_parts = asyncio.Event()
        background: list[asyncio.Task[Any]] = []
        completer_task = asyncio.create_task(self.completer.run(), name="rota-completer")
        background.append(
            asyncio.create_task(self.heartbeater.run(stop_parts), name="rota-heartbeat")
        )
        background.append(asyncio.create_task(self.progress.run(stop_parts), name="rota-progress"))
        background.append(asyncio.create_task(self._guard(stop_parts), name="rota-lease-guard"))
        background.append(asyncio.create_task(self.presence.run(stop_parts), name="rota-presence"))
        notifier = self.notifier = self.driver.notifier()
        for service in self.services:
            service.rests = notifier.sees_every_commit
        background.append(
            asyncio.create_task(notifier.run(self._wake, self._control), name="rota-notify")
        )
        if self.settings.maintenance:
            background.append(asyncio.create_task(self.elector.run(self.db, stop_parts)))
        for service in self.services:
            # Leader-only services need a worker that takes part in the election.
            if service.leader_only and not self.settings.maintenance:
                continue
            background.append(
                asyncio.create_task(
                    service.run(self.db, lambda: self.elector.is_leader, stop_parts),
                    name=f"rota-{service.name}",
                )
            )
        # Registered as present before the first claim: from then on, if this process
        # dies, its peers rescue its jobs at once (#17).
        await self.presence.wait(self._stop)
        fetch_tasks = []
        claims = self.app.claim_queries()
        # The poll is a safety net for a missed wake-up. Where every commit wakes the
        # fetchers (SQLite: a job becomes claimable only by a commit, the stager's
        # included) it may rest as long as a resting service does.
        poll = self.settings.poll_interval
        if notifier.sees_every_commit:
            poll = rest_interval(poll)
        for queue, concurrency in self.settings.queues.items():
            fetcher = Fetcher(
                self.driver,
                self.db,
                queue=queue,
                concurrency=concurrency,
                batch=self.settings.fetch_batch,
                worker_id=self.id,
                lease=self.settings.lease,
                poll_interval=poll,
                start=self._start_jobs,
                completer=self.completer,
                claims=claims,
                capabilities=tuple(sorted(self.settings.capabilities)),
                gate=lambda: self.presence.present,
            )
            fetcher.paused = lambda: self.cut_off
            self.fetchers[queue] = fetcher
            fetch_tasks.append(
                asyncio.create_task(fetcher.run(self._stop), name=f"rota-fetch-{queue}")
            )
        # Claim at once: a wake-up the notifier sent while presence was registering
        # found no fetcher yet.
        self._wake(None)
        self.ready = True
        log.info(
            "worker %s started: queues %s (claims of up to %d jobs)%s",
            self.id,
            ", ".join(f"{q}={c}" for q, c in self.settings.queues.items()),
            self.settings.fetch_batch,
            "; capabilities " + ", ".join(sorted(self.settings.capabilities))
            if self.settings.capabilities
            else "",
        )
        try:
            await self._stop.wait()
        finally:
            # The running jobs get the grace; everything after shares SHUTDOWN_MARGIN,
            # so a stop never outlasts a Kubernetes grace period set to --grace + 1.
            grace_ends = asyncio.get_running_loop().time() + self.settings.grace
            deadline = grace_ends + SHUTDOWN_MARGIN
            self.ready = False
            for _, ctx in self._running.values():
                ctx.draining = True  # tasks may checkpoint before the grace period ends
            for fetcher in self.fetchers.values():
                fetcher.wake()
            if fetch_tasks:  # a claim under way is let finish (its jobs start draining)
                _, claiming = await asyncio.wait(fetch_tasks, timeout=_left(deadline))
                for task in claiming:
                    task.cancel()
            await self._drain(grace_ends, deadline)
            await self.completer.close(completer_task, timeout=_left(deadline))
            stop_parts.set()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self._bounded(self.db(self.elector.resign), deadline, "resigning leadership")
            for service in self.services:  # what a service held expires on its own anyway
                await self._bounded(self.db(service.close), deadline, f"{service.name}: closing")
            # Last: until now the jobs were ours. Whatever is still held (a task that
            # ignored the stop) a peer rescues once the presence lock is let go.
            await self.presence.close(_left(deadline), leave=self.heartbeater.held == 0)
            self._db_pool.shutdown(wait=False)
            # Threads still running a sync task past the grace cannot be killed; they are
            # fenced (their leases are gone) and die with the process.
            self._task_pool.shutdown(wait=False, cancel_futures=True)
            log.info("worker %s stopped", self.id)

    async def _wait_for_database(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                await self.db(self.app.check_schema)
                return
            except DatabaseUnavailableError as exc:
                failures += 1
                delay = backoff_delay(failures, 1.0, 30.0)
                log.warning("database unavailable (%s); retrying in %.1fs", exc, delay)
                await wait_set(self._stop, delay)

    async def _drain(self, grace_ends: float, deadline: float) -> None:
        if self._running and not self._halt.is_set():
            log.info(
                "waiting up to %gs for %d running job(s)", self.settings.grace, len(self._running)
            )
            # Done when no job runs: a job whose outcome is handed over counts as done,
            # even while a hung thread of it still holds its slot.
            idle = asyncio.create_task(self._idle.wait())
            halted = asyncio.create_task(self._halt.wait())
            watched: list[asyncio.Future[Any]] = [idle, halted]
            await asyncio.wait(
                watched, timeout=_left(grace_ends), return_when=asyncio.FIRST_COMPLETED
            )
            idle.cancel()
            halted.cancel()
        if self._running:
            log.warning("returning %d unfinished job(s) to the queue", len(self._running))
            for _, ctx in list(self._running.values()):
                ctx.request_cancel("shutdown")
            # Each job hands back its outcome as soon as it is told; a task that ignores
            # it is not waited for past the margin (its lease runs out, it runs again).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout=_left(deadline))

    async def _bounded(self, call: Any, deadline: float, what: str) -> None:
        """Await a last database call of the stop, within what is left of the margin."""
        try:
            await asyncio.wait_for(call, timeout=_left(deadline))
        except Exception as exc:  # its row expires on its own
            log.warning("%s failed at shutdown (%s: %s)", what, type(exc).__name__, exc)

    # --- jobs ---------------------------------------------------------------------------

    async def _guard(self, stop: asyncio.Event) -> None:
        """Watch the heartbeats and the lease clock: pause claims while beats fail or
        hang, resume them the moment one succeeds, and stop every job whose lease could
        not be confirmed in time, while the database is still out of reach."""
        beater = self.heartbeater
        tick = GUARD_TICK
        while not stop.is_set():
            await wait_set(stop, tick)
            self.calls.check()
            now = time.monotonic()
            troubled = beater.failures > 0 or beater.hanging(self.hang_after)
            if troubled and self.cut_off_since is None:
                self.cut_off_since = now
                log.warning(
                    "heartbeats %s: claims paused; running jobs are stopped %gs after their "
                    "last confirmed renewal unless one succeeds",
                    "fail" if beater.failures else f"get no answer for {self.hang_after:g}s",
                    self.settings.fence_after,
                )
            elif not troubled and self.cut_off_since is not None:
                log.warning(
                    "heartbeats succeed again after %.1fs: claims resume",
                    now - self.cut_off_since,
                )
                self.cut_off_since = None
                for fetcher in self.fetchers.values():
                    fetcher.resume()
            due = beater.leases.next_deadline()
            if due is not None and now >= due:
                why = (
                    f"heartbeats cut off for {now - self.cut_off_since:.1f}s"
                    if self.cut_off_since is not None
                    else "its renewal came too late"
                )
                beater.fence(why)
            guarding = len(beater.leases) or self.calls.in_flight or beater.failures
            tick = GUARD_TICK if guarding or self.cut_off else GUARD_IDLE_TICK

    def _start_jobs(self, jobs: list[Job], fetcher: Fetcher) -> None:
        """Start the jobs one claim returned, each in its own asyncio task."""
        beater = self.heartbeater
        sent = fetcher.claim_sent
        if beater.leases.late(sent):
            # The claim's answer came so late that the leases it set may already have run
            # out in the database: never start such jobs (they will be rescued and run again).
            for job in jobs:
                log.error(
                    "LeaseLost: job %s was claimed %.1fs ago (lease %gs): not starting it",
                    job.id,
                    time.monotonic() - sent,
                    self.settings.lease,
                )
                beater.lease_lost += 1
                beater.last_lease_lost = time.monotonic()
                fetcher.release()
            return
        draining = self._stop.is_set()
        for job in jobs:
            ctx = Context(
                job,
                worker_id=self.id,
                driver=self.driver,
                nudge=beater.nudge,
                progress=self.progress.report,
            )
            ctx.draining = draining
            beater.track(job.id, job.lease_token or "", ctx, sent)
            ctx.lease_deadline = functools.partial(_deadline_of, beater, job.id)
            task = asyncio.create_task(self._run_job(job, ctx, fetcher))
            self._running[job.id] = (task, ctx)
        self._idle.clear()

    async def _run_job(self, job: Job, ctx: Context, fetcher: Fetcher) -> None:
        straggler = None
        watch = self.observer.start(job)
        execution = None
        try:
            # What the job does on the database (in its task's thread too) is cut at its
            # local lease deadline: past it, the database may have given the job away.
            assert ctx.lease_deadline is not None
            with call_deadline(ctx.lease_deadline):
                execution = await self.executor.run(job, ctx, self._running[job.id][0])
            straggler = execution.straggler
            if self.progress.pending(job.id):
                # The last value goes out before the completion; after it the fence refuses.
                await self.progress.flush(job.id)
            if execution.completion is not None:
                self.heartbeater.submitted(job.id)
                self.completer.submit(execution.completion)
            else:
                self.heartbeater.untrack(job.id)
                if execution.completed:
                    self.completed += 1
        except Exception:
            # A bug of rota's (the executor turns every outcome of a task into a value):
            # the job runs again once its lease runs out.
            log.exception("job %s crashed the executor; its lease will expire", job.id)
            self.heartbeater.untrack(job.id)
        finally:
            self.observer.finish(watch, execution)
            self._running.pop(job.id, None)
            if not self._running:
                self._idle.set()
        if straggler is not None and not straggler.done():
            # Keep the slot until the thread is really free, so a hung task cannot
            # make the worker run more threads than its concurrency allows.
            await self._wait_hung(job, straggler)
        fetcher.release()

    async def _wait_hung(self, job: Job, thread: concurrent.futures.Future[Any]) -> None:
        """A sync task outlived its timeout (or its lease): its outcome is written, but
        its thread cannot be stopped, so its slot stays taken until it returns. Say so,
        count it, and when every slot is hung, stop being ready; under --processes, leave
        so that the supervisor starts a fresh process (the hung threads die with this one)."""
        if self._stop.is_set():  # the process is leaving anyway
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(thread)
            return
        since = time.monotonic()
        self._hung[job.id] = (job.task, since)
        self.hung_total += 1
        slots = self.settings.total_concurrency
        log.warning(
            "job %s: task %s is still running in its thread after it timed out; its slot "
            "stays taken until it returns (%d of %d slots hung)",
            job.id,
            job.task,
            len(self._hung),
            slots,
        )
        if self.all_hung:
            if self.settings.exit_when_hung:
                log.error(
                    "all %d slots are hung: leaving, so that a fresh process replaces this one",
                    slots,
                )
                self.exit_code = EXIT_HUNG
                self.stop()
            else:
                log.error(
                    "all %d slots are hung: this worker runs nothing until a thread returns "
                    "(it reports not ready); restart it to get them back",
                    slots,
                )
        try:
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(thread)
        finally:
            self._hung.pop(job.id, None)
        if not self._stop.is_set():
            log.info(
                "job %s: the hung thread of task %s returned after %.1fs; its slot is free",
                job.id,
                job.task,
                time.monotonic() - since,
            )

    def _presence_gone(self) -> None:
        """Peers may rescue this worker's jobs any moment (its presence lock is gone and
        could not be taken again in time): stop them now, as a lost lease does. Their
        writes are fenced anyway; this keeps a job from running twice at once."""
        self.heartbeater.fence_all("presence session lost")

    def _replacement(self, completion: Completion, error: BaseException) -> Completion | None:
        """The completer's stand-in for an outcome the database refused."""
        ctx = self.heartbeater.context(completion.job_id)
        return None if ctx is None else self.executor.unstorable(ctx.job, completion, error)

    def _written(self, completion: Completion, accepted: bool) -> None:
        self.heartbeater.untrack(completion.job_id)
        if accepted:
            self.completed += 1

    # --- notifications -------------------------------------------------------------------

    def _wake(self, queue: str | None) -> None:
        if queue is None:
            for fetcher in self.fetchers.values():
                fetcher.wake()
            for service in self.services:
                service.changed()  # only a resting service (rests: SQLite) waits for it
        elif queue in self.fetchers:
            self.fetchers[queue].wake()

    def _control(self, payload: str) -> None:
        kind, _, value = payload.partition(":")
        if kind == "cancel" and value.isdigit() and int(value) in self._running:
            self.heartbeater.nudge()  # the renewal carries cancel_requested


def _deadline_of(heartbeater: Heartbeater, job_id: int) -> float:
    """The local lease deadline of a running job (ctx.transaction() is cut there); a job
    no longer held has none left."""
    return heartbeater.leases.deadline(job_id) or 0.0


def _left(deadline: float) -> float:
    """Seconds until `deadline` on the running loop's clock (never negative)."""
    return max(0.0, deadline - asyncio.get_running_loop().time())
