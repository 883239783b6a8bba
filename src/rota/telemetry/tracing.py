"""OpenTelemetry traces: an enqueue is a producer span whose context (W3C traceparent)
travels in the job's meta under "trace"; each attempt is a consumer span, a child of it.
Without OpenTelemetry installed, or without a tracer provider set, nothing is done."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from rota.drivers.base import JobInsert
from rota.errors import describe
from rota.job import Job

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

META_KEY = "trace"  # job.meta["trace"]: the propagator's carrier, e.g. {"traceparent": ...}
SYSTEM = "rota"

_state: dict[str, Any] = {}


def set_tracer_provider(provider: TracerProvider | None) -> None:
    """Record rota's spans with `provider` instead of OpenTelemetry's global one (None:
    back to the global one). The global provider can be set only once per process."""
    _state["override"] = provider


def _tracer() -> Tracer | None:
    """rota's tracer while a real tracer provider is set, else None (the fast path: this
    runs for every enqueue and every attempt)."""
    trace: Any = _state.get("trace")
    if trace is None:
        if "trace" in _state:
            return None  # not installed
        try:
            from opentelemetry import trace as api
        except ImportError:
            _state["trace"] = None
            return None
        _state["trace"] = trace = api
        # The public getter reads os.environ on every call while no provider is set,
        # which costs more than the rest of this function; the module global it
        # returns is read directly when it exists (and the env is checked once).
        _state["direct"] = hasattr(api, "_TRACER_PROVIDER") and (
            "OTEL_PYTHON_TRACER_PROVIDER" not in os.environ
        )
    provider = _state.get("override")
    if provider is None:
        provider = trace._TRACER_PROVIDER if _state["direct"] else trace.get_tracer_provider()
        if provider is None:
            return None  # no provider set: the API would hand out a no-op proxy
    if _state.get("provider") is not provider:
        from rota import __version__

        # Until the application sets a provider, spans of the proxy record nothing.
        noop = isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
        _state["tracer"] = None if noop else provider.get_tracer("rota", __version__)
        _state["provider"] = provider
    tracer: Tracer | None = _state["tracer"]
    return tracer


def traced_insert(
    rows: Sequence[JobInsert], insert: Callable[[Sequence[JobInsert]], list[Job]]
) -> list[Job]:
    """Insert `rows` inside a producer span, with the span's context in each job's meta.
    One span per call: a bulk enqueue is one "send" of many messages."""
    if _tracer() is None:
        return insert(rows)  # no span to open: skip building one
    with _ProducerSpan(rows) as send:
        return send.done(insert(send.rows))


async def traced_insert_async(
    rows: Sequence[JobInsert],
    insert: Callable[[Sequence[JobInsert]], Awaitable[list[Job]]],
) -> list[Job]:
    """traced_insert for an async insert (`enqueue_async`)."""
    with _ProducerSpan(rows) as send:
        return send.done(await insert(send.rows))


class _ProducerSpan:
    """The producer span of one insert (nothing when OpenTelemetry is not set up): `rows`
    carry its context in their meta, `done(jobs)` records what was inserted."""

    def __init__(self, rows: Sequence[JobInsert]) -> None:
        self.rows = rows
        self._span: Any = None
        self._scope: Any = None
        tracer = _tracer()
        if tracer is None or not rows:
            return
        from opentelemetry.trace import SpanKind

        queues = {row.queue for row in rows}
        queue = next(iter(queues)) if len(queues) == 1 else None
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
        }
        if queue is not None:
            attributes["messaging.destination.name"] = queue
        tasks = {row.task for row in rows}
        if len(tasks) == 1:
            attributes["rota.job.task"] = rows[0].task
        tenants = {row.tenant for row in rows}
        if len(tenants) == 1 and rows[0].tenant is not None:
            attributes["rota.job.tenant"] = rows[0].tenant
        if len(rows) > 1:
            attributes["messaging.batch.message_count"] = len(rows)
        name = f"send {queue}" if queue is not None else "send"
        self._scope = tracer.start_as_current_span(
            name, kind=SpanKind.PRODUCER, attributes=attributes
        )

    def __enter__(self) -> _ProducerSpan:
        if self._scope is None:
            return self
        from opentelemetry import propagate

        self._span = self._scope.__enter__()
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        if carrier:
            self.rows = [_with_trace(row, carrier) for row in self.rows]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._scope is not None:
            self._scope.__exit__(*exc)

    def done(self, jobs: list[Job]) -> list[Job]:
        span = self._span
        if span is not None and len(jobs) == 1:
            span.set_attribute("messaging.message.id", str(jobs[0].id))
            span.set_attribute("rota.job.id", jobs[0].id)
            if not jobs[0].created:
                span.set_attribute("rota.job.deduplicated", True)
        return jobs


def _with_trace(row: JobInsert, carrier: dict[str, str]) -> JobInsert:
    meta = json.loads(row.meta_json) if row.meta_json else {}
    meta[META_KEY] = carrier
    return dataclasses.replace(row, meta_json=json.dumps(meta, separators=(",", ":")))


class AttemptSpan:
    """The consumer span of one attempt, current while the task runs."""

    __slots__ = ("_token", "span")

    def __init__(self, span: Span, token: object) -> None:
        self.span = span
        self._token = token

    def finish(self, outcome: str, error: BaseException | None) -> None:
        from opentelemetry import context
        from opentelemetry.trace import Status, StatusCode

        span = self.span
        span.set_attribute("rota.job.outcome", outcome)
        if error is not None and outcome != "completed":
            with contextlib.suppress(Exception):  # a broken __str__ costs only the event
                span.record_exception(error)
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, describe(error)[:500]))
        context.detach(self._token)  # type: ignore[arg-type]
        span.end()


def attempt_started(job: Job) -> AttemptSpan | None:
    """Start the consumer span of `job`'s attempt and make it current (in the caller's
    context: the worker's asyncio task for this job). None when tracing is off."""
    tracer = _tracer()
    if tracer is None:
        return None
    from opentelemetry import context, propagate, trace
    from opentelemetry.trace import SpanKind

    carrier = job.meta.get(META_KEY)
    parent = propagate.extract(carrier) if isinstance(carrier, dict) else None
    span = tracer.start_span(
        f"process {job.queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id),
            "rota.job.id": job.id,
            "rota.job.task": job.task,
            "rota.job.attempt": job.attempt,
        },
    )
    if job.tenant is not None:
        span.set_attribute("rota.job.tenant", job.tenant)
    token = context.attach(trace.set_span_in_context(span))
    return AttemptSpan(span, token)


def trace_id_of(job: Job) -> str | None:
    """The trace id of the current span, else the one stored with `job` at enqueue (so
    logs carry it even where this process records no spans); None when neither is known."""
    trace = _state.get("trace")
    if trace is not None:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            return f"{context.trace_id:032x}"
    carrier = job.meta.get(META_KEY)
    if isinstance(carrier, dict):
        parent = carrier.get("traceparent")
        # version-traceid-spanid-flags (W3C Trace Context)
        if isinstance(parent, str) and len(parent) >= 55 and parent[2] == "-":
            trace_id = parent[3:35]
            if trace_id.strip("0"):
                return trace_id
    return None
