"""OpenTelemetry traces with the SDK's in-memory exporter: an enqueue is a producer span
whose context travels in the job's meta, every attempt a consumer span in the same
trace (current inside the task, sync or async), failures recorded on their attempt;
and nothing at all happens while no tracer provider is set."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import rota
from rota.telemetry import tracing
from rota.telemetry.logging import JsonFormatter
from tests.helpers import fast_settings, run_worker_until


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        tracing.set_tracer_provider(None)
        provider.shutdown()


def run(app: rota.App, condition: Any, **settings: Any) -> None:
    worker = rota.Worker(app, fast_settings(**settings))
    asyncio.run(run_worker_until(worker, condition))


def by_kind(exporter: InMemorySpanExporter, kind: SpanKind) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind is kind]


def test_producer_and_consumer_spans_form_one_trace(
    app: rota.App, spans: InMemorySpanExporter
) -> None:
    seen: dict[int, Any] = {}
    log_stream = io.StringIO()
    handler = logging.StreamHandler(log_stream)
    handler.setFormatter(JsonFormatter())
    user_log = logging.getLogger("tests.tracing.user")
    user_log.addHandler(handler)
    user_log.setLevel(logging.INFO)

    @app.task(queue="tickets", max_attempts=3, backoff=rota.Backoff(base=0))
    def make_ticket(ctx: rota.Context, order: int) -> None:
        # Sync: runs in a thread, yet the attempt's span is the current one there.
        seen[ctx.attempt] = trace.get_current_span().get_span_context()
        user_log.info("making ticket %s", order)
        if ctx.attempt == 1:
            raise ValueError("printer jammed")

    outer = tracing._tracer()
    assert outer is not None
    with outer.start_as_current_span("POST /orders") as request:
        job = make_ticket.enqueue(order=42)
    try:
        run(
            app,
            lambda: app.get_job(job.id).state is rota.JobState.COMPLETED,
            queues={"tickets": 2},
        )
    finally:
        user_log.removeHandler(handler)

    (producer,) = by_kind(spans, SpanKind.PRODUCER)
    consumers = sorted(
        by_kind(spans, SpanKind.CONSUMER), key=lambda s: s.attributes["rota.job.attempt"]
    )
    trace_id = request.get_span_context().trace_id
    assert producer.context.trace_id == trace_id
    assert producer.parent is not None and producer.parent.span_id == request.context.span_id
    assert producer.name == "send tickets"
    assert producer.attributes["messaging.system"] == "rota"
    assert producer.attributes["messaging.operation.type"] == "send"
    assert producer.attributes["messaging.destination.name"] == "tickets"
    assert producer.attributes["rota.job.id"] == job.id
    assert producer.attributes["rota.job.task"] == make_ticket.name

    stored = app.get_job(job.id).meta["trace"]["traceparent"]
    # version-traceid-parentid-flags (the SDK may set more flags than "sampled")
    assert stored.startswith(f"00-{trace_id:032x}-{producer.context.span_id:016x}-")

    assert [c.attributes["rota.job.attempt"] for c in consumers] == [1, 2]
    for consumer in consumers:
        assert consumer.name == "process tickets"
        assert consumer.context.trace_id == trace_id
        assert consumer.parent is not None
        assert consumer.parent.span_id == producer.context.span_id
        attrs = consumer.attributes
        assert attrs["rota.job.id"] == job.id
        assert attrs["messaging.message.id"] == str(job.id)
        assert attrs["rota.job.task"] == make_ticket.name
        assert attrs["messaging.destination.name"] == "tickets"
        assert attrs["messaging.operation.type"] == "process"
        # The task saw its own attempt's span as the current one.
        assert seen[attrs["rota.job.attempt"]].span_id == consumer.context.span_id

    failed, succeeded = consumers
    assert failed.status.status_code is StatusCode.ERROR
    assert "printer jammed" in (failed.status.description or "")
    assert failed.attributes["rota.job.outcome"] == "retried"
    assert failed.attributes["error.type"] == "ValueError"
    (event,) = failed.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert succeeded.status.status_code is StatusCode.UNSET
    assert succeeded.attributes["rota.job.outcome"] == "completed"
    assert not succeeded.events

    # Every log line of the task carries the job and the trace.
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert [(line["attempt"], line["message"]) for line in lines] == [
        (1, "making ticket 42"),
        (2, "making ticket 42"),
    ]
    for line in lines:
        assert line["job_id"] == job.id
        assert line["task"] == make_ticket.name
        assert line["queue"] == "tickets"
        assert line["trace_id"] == f"{trace_id:032x}"


def test_async_tasks_and_dead_letters(app: rota.App, spans: InMemorySpanExporter) -> None:
    current: list[int] = []

    @app.task(max_attempts=1)
    async def fetch(url: str) -> None:
        current.append(trace.get_current_span().get_span_context().span_id)
        raise ConnectionError(f"cannot reach {url}")

    job = fetch.enqueue(url="https://example.invalid")
    run(app, lambda: app.get_job(job.id).state is rota.JobState.DISCARDED)
    (producer,) = by_kind(spans, SpanKind.PRODUCER)
    (consumer,) = by_kind(spans, SpanKind.CONSUMER)
    assert consumer.context.trace_id == producer.context.trace_id
    assert current == [consumer.context.span_id]
    assert consumer.attributes["rota.job.outcome"] == "failed"
    assert consumer.status.status_code is StatusCode.ERROR
    assert consumer.events[0].attributes["exception.type"] == "ConnectionError"


def test_a_bulk_enqueue_is_one_send_and_feature_meta_is_kept(
    app: rota.App, spans: InMemorySpanExporter
) -> None:
    @app.task(queue="mail")
    def send(to: str) -> None: ...

    jobs = send.enqueue_many([{"to": f"u{i}@example.com"} for i in range(3)])
    (producer,) = by_kind(spans, SpanKind.PRODUCER)
    assert producer.attributes["messaging.batch.message_count"] == 3
    assert "rota.job.id" not in producer.attributes
    parents = {app.get_job(j.id).meta["trace"]["traceparent"][:52] for j in jobs}
    assert parents == {f"00-{producer.context.trace_id:032x}-{producer.context.span_id:016x}"}

    # Meta that another feature attached travels beside the trace context.
    row = send.build({"to": "ops@example.com"}, meta={"batch": {"index": 4}})
    (stored,) = app._insert([row], conn=None, tasks=[send])
    meta = app.get_job(stored.id).meta
    assert meta["batch"] == {"index": 4} and "traceparent" in meta["trace"]


def test_without_a_tracer_provider_nothing_is_traced(app: rota.App) -> None:
    assert tracing._tracer() is None  # the global provider is the API's no-op proxy

    @app.task
    def noop() -> None:
        assert trace.get_current_span().get_span_context().is_valid is False

    job = noop.enqueue()
    assert app.get_job(job.id).meta == {}
    run(app, lambda: app.get_job(job.id).state is rota.JobState.COMPLETED)
    assert tracing.attempt_started(job) is None


def test_logs_take_the_trace_id_from_meta_where_no_spans_are_recorded() -> None:
    from datetime import UTC, datetime

    from rota.telemetry.logging import current_job, job_fields

    now = datetime.now(UTC)
    job = rota.Job(
        id=7,
        task="t",
        queue="q",
        args={},
        state=rota.JobState.RUNNING,
        priority=0,
        attempt=2,
        max_attempts=3,
        run_at=now,
        created_at=now,
        meta={"trace": {"traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"}},
    )
    assert job_fields(job) == {
        "job_id": 7,
        "task": "t",
        "queue": "q",
        "attempt": 2,
        "trace_id": "ab" * 16,
    }
    invalid = {"trace": {"traceparent": "00-" + "0" * 32 + "-" + "cd" * 8 + "-01"}}
    assert "trace_id" not in job_fields(rota.Job(**{**job.__dict__, "meta": invalid}))
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    token = current_job.set(job)
    try:
        line = json.loads(JsonFormatter().format(record))
    finally:
        current_job.reset(token)
    assert line["job_id"] == 7 and line["trace_id"] == "ab" * 16
    assert "job_id" not in json.loads(JsonFormatter().format(record))
