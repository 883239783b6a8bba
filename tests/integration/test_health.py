"""The worker's health endpoint in-process, over real HTTP: liveness, readiness (false
while starting, when the database fails, and first thing on stop), and /metrics/keda with
its token; and the probes' rules on their own."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import rota
from rota.errors import ConfigurationError
from rota.worker.health import (
    MAX_LOOP_LAG,
    TOKEN_ENV,
    HealthServer,
    LoopMonitor,
    Probe,
    WorkerHealth,
    build_app,
)
from tests.helpers import async_wait_for, fast_settings

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with _OPENER.open(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def aget(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    return await asyncio.to_thread(get, url, headers)


def settings(**overrides: object) -> rota.WorkerSettings:
    return fast_settings(health_port=0, health_host="127.0.0.1", **overrides)


def base(worker: rota.Worker) -> str:
    assert worker.health is not None
    return f"http://127.0.0.1:{worker.health.port}"


def test_probes_metrics_and_the_order_of_a_stop(app: rota.App) -> None:
    release = threading.Event()

    @app.task(queue="tickets")
    def hold(ctx: rota.Context) -> str:
        release.wait(10)
        return "done"

    @app.task(queue="reports")
    def report() -> None: ...

    worker = rota.Worker(app, settings(queues={"tickets": 1}))
    seen_at_stop: list[bool] = []

    async def scenario() -> None:
        async def watch_stop() -> None:
            # Waits on the very event the fetchers check, and was waiting before the worker
            # started: whatever sees "stop fetching" must also see "not ready".
            await worker._stop.wait()
            seen_at_stop.append(worker.ready)

        watcher = asyncio.create_task(watch_stop())
        running = asyncio.create_task(worker.run())
        await async_wait_for(lambda: worker.ready, timeout=10)
        url = base(worker)
        status, body = await aget(f"{url}/livez")
        assert status == 200 and body["status"] == "ok" and body["loop_lag_s"] < 1
        assert (await aget(f"{url}/readyz"))[0] == 200

        job = hold.enqueue()
        report.enqueue_many([{}, {}])
        await async_wait_for(lambda: app.get_job(job.id).state is rota.JobState.RUNNING)  # type: ignore[union-attr]
        status, body = await aget(f"{url}/metrics/keda?queue=reports")
        assert status == 200
        assert body == {
            "queue": "reports",
            "backlog": 2,
            "running": 0,
            "oldest_age_s": body["oldest_age_s"],
            "demand": 2,
        }
        assert 0 <= body["oldest_age_s"] < 30
        status, body = await aget(f"{url}/metrics/keda?queue=tickets")
        assert (body["backlog"], body["running"], body["demand"]) == (0, 1, 1)
        assert (await aget(f"{url}/metrics/keda"))[0] == 400
        assert (await aget(f"{url}/metrics/keda?queue=bad%20name"))[0] == 400

        worker.stop()
        # Unready while the held job still runs: the drain has only begun.
        await async_wait_for(lambda: _is_draining(url), timeout=5)
        assert app.get_job(job.id).state is rota.JobState.RUNNING  # type: ignore[union-attr]
        status, body = await aget(f"{url}/livez")
        assert status == 200  # draining is alive
        release.set()
        await asyncio.wait_for(running, timeout=10)
        await watcher

    asyncio.run(scenario())
    assert seen_at_stop == [False]
    assert app.get_job(1) is not None and app.get_job(1).state is rota.JobState.COMPLETED  # type: ignore[union-attr]


async def _is_draining(url: str) -> bool:
    status, body = await aget(f"{url}/readyz")
    return status == 503 and body["reason"].startswith("draining") and body["running"] == 1


def test_unready_while_the_database_is_unreachable(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'no-such-dir' / 'rota.db'}"
    with rota.App(missing) as app:

        @app.task
        def noop() -> None: ...

        worker = rota.Worker(app, settings())

        async def scenario() -> None:
            running = asyncio.create_task(worker.run())
            await async_wait_for(
                lambda: worker.health is not None and worker.health.port, timeout=5
            )
            url = base(worker)
            await async_wait_for(lambda: worker.health._server is not None, timeout=5)  # type: ignore[union-attr]
            status, body = await aget(f"{url}/readyz")
            assert status == 503 and body["reason"].startswith("starting")
            assert (await aget(f"{url}/livez"))[0] == 200  # waiting is not dead
            worker.stop()
            await asyncio.wait_for(running, timeout=5)

        asyncio.run(scenario())


def test_metrics_token(app: rota.App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "s3cret")

    @app.task
    def noop() -> None: ...

    worker = rota.Worker(app, settings())

    async def scenario() -> None:
        running = asyncio.create_task(worker.run())
        await async_wait_for(lambda: worker.ready, timeout=10)
        url = f"{base(worker)}/metrics/keda?queue=default"
        status, body = await aget(url)
        assert status == 401 and "Bearer" in body["error"]
        assert (await aget(url, {"Authorization": "Bearer wrong"}))[0] == 401
        assert (await aget(url, {"Authorization": "Bearer s3cret"}))[0] == 200
        assert (await aget(url, {"X-API-Key": "s3cret"}))[0] == 200
        assert (await aget(f"{base(worker)}/livez"))[0] == 200  # probes need no token
        worker.stop()
        await asyncio.wait_for(running, timeout=10)

    asyncio.run(scenario())


def test_liveness_and_readiness_rules(app: rota.App) -> None:
    worker = rota.Worker(app, settings(lease=2.0))
    health = WorkerHealth(worker, LoopMonitor())
    assert health.live().ok  # nothing started yet: alive, not ready
    assert not health.ready().ok and health.ready().detail["reason"].startswith("starting")
    worker.ready = True
    assert health.ready().ok
    health.monitor.lag = MAX_LOOP_LAG + 1
    assert not health.live().ok and "lag" in health.live().detail["reason"]
    health.monitor.lag = 0.0
    worker.heartbeater.last_attempt = time.monotonic() - health.stall_after - 1
    assert not health.live().ok and "heartbeat" in health.live().detail["reason"]
    worker.heartbeater.last_attempt = time.monotonic()
    worker.heartbeater.failures = 2
    probe = health.ready()
    assert not probe.ok and probe.detail["connected"] is False
    assert "database unreachable" in probe.detail["reason"]
    assert health.live().ok  # a failing database makes a worker unready, not dead
    worker.heartbeater.failures = 0
    assert health.ready().ok
    worker.stop()  # no loop yet: marks it stopping at once
    assert not health.ready().ok and health.ready().detail["draining"] is True


def test_a_taken_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = HealthServer(
            build_app(live=lambda: Probe(True), ready=lambda: Probe(True)), "127.0.0.1", port
        )
        with pytest.raises(ConfigurationError, match="--health-port"):
            asyncio.run(server.start())


def test_health_port_setting_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="health_port"):
        rota.WorkerSettings(health_port=70_000)
    assert rota.WorkerSettings().health_port is None  # off by default
