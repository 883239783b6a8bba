"""Deprecated location: OpenTelemetry spans now live in rota.telemetry.tracing (the engine
produces them; this package exports them). Kept so `rota.observe.tracing.set_tracer_provider`
keeps working."""

from rota.telemetry.tracing import (
    META_KEY,
    SYSTEM,
    AttemptSpan,
    attempt_started,
    set_tracer_provider,
    trace_id_of,
    traced_insert,
)

__all__ = [
    "META_KEY",
    "SYSTEM",
    "AttemptSpan",
    "attempt_started",
    "set_tracer_provider",
    "trace_id_of",
    "traced_insert",
]
