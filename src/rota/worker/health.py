"""The HTTP side of a worker for Kubernetes: liveness (/livez), readiness (/readyz) and
KEDA's metrics-api signal (/metrics/keda), served by uvicorn inside the worker's own
asyncio loop, so a blocked loop fails the probe just as it would stall the jobs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rota.drivers.base import BacklogReport
from rota.errors import ConfigurationError, RotaError
from rota.labels import check_queue_name
from rota.telemetry.server import METRICS_TOKEN_ENV, token_ok, unauthorized

if TYPE_CHECKING:
    from rota.worker.worker import Worker

log = logging.getLogger("rota.health")

# Set it to require `Authorization: Bearer <token>` (or `X-API-Key: <token>`) on
# /metrics/keda, as KEDA's metrics-api scaler sends with authMode bearer (or apiKey); the
# same token guards every /metrics (rota.observe.server).
TOKEN_ENV = METRICS_TOKEN_ENV
# A loop that wakes a sleeper this late is stuck on blocking work: report it dead.
MAX_LOOP_LAG = 10.0


@dataclass(frozen=True)
class Probe:
    """One probe's answer: 200 when `ok`, else 503; `detail` is the JSON body."""

    ok: bool
    detail: dict[str, Any] = field(default_factory=dict)


ProbeFunc = Callable[[], Probe]
BacklogFunc = Callable[[str], Awaitable[BacklogReport]]


class LoopMonitor:
    """Measures the event loop's lag: how much later than asked a short sleep wakes up."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.lag = 0.0
        self.ticks = 0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.interval)
            self.lag = max(0.0, loop.time() - start - self.interval)
            self.ticks += 1


def build_app(
    *,
    live: ProbeFunc,
    ready: ProbeFunc,
    backlog: BacklogFunc | None = None,
    token: str | None = None,
) -> Starlette:
    """The ASGI app: probes answer from memory (never from the database, so a probe storm
    cannot load it); /metrics/keda reads counts through `backlog`, never payloads."""

    def answer(probe: Probe) -> JSONResponse:
        body = {"status": "ok" if probe.ok else "fail", **probe.detail}
        return JSONResponse(body, status_code=200 if probe.ok else 503)

    async def livez(request: Request) -> JSONResponse:
        return answer(live())

    async def readyz(request: Request) -> JSONResponse:
        return answer(ready())

    async def keda(request: Request) -> JSONResponse:
        if token and not token_ok(request, token):
            return unauthorized()
        queue = request.query_params.get("queue", "")
        try:
            check_queue_name(queue, ConfigurationError)
        except ConfigurationError as exc:
            return JSONResponse({"error": f"?queue=NAME is required: {exc}"}, status_code=400)
        assert backlog is not None
        try:
            report = await backlog(queue)
        except RotaError as exc:
            # KEDA counts this as a scaler failure: after fallback.failureThreshold of them
            # it holds the fallback replica count.
            return JSONResponse({"error": str(exc)}, status_code=503)
        return JSONResponse(
            {
                "queue": report.queue,
                "backlog": report.backlog,
                "running": report.running,
                "oldest_age_s": round(report.oldest_age_s, 3),
                "demand": report.demand,
            }
        )

    routes = [Route("/livez", livez), Route("/readyz", readyz)]
    if backlog is not None:
        routes.append(Route("/metrics/keda", keda))
    return Starlette(routes=routes)


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the worker owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HealthServer:
    """Runs `app` on host:port as a task of the current loop until `stop()`."""

    def __init__(
        self, app: Starlette, host: str, port: int, monitor: LoopMonitor | None = None
    ) -> None:
        self.app = app
        self.host = host
        self.port = port  # the bound port once started (0 asks for any free one)
        self.monitor = monitor or LoopMonitor()
        self._server: _Server | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        # Bind here rather than in uvicorn, which exits the process when the port is taken.
        sock = _bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            http="h11",
            ws="none",
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        self._server = _Server(config)
        self._tasks = [
            asyncio.create_task(self._server.serve(sockets=[sock]), name="rota-health"),
            asyncio.create_task(self.monitor.run(), name="rota-loop-monitor"),
        ]
        while not self._server.started:
            if self._tasks[0].done():
                self._tasks[0].result()  # raises what stopped it
                raise ConfigurationError(f"the health server on port {self.port} did not start")
            await asyncio.sleep(0.005)
        log.info("health endpoint on http://%s:%d (/livez, /readyz)", self.host, self.port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.should_exit = True
        serving, monitor = self._tasks
        monitor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await monitor
        try:
            await asyncio.wait_for(serving, timeout=5.0)
        except Exception as exc:  # a timeout included: never let the probe server block a stop
            log.warning("health server did not stop cleanly: %r", exc)
        self._server = None


def _bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            raise
    except OSError as exc:
        raise ConfigurationError(
            f"cannot serve the health endpoint on {host}:{port} ({exc}): "
            "choose another --health-port"
        ) from None
    return sock


# --- the worker's probes ----------------------------------------------------------------


class WorkerHealth:
    """Liveness and readiness of one worker.

    Live: the loop wakes on time and the heartbeater keeps completing beats. A beat that
    fails because the database is down still completes: that makes the worker unready,
    not dead, since a restart would not bring the database back (it would only add a
    reconnect storm). Ready: started (database reachable, schema current), not draining,
    the last heartbeat and claims succeeded, and not every slot is held by a sync task
    hung past its timeout."""

    def __init__(self, worker: Worker, monitor: LoopMonitor) -> None:
        self.worker = worker
        self.monitor = monitor
        settings = worker.settings
        # Two leases without a finished beat: every lease this worker held has expired.
        self.stall_after = max(2 * settings.lease, settings.heartbeat_interval + 15.0)
        # A database call of the worker still waiting a whole lease after it was sent:
        # its deadline (a third of the lease) did not free it, so its thread is lost to
        # this process, and only a restart gets it back (docs/reliability.md#partitions).
        self.stuck_after = settings.lease

    def live(self) -> Probe:
        beater = self.worker.heartbeater
        now = time.monotonic()
        lag = self.monitor.lag
        beat_age = None if beater.last_beat is None else round(now - beater.last_beat, 3)
        oldest = self.worker.calls.oldest_age()
        detail: dict[str, Any] = {
            "loop_lag_s": round(lag, 3),
            "last_beat_age_s": beat_age,
            "heartbeat_failures": beater.failures,
            "oldest_db_call_s": round(oldest, 3),
            "cut_off_s": None
            if self.worker.cut_off_since is None
            else round(now - self.worker.cut_off_since, 3),
        }
        if lag > MAX_LOOP_LAG:
            return Probe(False, {**detail, "reason": f"event loop lag over {MAX_LOOP_LAG:g}s"})
        if oldest > self.stuck_after:
            return Probe(
                False,
                {**detail, "reason": f"a database call has waited over {self.stuck_after:g}s"},
            )
        if beater.last_attempt is not None and now - beater.last_attempt > self.stall_after:
            return Probe(
                False, {**detail, "reason": f"no heartbeat finished in {self.stall_after:g}s"}
            )
        return Probe(True, detail)

    def ready(self) -> Probe:
        worker = self.worker
        failing = [q for q, f in worker.fetchers.items() if f.failures]
        hung = worker.calls.hung()
        connected = (
            worker.heartbeater.failures == 0 and not failing and not hung and not worker.cut_off
        )
        detail: dict[str, Any] = {
            "ready": worker.ready,
            "draining": worker.stopping,
            "connected": connected,
            "running": worker.running,
            "hung": worker.hung,
            "db_calls_hung": hung,
            # False for the moment a cut presence session takes to come back: not
            # claiming meanwhile (#17), too brief to turn the worker unready.
            "present": worker.presence.present,
        }
        # How wake-ups arrive ("listening", "polling", ...): shown, never a reason to be
        # unready, since polling still finds every job.
        listen = getattr(worker.notifier, "state", None)
        if listen is not None:
            detail["listen"] = listen
        if worker.stopping:
            return Probe(False, {**detail, "reason": "draining: stopped fetching"})
        if not worker.ready:
            return Probe(False, {**detail, "reason": "starting: waiting for the database"})
        if not connected:
            if hung:
                reason = f"{hung} call(s) without an answer for over {worker.hang_after:g}s"
            elif worker.heartbeater.failures or worker.cut_off:
                reason = "heartbeats failing"
            else:
                reason = "claims failing"
            return Probe(False, {**detail, "reason": f"database unreachable ({reason})"})
        if worker.all_hung:
            reason = (
                f"all {worker.hung} slots are hung: sync tasks still running past their "
                "timeout hold every slot until their threads return"
            )
            return Probe(False, {**detail, "reason": reason})
        return Probe(True, detail)


def worker_server(worker: Worker) -> HealthServer:
    """The health server of `worker` on its settings' health host and port."""
    port = worker.settings.health_port
    assert port is not None
    monitor = LoopMonitor()
    probes = WorkerHealth(worker, monitor)

    async def backlog(queue: str) -> BacklogReport:
        report: BacklogReport = await worker.db(worker.driver.queue_backlog, queue)
        return report

    app = build_app(
        live=probes.live,
        ready=probes.ready,
        backlog=backlog,
        token=os.environ.get(TOKEN_ENV) or None,
    )
    return HealthServer(app, worker.settings.health_host, port, monitor)
