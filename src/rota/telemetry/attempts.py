"""What a worker records around each attempt: the log context, the consumer span, the
queue wait and run time, how the attempt ended, and its one log line. Plain Python on the
hot path; no database work and no allocation beyond one small object per attempt."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from typing import Protocol

from rota.drivers.base import Completion
from rota.errors import Discard
from rota.job import Job, JobState
from rota.telemetry import metrics as m
from rota.telemetry.logging import current_job
from rota.telemetry.tracing import AttemptSpan, attempt_started


class Ended(Protocol):
    """How an attempt ended (rota.worker.executor.Execution has these fields)."""

    @property
    def completion(self) -> Completion | None: ...

    @property
    def completed(self) -> bool: ...

    @property
    def error(self) -> BaseException | None: ...


# Module constants: enum and module attribute lookups add up on the hot path.
_COMPLETED_STATE = JobState.COMPLETED
_RETRYABLE_STATE = JobState.RETRYABLE
_AVAILABLE_STATE = JobState.AVAILABLE
_DISCARDED_STATE = JobState.DISCARDED
COMPLETED, RETRIED, FAILED, DISCARDED, OTHER = (
    m.COMPLETED,
    m.RETRIED,
    m.FAILED_FINAL,
    m.DISCARDED,
    m.OTHER,
)


def outcome_of(ended: Ended | None) -> str:
    """Which counter an attempt moves (see the constants in rota.telemetry.metrics)."""
    if ended is None:
        return OTHER  # the executor itself crashed: the lease will expire
    completion = ended.completion
    if completion is None:
        return COMPLETED if ended.completed else OTHER  # lease lost: nothing written
    state = completion.state
    if state is _COMPLETED_STATE:
        return COMPLETED
    if state is _RETRYABLE_STATE or (state is _AVAILABLE_STATE and not completion.refund_attempt):
        return RETRIED
    if state is _DISCARDED_STATE:
        error = ended.error
        return FAILED if error is not None and not isinstance(error, Discard) else DISCARDED
    return OTHER  # snoozed, cancelled, returned on shutdown


# One line per finished attempt: INFO when it completed (or was snoozed, cancelled,
# returned), WARNING with the error when it will be retried or was dead-lettered.
job_log = logging.getLogger("rota.jobs")
ALL_QUEUES = "*"


def _other_outcome(ended: Ended | None) -> str:
    """The history word of an attempt that moved no counter (snoozed, cancelled, ...)."""
    completion = ended.completion if ended is not None else None
    if completion is None:
        return "lost (lease gone, nothing written)" if ended is not None else "crashed"
    try:
        return str(json.loads(completion.entry_json).get("outcome", completion.state))
    except ValueError:
        return str(completion.state)


# A message from user code is one log line: its control characters (NUL, newlines) and
# the characters that reorder text on screen are written as escapes.
_UNSAFE = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in [
        *range(0x20),
        0x7F,
        0x61C,
        0x200E,
        0x200F,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
}


def _error_text(ended: Ended | None) -> str:
    error = ended.error if ended is not None else None
    if error is None:
        return "no error"
    try:
        text = f"{type(error).__name__}: {error}"
    except Exception:  # a broken __str__ must not lose the line
        text = type(error).__name__
    text = text[:500].translate(_UNSAFE)
    return text if len(text) <= 500 else text[:499] + "…"


# What start() hands to finish(): the job, its span (None: tracing off) and the start time.
Watch = tuple[Job, AttemptSpan | None, float]


class AttemptObserver:
    """Called by the worker in each job's own asyncio task, so the log context and the
    current span belong to that attempt (and follow a sync task into its thread)."""

    def __init__(self, metrics: m.ProcessMetrics, *, quiet_queues: Collection[str] = ()) -> None:
        self.metrics = metrics
        # Asked once, not per job: the levels are set before a worker starts.
        self._info = job_log.isEnabledFor(logging.INFO) and ALL_QUEUES not in quiet_queues
        self._warn = job_log.isEnabledFor(logging.WARNING)
        self._quiet = frozenset(quiet_queues)

    def start(self, job: Job) -> Watch:
        current_job.set(job)
        return (job, attempt_started(job), time.perf_counter())

    def finish(self, watch: Watch, ended: Ended | None) -> None:
        job, span, started = watch
        seconds = time.perf_counter() - started
        outcome = outcome_of(ended)
        self.metrics.attempt_finished(job, outcome, seconds)
        if span is not None:
            failed = outcome is RETRIED or outcome is FAILED
            span.finish(outcome, ended.error if ended is not None and failed else None)
        if outcome is COMPLETED or outcome is OTHER:
            if self._info and job.queue not in self._quiet:
                word = outcome if outcome is COMPLETED else _other_outcome(ended)
                job_log.info(
                    "%s #%s %s in %.3fs (attempt %d)",
                    job.task,
                    job.id,
                    word,
                    seconds,
                    job.attempt,
                    extra={"outcome": word, "duration": round(seconds, 6)},
                )
        elif self._warn:
            error = _error_text(ended)
            # Retries and dead letters always say why, whatever the quiet queues.
            job_log.warning(
                "%s #%s %s after %.3fs (attempt %d of %d): %s",
                job.task,
                job.id,
                "will retry" if outcome is RETRIED else f"dead-lettered ({outcome})",
                seconds,
                job.attempt,
                job.max_attempts,
                error,
                extra={"outcome": outcome, "duration": round(seconds, 6), "error": error},
            )
