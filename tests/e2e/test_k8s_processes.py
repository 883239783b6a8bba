"""End to end, as Kubernetes drives it: a real `rota worker --health-port` process gets a
real SIGTERM while the test polls its health endpoint; and `rota k8s metrics-api` answers
KEDA with a bearer token and stops on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import rota
from rota import JobState, Outcome
from rota.drivers.base import JobInsert
from tests.helpers import wait_for

pytestmark = pytest.mark.e2e

APPS = Path(__file__).parent / "apps"
GRACE = 10.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Process:
    """One `python -m rota ...` subprocess in its own process group, logging JSON to a file."""

    def __init__(self, args: list[str], database_url: str, log_path: Path, **env: str) -> None:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
        environ.update(env)
        environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(APPS), os.environ.get("PYTHONPATH", "")) if p
        )
        environ["ROTA_DATABASE_URL"] = database_url
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "rota", *args],
                env=environ,
                cwd=log_path.parent,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def port(self) -> int:
        """The port it serves on, from its "health endpoint on http://host:port" log line."""

        def logged() -> int | None:
            if not self.alive():
                raise AssertionError(f"exited ({self.popen.returncode}):\n{self.logs()}")
            for line in self.logs().splitlines():
                try:
                    message = json.loads(line).get("message", "")
                except (json.JSONDecodeError, AttributeError):
                    continue
                if message.startswith("health endpoint on http://"):
                    return int(message.split(" ")[3].rsplit(":", 1)[1])
            return None

        return wait_for(logged, timeout=15)

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    try:
        with _OPENER.open(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for proc in started:
        proc.stop()


@pytest.fixture
def db(sqlite_url: str) -> Iterator[rota.App]:
    app = rota.App(sqlite_url)
    app.migrate()
    try:
        yield app
    finally:
        app.close()


def insert(app: rota.App, task: str, args: dict[str, Any]) -> rota.Job:
    """Enqueue a job of the worker's app without importing it here."""
    row = JobInsert(
        task=f"k8s_app.{task}", queue="tickets", args_json=json.dumps(args), priority=0,
        max_attempts=3,
    )  # fmt: skip
    return app.driver.job_insert_many([row])[0]


def state(app: rota.App, job_id: int) -> rota.Job:
    job = app.get_job(job_id)
    assert job is not None
    return job


def start_worker(
    processes: list[Process], app: rota.App, tmp_path: Path, grace: float
) -> tuple[Process, str]:
    worker = Process(
        [
            "worker", "--app", "k8s_app:app", "--queues", "tickets=2",
            "--grace", str(grace), "--health-port", "0", "--health-host", "127.0.0.1",
            "--lease", "1", "--heartbeat", "0.2", "--poll-interval", "0.1",
            "--log-format", "json",
        ],
        app.url.raw,
        tmp_path / "worker.log",
    )  # fmt: skip
    processes.append(worker)
    url = f"http://127.0.0.1:{worker.port()}"
    wait_for(lambda: get(f"{url}/readyz")[0] == 200, timeout=15)
    return worker, url


def test_sigterm_turns_unready_first_stops_fetching_and_drains_within_the_grace(
    db: rota.App, processes: list[Process], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    worker, url = start_worker(processes, db, tmp_path, GRACE)
    held = insert(db, "hold", {"gate": str(gate)})
    wait_for(lambda: state(db, held.id).state is JobState.RUNNING, timeout=10)

    worker.popen.send_signal(signal.SIGTERM)
    signalled = time.monotonic()

    def draining() -> dict[str, Any] | None:
        status, body = get(f"{url}/readyz")
        return body if status == 503 else None

    body = wait_for(draining, timeout=5)
    # Unready at the start of the drain: the process is up and its job still runs.
    assert body["reason"] == "draining: stopped fetching" and body["running"] == 1
    assert worker.alive() and state(db, held.id).state is JobState.RUNNING
    assert get(f"{url}/livez")[0] == 200  # a draining worker is not dead

    late = insert(db, "quick", {})
    # Let the draining worker go round its loop: two heartbeats of the held job after the
    # late job was committed. A fetcher still at work (0.1 s polls, and wake-ups on every
    # commit) would have claimed the late job, with a free slot, well before.
    beat = state(db, held.id).lease_expires_at
    assert beat is not None
    later = beat + timedelta(seconds=0.35)
    wait_for(lambda: state(db, held.id).lease_expires_at > later, timeout=5)  # type: ignore[operator]
    assert state(db, late.id).state is JobState.AVAILABLE

    gate.touch()
    assert worker.popen.wait(GRACE + 5) == 0, worker.logs()
    assert time.monotonic() - signalled < GRACE
    done = state(db, held.id)
    assert done.state is JobState.COMPLETED and done.attempt == 1 and done.result == "released"
    untouched = state(db, late.id)
    assert untouched.state is JobState.AVAILABLE and untouched.attempt == 0


def test_a_job_past_the_grace_is_returned_before_the_pod_would_be_killed(
    db: rota.App, processes: list[Process], tmp_path: Path
) -> None:
    grace = 1.0
    worker, _ = start_worker(processes, db, tmp_path, grace)
    held = insert(db, "hold", {"gate": str(tmp_path / "never")})
    wait_for(lambda: state(db, held.id).state is JobState.RUNNING, timeout=10)
    worker.popen.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert worker.popen.wait(30) == 0, worker.logs()
    # Well inside terminationGracePeriodSeconds (grace + 15 s in the rendered manifests).
    assert time.monotonic() - signalled < grace + 15
    returned = state(db, held.id)
    assert returned.state is JobState.AVAILABLE
    assert returned.history[-1].outcome is Outcome.SHUTDOWN
    assert returned.max_attempts == 4  # the attempt was given back


def test_a_taken_health_port_stops_the_worker_with_a_message(
    db: rota.App, processes: list[Process], tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        worker = Process(
            ["worker", "--app", "k8s_app:app", "--health-port", str(port),
             "--health-host", "127.0.0.1"],
            db.url.raw,
            tmp_path / "worker.log",
        )  # fmt: skip
        processes.append(worker)
        assert worker.popen.wait(30) == 1
    assert "choose another --health-port" in worker.logs()
    assert "Traceback" not in worker.logs()


def test_metrics_api_server_answers_keda_and_stops_on_sigterm(
    db: rota.App, processes: list[Process], tmp_path: Path
) -> None:
    insert(db, "quick", {})
    insert(db, "quick", {})
    server = Process(
        ["k8s", "metrics-api", "--port", "0", "--host", "127.0.0.1"],
        db.url.raw,
        tmp_path / "metrics.log",
        ROTA_METRICS_TOKEN="t0ken",
    )
    processes.append(server)
    url = f"http://127.0.0.1:{server.port()}"
    assert get(f"{url}/metrics/keda?queue=tickets")[0] == 401
    status, body = get(f"{url}/metrics/keda?queue=tickets", {"Authorization": "Bearer t0ken"})
    assert status == 200
    assert {k: body[k] for k in ("queue", "backlog", "running", "demand")} == {
        "queue": "tickets",
        "backlog": 2,
        "running": 0,
        "demand": 2,
    }
    assert get(f"{url}/readyz")[0] == 200 and get(f"{url}/livez")[0] == 200
    server.popen.send_signal(signal.SIGTERM)
    assert server.popen.wait(10) == 0, server.logs()
