"""The /metrics HTTP endpoint: a small Starlette app served by uvicorn on the caller's
asyncio loop (a worker's, or the one `rota metrics` runs). With $ROTA_METRICS_TOKEN set,
it answers only a request that sends that token (`Authorization: Bearer`), like KEDA's
/metrics/keda on the health port."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import socket
from collections.abc import Iterator

import uvicorn
from prometheus_client.registry import CollectorRegistry
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from rota.errors import ConfigurationError
from rota.telemetry.prometheus import renderer

log = logging.getLogger("rota.metrics")

# One optional bearer token for every metrics listener rota serves: a worker's
# --metrics-port and its /metrics/keda, `rota metrics`, `rota k8s metrics-api`.
METRICS_TOKEN_ENV = "ROTA_METRICS_TOKEN"


def metrics_token() -> str | None:
    """The token from $ROTA_METRICS_TOKEN, or None (the listeners are open)."""
    return os.environ.get(METRICS_TOKEN_ENV) or None


def token_ok(request: Request, token: str) -> bool:
    """Whether the request sends `token` as a bearer token (or as X-API-Key, as KEDA's
    apiKey auth mode does), compared in constant time."""
    offered = request.headers.get("x-api-key", "")
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        offered = credentials.strip()
    return hmac.compare_digest(offered.encode(), token.encode())


def unauthorized() -> JSONResponse:
    return JSONResponse(
        {"error": "unauthorized: send Authorization: Bearer <token>"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


def metrics_app(
    registry: CollectorRegistry, *, in_thread: bool, token: str | None = None
) -> Starlette:
    """An ASGI app answering GET /metrics from `registry`, only to callers that send
    `token` when one is given. `in_thread` renders on a thread (collectors that query
    the database); otherwise on the loop, which keeps a worker's in-memory counters
    consistent with the loop that writes them."""
    render = renderer(registry)

    async def metrics(request: Request) -> Response:
        if token and not token_ok(request, token):
            return unauthorized()
        accept = request.headers.get("accept", "")
        if in_thread:
            body, content_type = await run_in_threadpool(render, accept)
        else:
            body, content_type = render(accept)
        return Response(body, media_type=content_type)

    async def index(request: Request) -> Response:
        return PlainTextResponse("rota metrics: GET /metrics\n")

    return Starlette(routes=[Route("/metrics", metrics), Route("/", index)])


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class MetricsServer:
    """Serves `app` on host:port as a task of the current loop until `stop()`."""

    def __init__(self, app: Starlette, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port  # the bound port once started (0 asks for any free one)
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

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
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="rota-metrics")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise ConfigurationError(f"the metrics server on port {self.port} did not start")
            await asyncio.sleep(0.005)
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(self._task, timeout=5.0)
        except Exception as exc:  # never let the metrics server block a stop
            log.warning("metrics server did not stop cleanly: %r", exc)
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
            f"cannot serve metrics on {host}:{port} ({exc}): choose another --metrics-port"
        ) from None
    return sock
