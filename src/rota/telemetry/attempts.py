"""What a worker records around each attempt: the log context, the consumer span, the
queue wait and run time, and how the attempt ended. Plain Python on the hot path; no
database work and no allocation beyond one small object per attempt."""

from __future__ import annotations

import time
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


# What start() hands to finish(): the job, its span (None: tracing off) and the start time.
Watch = tuple[Job, AttemptSpan | None, float]


class AttemptObserver:
    """Called by the worker in each job's own asyncio task, so the log context and the
    current span belong to that attempt (and follow a sync task into its thread)."""

    def __init__(self, metrics: m.ProcessMetrics) -> None:
        self.metrics = metrics

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
