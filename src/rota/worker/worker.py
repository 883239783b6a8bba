"""Worker: wires the parts (fetchers, executor, completer, heartbeater, notifier,
maintenance) on one asyncio loop, and owns the shutdown order:
stop fetching -> let running jobs finish within the grace -> return the rest ->
flush completions -> resign leadership."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rota.app import App
from rota.context import Context
from rota.drivers.base import Completion
from rota.errors import DatabaseUnavailableError
from rota.job import Job
from rota.maintenance.batches import BatchController
from rota.maintenance.cron import CronService
from rota.maintenance.expirer import Expirer
from rota.maintenance.holds import QueueHoldService
from rota.maintenance.leader import Elector
from rota.maintenance.pruner import Pruner
from rota.maintenance.rescuer import Rescuer
from rota.maintenance.service import PeriodicService
from rota.maintenance.stager import Stager
from rota.maintenance.workflows import WorkflowController
from rota.observe.attempts import AttemptObserver
from rota.sagas.service import SagaSupervisor
from rota.worker.advertiser import Advertiser
from rota.worker.completer import Completer
from rota.worker.executor import Executor
from rota.worker.fetcher import Fetcher
from rota.worker.heartbeat import Heartbeater
from rota.worker.progress import ProgressWriter
from rota.worker.settings import WorkerSettings
from rota.worker.supervisor import DRAIN_SIGNAL, HALT_SIGNAL

if TYPE_CHECKING:
    from rota.observe.server import MetricsServer
    from rota.worker.health import HealthServer

log = logging.getLogger("rota.worker")


class Worker:
    def __init__(self, app: App, settings: WorkerSettings | None = None) -> None:
        self.app = app
        self.settings = settings or WorkerSettings()
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
        self._idle = asyncio.Event()
        self.ready = False  # connected, schema current, not draining
        self.completed = 0
        self.fetchers: dict[str, Fetcher] = {}
        self.heartbeater = Heartbeater(
            self.driver,
            self.db,
            lease=self.settings.lease,
            interval=self.settings.heartbeat_interval,
        )
        self.completer = Completer(self.driver, self.db, self._written)
        self.progress = ProgressWriter(self.driver, self.db)
        self.elector = Elector(self.driver, self.id, self.settings.leader_ttl)
        # Only workers with capabilities advertise: plain ones cannot run routed jobs.
        self.advertiser: Advertiser | None = None
        if self.settings.capabilities:
            self.advertiser = Advertiser(
                self.driver,
                self.db,
                worker_id=self.id,
                queues=list(self.settings.queues),
                capabilities=sorted(self.settings.capabilities),
                interval=self.settings.heartbeat_interval,
                ttl=self.settings.lease,
            )
        self.services: list[PeriodicService] = [
            Stager(self.driver, self.settings.stage_interval),
            Rescuer(self.driver, self.settings.rescue_interval),
            Pruner(
                self.driver,
                self.settings.prune_interval,
                completed_age=self.settings.completed_retention,
                discarded_age=self.settings.discarded_retention,
                inbox_age=self.settings.inbox_retention,
                cancelled_age=self.settings.cancelled_retention,
                saga_age=self.settings.saga_retention,
                event_age=self.settings.event_retention,
                batch=self.settings.prune_batch,
            ),
            Expirer(self.driver, self.settings.stage_interval),
            CronService(self.driver, self.settings.cron_interval, scheduler=self.id),
            BatchController(self.driver, self.settings.batch_interval),
            WorkflowController(
                app,
                self.settings.workflow_interval,
                completed_retention=self.settings.completed_retention,
                failed_retention=self.settings.discarded_retention,
                prune_interval=self.settings.prune_interval,
            ),
            # Moves waiting work forward like the stager, so it shares its interval.
            SagaSupervisor(self.driver, self.settings.stage_interval),
            QueueHoldService(self.driver, self.settings.hold_interval),
        ]
        self.health: HealthServer | None = None
        if self.settings.health_port is not None:
            from rota.worker.health import worker_server  # uvicorn loads only when asked for

            self.health = worker_server(self)
        # Counters, spans and the log context of each attempt (rota.observe).
        self.observer = AttemptObserver(app.metrics)
        self.metrics_server: MetricsServer | None = None
        if self.settings.metrics_port is not None:
            from rota.observe.server import worker_metrics_server

            self.metrics_server = worker_metrics_server(self)

    async def db(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking driver call on the worker's database threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db_pool, functools.partial(func, *args))

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
        if self.app.schedules:
            # The schedules declared in code become rows, which the leader's cron service
            # reconciles and the CLI suspends, resumes and triggers.
            await self.db(self.app.sync_schedules)
        if self.app.events.subscribers:
            # Stored subscriptions are what publishers deliver to, whatever code they run.
            await self.db(self.app.events.sync)
        stop_parts = asyncio.Event()
        background: list[asyncio.Task[Any]] = []
        completer_task = asyncio.create_task(self.completer.run(), name="rota-completer")
        background.append(
            asyncio.create_task(self.heartbeater.run(stop_parts), name="rota-heartbeat")
        )
        background.append(asyncio.create_task(self.progress.run(stop_parts), name="rota-progress"))
        if self.advertiser is not None:
            background.append(
                asyncio.create_task(self.advertiser.run(stop_parts), name="rota-advertise")
            )
        notifier = self.driver.notifier()
        background.append(
            asyncio.create_task(notifier.run(self._wake, self._control), name="rota-notify")
        )
        if self.settings.maintenance:
            background.append(asyncio.create_task(self.elector.run(self.db, stop_parts)))
            for service in self.services:
                background.append(
                    asyncio.create_task(
                        service.run(self.db, lambda: self.elector.is_leader, stop_parts),
                        name=f"rota-{service.name}",
                    )
                )
        fetch_tasks = []
        for queue, concurrency in self.settings.queues.items():
            fetcher = Fetcher(
                self.driver,
                self.db,
                queue=queue,
                concurrency=concurrency,
                batch=self.settings.fetch_batch,
                worker_id=self.id,
                lease=self.settings.lease,
                poll_interval=self.settings.poll_interval,
                start=self._start_job,
                capabilities=tuple(sorted(self.settings.capabilities)),
            )
            self.fetchers[queue] = fetcher
            fetch_tasks.append(
                asyncio.create_task(fetcher.run(self._stop), name=f"rota-fetch-{queue}")
            )
        self.ready = True
        log.info(
            "worker %s started: queues %s%s",
            self.id,
            ", ".join(f"{q}={c}" for q, c in self.settings.queues.items()),
            "; capabilities " + ", ".join(sorted(self.settings.capabilities))
            if self.settings.capabilities
            else "",
        )
        try:
            await self._stop.wait()
        finally:
            self.ready = False
            for _, ctx in self._running.values():
                ctx.draining = True  # tasks may checkpoint before the grace period ends
            for fetcher in self.fetchers.values():
                fetcher.wake()
            await asyncio.gather(*fetch_tasks, return_exceptions=True)
            await self._drain()
            await self.completer.close(completer_task, timeout=max(self.settings.grace, 10.0))
            stop_parts.set()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.db(self.elector.resign)
            if self.advertiser is not None:
                await self.advertiser.retire()
            self._db_pool.shutdown(wait=False)
            # Threads still running a sync task past the grace cannot be killed; they are
            # fenced (their leases are gone) and die with the process.
            self._task_pool.shutdown(wait=False, cancel_futures=True)
            log.info("worker %s stopped", self.id)

    async def _wait_for_database(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                await self.db(self.app.check_schema)
                return
            except DatabaseUnavailableError as exc:
                log.warning("database unavailable (%s); retrying in %.1fs", exc, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), timeout=delay)
                delay = min(delay * 2, 30.0)

    async def _drain(self) -> None:
        if self._running and not self._halt.is_set():
            log.info(
                "waiting up to %gs for %d running job(s)", self.settings.grace, len(self._running)
            )
            all_done = asyncio.gather(
                *(task for task, _ in self._running.values()), return_exceptions=True
            )
            halted = asyncio.create_task(self._halt.wait())
            watched: list[asyncio.Future[Any]] = [all_done, halted]
            await asyncio.wait(
                watched, timeout=self.settings.grace, return_when=asyncio.FIRST_COMPLETED
            )
            halted.cancel()
        if self._running:
            log.warning("returning %d unfinished job(s) to the queue", len(self._running))
            for _, ctx in list(self._running.values()):
                ctx.request_cancel("shutdown")
            await asyncio.wait([task for task, _ in self._running.values()], timeout=5.0)

    # --- jobs ---------------------------------------------------------------------------

    def _start_job(self, job: Job, fetcher: Fetcher) -> None:
        ctx = Context(
            job,
            worker_id=self.id,
            driver=self.driver,
            nudge=self.heartbeater.nudge,
            progress=self.progress.report,
        )
        if self._stop.is_set():
            ctx.draining = True
        self.heartbeater.track(job.id, job.lease_token or "", ctx)
        task = asyncio.create_task(self._run_job(job, ctx, fetcher))
        self._running[job.id] = (task, ctx)

    async def _run_job(self, job: Job, ctx: Context, fetcher: Fetcher) -> None:
        straggler = None
        watch = self.observer.start(job)
        execution = None
        try:
            execution = await self.executor.run(job, ctx)
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
        except BaseException:
            log.exception("job %s crashed the executor; its lease will expire", job.id)
            self.heartbeater.untrack(job.id)
        finally:
            self.observer.finish(watch, execution)
            self._running.pop(job.id, None)
        if straggler is not None and not straggler.done():
            # Keep the slot until the thread is really free, so a hung task cannot
            # make the worker run more threads than its concurrency allows.
            with contextlib.suppress(BaseException):
                await asyncio.wrap_future(straggler)
        fetcher.release()

    def _written(self, completion: Completion, accepted: bool) -> None:
        self.heartbeater.untrack(completion.job_id)
        if accepted:
            self.completed += 1

    # --- notifications -------------------------------------------------------------------

    def _wake(self, queue: str | None) -> None:
        if queue is None:
            for fetcher in self.fetchers.values():
                fetcher.wake()
        elif queue in self.fetchers:
            self.fetchers[queue].wake()

    def _control(self, payload: str) -> None:
        kind, _, value = payload.partition(":")
        if kind == "cancel" and value.isdigit() and int(value) in self._running:
            self.heartbeater.nudge()  # the renewal carries cancel_requested
