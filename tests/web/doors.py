"""Shared pieces of the attack tests (issue 18): a seeded shop with secrets in its dead
letters, every API route filled in with sample parameters, and a dashboard served by a
real uvicorn on a free port (httpx talks to it over TCP)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

import rota
from rota.testing import drain
from rota.web.server import build_api, create_app
from tests.web import browser
from tests.web.conftest import add_tasks
from tests.web.features_demo import seed_features

# Text that only a job's arguments and its error carry: it must never reach a viewer.
SECRET = "4111-1111-SECRET"
EVIL = "https://evil.example"
ROLES = ("viewer", "operator", "replayer", "admin")
WRITE_HEADERS = {"X-Rota-Request": "1"}


@dataclass
class Shop:
    app: rota.App
    tokens: dict[str, str]
    dead: int  # a discarded job whose args and error carry SECRET


def seed(app: rota.App) -> Shop:
    add_tasks(app)
    seed_features(app)

    @app.task(name="shop.refund", queue="payments", max_attempts=1)
    def refund(card: str) -> None:
        raise RuntimeError(f"refund to {card} refused")

    app.schedule("shop.email", "0 3 * * *", name="nightly", args={"to": SECRET})
    app.sync_schedules()
    dead = app.enqueue("shop.refund", {"card": SECRET})
    drain(app, ["payments"])
    tokens = {role: app.tokens.create(f"t-{role}", role) for role in ROLES}
    return Shop(app=app, tokens=tokens, dead=dead.id)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# Sample values for the path parameters of every route, and bodies for those that take one.
PATH_VALUES = {
    "job_id": "1",
    "name": "nightly",
    "ref": "thumbnails",
    "key": "order-42",
    "step": "load",
}
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/api/jobs"): {"task": "shop.email", "args": {"to": "a@b"}},
    ("POST", "/api/dead-letters/replay"): {"reason": "r", "all": True, "dry_run": True},
    ("POST", "/api/dead-letters/dismiss"): {"ids": [999999], "reason": "r"},
    ("POST", "/api/queues/{name}/purge"): {"reason": "r", "dry_run": True},
    ("POST", "/api/jobs/cancel"): {"reason": "r", "all": True, "dry_run": True},
    ("POST", "/api/tokens"): {"name": "made-by-matrix", "role": "viewer"},
    ("POST", "/api/session"): {"token": "rota_not-a-token"},
    ("POST", "/api/session/link"): {"code": "not-a-code"},
    ("POST", "/api/sagas/{key}/abort"): {"reason": "matrix"},
    ("POST", "/api/schedules/{name}/trigger"): {},
}
# Routes whose sample call would end the caller's own access (or another role's) for the
# rest of the matrix: called with a name that does not exist.
PATH_OVERRIDES = {("DELETE", "/api/tokens/{name}"): {"name": "nobody"}}


@dataclass(frozen=True)
class RouteCase:
    method: str
    template: str
    path: str
    permission: str | None
    body: Any


def route_cases() -> list[RouteCase]:
    """Every endpoint the API declares, with its sample path and body."""
    cases = []
    for ep in build_api().endpoints:
        values = {**PATH_VALUES, **PATH_OVERRIDES.get((ep.method, ep.path), {})}
        path = re.sub(r"\{(\w+)\}", lambda m: values[m[1]], ep.path)
        body = BODIES.get((ep.method, ep.path), {} if ep.body is not None else None)
        permission = None if ep.permission is None else str(ep.permission)
        cases.append(RouteCase(ep.method, ep.path, path, permission, body))
    return cases


@contextmanager
def served(web: Any, **options: Any) -> Iterator[httpx.Client]:
    """`web` on a real uvicorn; an httpx client for it (no cookies kept between tests)."""
    with browser.serve(web, **options) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


@contextmanager
def dashboard(app: rota.App, **kwargs: Any) -> Iterator[httpx.Client]:
    with served(create_app(app, **kwargs)) as client:
        yield client


@contextmanager
def dashboard_process(database_url: str, *args: str) -> Iterator[tuple[Any, str]]:
    """`rota dashboard ARGS` as a real process on a free port; yields (process, base URL
    without the root path)."""
    import os
    import signal
    import subprocess
    import sys

    from tests.helpers import wait_for

    port = browser.free_port()
    env = {**os.environ, "ROTA_DATABASE_URL": database_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rota", "dashboard", "--port", str(port), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(base + "/livez", timeout=1).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None

    try:
        wait_for(up, timeout=30, interval=0.1)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        yield proc, base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
