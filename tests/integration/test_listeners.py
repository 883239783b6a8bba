"""Issue 18, hole 6: every /metrics rota serves takes the same optional bearer token
($ROTA_METRICS_TOKEN): a worker's --metrics-port, `rota metrics`, and /metrics/keda on
the health port and in `rota k8s metrics-api`. Probes stay open (the kubelet sends no
token). Real processes and real HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

import rota
from rota.observe.server import METRICS_TOKEN_ENV
from tests.helpers import async_wait_for, fast_settings, wait_for
from tests.web.browser import free_port

TOKEN = "listener-s3cret"


@contextmanager
def process(args: list[str], url: str, port: int, token: str | None) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if k != METRICS_TOKEN_ENV}
    env["ROTA_DATABASE_URL"] = url
    if token is not None:
        env[METRICS_TOKEN_ENV] = token
    proc = subprocess.Popen(
        [sys.executable, "-m", "rota", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            return True
        try:
            httpx.get(base + "/", timeout=1)
            return True
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=30, interval=0.1)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("token", [TOKEN, None])
def test_rota_metrics_takes_the_metrics_token(sqlite_url: str, token: str | None) -> None:
    rota.App(sqlite_url).migrate()
    port = free_port()
    args = ["metrics", "--host", "127.0.0.1", "--port", str(port)]
    with process(args, sqlite_url, port, token) as base:
        plain = httpx.get(base + "/metrics")
        if token is None:
            assert plain.status_code == 200  # unchanged without the variable
            return
        assert plain.status_code == 401 and plain.headers["www-authenticate"] == "Bearer"
        assert "rota_" not in plain.text
        wrong = httpx.get(base + "/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        good = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert good.status_code == 200 and "rota_queue_jobs" in good.text


def test_k8s_metrics_api_takes_the_metrics_token(sqlite_url: str) -> None:
    rota.App(sqlite_url).migrate()
    port = free_port()
    args = ["k8s", "metrics-api", "--host", "127.0.0.1", "--port", str(port)]
    with process(args, sqlite_url, port, TOKEN) as base:
        keda = base + "/metrics/keda?queue=default"
        assert httpx.get(keda).status_code == 401
        assert httpx.get(keda, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert httpx.get(base + "/livez").status_code == 200


def test_a_workers_metrics_and_keda_take_the_token_and_probes_stay_open(
    app: rota.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(METRICS_TOKEN_ENV, TOKEN)

    @app.task
    def noop() -> None: ...

    settings = fast_settings(
        metrics_port=0, metrics_host="127.0.0.1", health_port=0, health_host="127.0.0.1"
    )
    worker = rota.Worker(app, settings)
    auth = {"Authorization": f"Bearer {TOKEN}"}

    async def scenario() -> None:
        running = asyncio.create_task(worker.run())
        try:
            await async_wait_for(lambda: worker.ready, timeout=10)
            assert worker.metrics_server is not None and worker.health is not None
            metrics = f"http://127.0.0.1:{worker.metrics_server.port}/metrics"
            health = f"http://127.0.0.1:{worker.health.port}"
            async with httpx.AsyncClient(timeout=5) as client:
                assert (await client.get(metrics)).status_code == 401
                assert (await client.get(metrics, headers=auth)).status_code == 200
                keda = f"{health}/metrics/keda?queue=default"
                assert (await client.get(keda)).status_code == 401
                assert (await client.get(keda, headers=auth)).status_code == 200
                assert (await client.get(f"{health}/livez")).status_code == 200
                assert (await client.get(f"{health}/readyz")).status_code == 200
        finally:
            worker.stop()
            await asyncio.wait_for(running, timeout=30)

    asyncio.run(scenario())
