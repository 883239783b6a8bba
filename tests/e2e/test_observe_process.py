"""A real `rota worker --log-format json --metrics-port 0` process: every log line written
while a job runs (by a plain logger or ctx.log, in a sync thread or on the loop) carries
the job id, task, queue, attempt and the trace id the enqueue stored; and its /metrics
counts the attempts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

import rota
from rota.telemetry import tracing
from tests.helpers import wait_for

pytestmark = pytest.mark.e2e

APPS = Path(__file__).parent / "apps"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture
def worker_log(database_url: str, tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ROTA_", "OTEL_"))}
    environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(APPS), os.environ.get("PYTHONPATH", "")) if p
    )
    environ["ROTA_DATABASE_URL"] = database_url
    path = tmp_path / "worker.log"
    with path.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "rota", "worker", "--app", "observe_app:app",
                "--queues", "tickets=2", "--log-format", "json", "--poll-interval", "0.1",
                "--metrics-port", "0", "--metrics-host", "127.0.0.1",
            ],
            env=environ,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        yield path, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for raw in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(raw))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON log line: {raw!r}") from None
    return out


def test_json_logs_and_metrics_of_a_worker_process(
    database_url: str, worker_log: tuple[Path, subprocess.Popen[bytes]]
) -> None:
    path, proc = worker_log
    app = rota.App(database_url)
    app.migrate()

    # Stand-ins with the worker's task names: this process only enqueues.
    @app.task(name="observe_app.make_ticket", queue="tickets", max_attempts=2)
    def make_ticket(order: int) -> None: ...

    @app.task(name="observe_app.notify", queue="tickets")
    def notify(order: int) -> None: ...

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.set_tracer_provider(provider)
    try:
        ticket = make_ticket.enqueue(order=42)
        note = notify.enqueue(order=43)
    finally:
        tracing.set_tracer_provider(None)
    producers = {
        s.attributes["rota.job.id"]: f"{s.context.trace_id:032x}"
        for s in exporter.get_finished_spans()
        if s.kind is SpanKind.PRODUCER
    }
    try:
        wait_for(
            lambda: all(app.get_job(j.id).state is rota.JobState.COMPLETED for j in (ticket, note)),
            timeout=20,
        )

        def port() -> int | None:
            assert proc.poll() is None, path.read_text()
            for line in lines(path):
                if line["message"].startswith("metrics on http://"):
                    return int(line["message"].rsplit(":", 1)[1].split("/")[0])
            return None

        with _OPENER.open(f"http://127.0.0.1:{wait_for(port)}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        app.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)

    logged = lines(path)
    in_jobs = [line for line in logged if line["logger"] in ("observe_app", "rota.task")]
    by_job: dict[int, list[tuple[int, str]]] = {}
    for line in in_jobs:
        by_job.setdefault(line["job_id"], []).append((line["attempt"], line["message"]))
        task = "observe_app.make_ticket" if line["job_id"] == ticket.id else "observe_app.notify"
        assert line["task"] == task
        assert line["queue"] == "tickets"
        # The worker records no spans; the trace id comes from the job's stored context.
        assert line["trace_id"] == producers[line["job_id"]]
    assert by_job == {
        ticket.id: [
            (1, "printing the ticket of order 42"),
            (1, "attempt 1"),
            (2, "printing the ticket of order 42"),
            (2, "attempt 2"),
        ],
        note.id: [(1, "order 43 is ready")],
    }
    assert producers[ticket.id] != producers[note.id]
    started = [line for line in logged if line["message"].startswith("worker ")]
    assert started and all("job_id" not in line for line in started)

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    ticket_labels = (("queue", "tickets"), ("task", "observe_app.make_ticket"))
    assert samples[("rota_jobs_completed_total", ticket_labels)] == 1
    assert samples[("rota_jobs_failed_total", ticket_labels)] == 1
    assert samples[("rota_jobs_retried_total", ticket_labels)] == 1
    note_labels = (("queue", "tickets"), ("task", "observe_app.notify"))
    assert samples[("rota_jobs_completed_total", note_labels)] == 1
    assert samples[("rota_worker_concurrency", (("queue", "tickets"),))] == 2


def test_rota_metrics_serves_until_sigterm(sqlite_url: str, tmp_path: Path) -> None:
    app = rota.App(sqlite_url)
    app.migrate()

    @app.task(queue="tickets")
    def make_ticket(order: int) -> None: ...

    make_ticket.enqueue(order=1)
    app.close()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    path = tmp_path / "metrics.log"
    with path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rota", "metrics", "--database-url", sqlite_url,
             "--port", "0", "--host", "127.0.0.1"],
            env=environ, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:

        def port() -> int | None:
            assert proc.poll() is None, path.read_text()
            for line in path.read_text().splitlines():
                if line.startswith("serving cluster metrics on http://"):
                    return int(line.rsplit(":", 1)[1].split("/")[0])
            return None

        with _OPENER.open(f"http://127.0.0.1:{wait_for(port)}/metrics", timeout=5) as r:
            text = r.read().decode()
        assert 'rota_queue_jobs{queue="tickets",state="available"} 1.0' in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
