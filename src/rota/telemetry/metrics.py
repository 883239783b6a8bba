"""Process-local job metrics: what this process enqueued and what its worker ran, kept
in plain dicts under one lock, so the hot path pays a dict update and never a query.
rota.telemetry.prometheus turns them into Prometheus metrics at scrape time."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from rota.job import Job

# Seconds. Queue waits range from milliseconds (an idle worker) to hours (a backlog).
WAIT_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)
# Seconds. No-op tasks take microseconds; reports take minutes.
RUN_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)

# How one attempt ended, as the counters see it.
COMPLETED = "completed"
RETRIED = "retried"  # failed with an error; it will run again
FAILED_FINAL = "failed"  # failed with an error and was dead-lettered (attempts spent, permanent)
DISCARDED = "discarded"  # dead-lettered without an error of its own (Discard, bad arguments)
OTHER = "other"  # snoozed, cancelled, returned on shutdown: nothing to count


class Histogram:
    """Bucket counts, sum and count of one series (not cumulative until exported)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bound's bucket (le).
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, count) pairs as Prometheus exposes them, ending with +Inf."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out


@dataclass(frozen=True)
class HistogramSnapshot:
    buckets: list[tuple[str, int]]
    count: int
    sum: float


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of the counters, taken under the lock for one scrape."""

    enqueued: dict[tuple[str, str], int]
    completed: dict[tuple[str, str], int]
    failed: dict[tuple[str, str], int]
    retried: dict[tuple[str, str], int]
    discarded: dict[tuple[str, str], int]
    wait: dict[str, HistogramSnapshot]
    run: dict[str, HistogramSnapshot]


def _snap(hist: Histogram) -> HistogramSnapshot:
    return HistogramSnapshot(hist.cumulative(), sum(hist.counts), hist.sum)


class _Series:
    """The counters of one (task, queue) and the histograms of its task."""

    __slots__ = ("completed", "discarded", "failed", "retried", "run", "wait")

    def __init__(self, wait: Histogram, run: Histogram) -> None:
        self.completed = self.failed = self.retried = self.discarded = 0
        self.wait = wait
        self.run = run


class ProcessMetrics:
    """The counters of one process (`app.metrics`). Thread-safe: enqueues come from any
    thread, attempt outcomes from the worker's loop; each call takes one short lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._enqueued: dict[tuple[str, str], int] = {}
        self._series: dict[tuple[str, str], _Series] = {}
        self._histograms: dict[str, tuple[Histogram, Histogram]] = {}  # task: (wait, run)

    def _of(self, job: Job) -> _Series:
        key = (job.task, job.queue)
        series = self._series.get(key)
        if series is None:
            pair = self._histograms.get(job.task)
            if pair is None:
                pair = self._histograms[job.task] = (
                    Histogram(WAIT_BUCKETS),
                    Histogram(RUN_BUCKETS),
                )
            series = self._series[key] = _Series(*pair)
        return series

    def jobs_enqueued(self, jobs: Iterable[Job]) -> None:
        """Count the jobs an insert created (a duplicate idempotency key creates none)."""
        with self._lock:
            counts = self._enqueued
            for job in jobs:
                if job.created:
                    key = (job.task, job.queue)
                    counts[key] = counts.get(key, 0) + 1

    def attempt_finished(self, job: Job, outcome: str, seconds: float) -> None:
        """Count how one attempt ended (see the outcome constants), and observe its run
        time and how long the job waited from due (run_at) to claimed (attempted_at).
        Both are observed at the end: one lock per attempt."""
        attempted_at = job.attempted_at
        wait = 0.0 if attempted_at is None else (attempted_at - job.run_at).total_seconds()
        with self._lock:
            series = self._series.get((job.task, job.queue)) or self._of(job)
            if attempted_at is not None:
                # A claim a hair before run_at (clock rounding) waited 0 seconds.
                hist = series.wait
                hist.counts[bisect_left(WAIT_BUCKETS, wait) if wait > 0.0 else 0] += 1
                hist.sum += wait if wait > 0.0 else 0.0
            hist = series.run  # Histogram.observe, inlined: this runs for every attempt
            hist.counts[bisect_left(RUN_BUCKETS, seconds)] += 1
            hist.sum += seconds
            if outcome == COMPLETED:
                series.completed += 1
            elif outcome == RETRIED:
                series.failed += 1
                series.retried += 1
            elif outcome == FAILED_FINAL:
                series.failed += 1
                series.discarded += 1
            elif outcome == DISCARDED:
                series.discarded += 1

    def snapshot(self) -> Snapshot:
        with self._lock:
            series = list(self._series.items())

            def counts(name: str) -> dict[tuple[str, str], int]:
                return {key: n for key, s in series if (n := getattr(s, name))}

            return Snapshot(
                enqueued=dict(self._enqueued),
                completed=counts("completed"),
                failed=counts("failed"),
                retried=counts("retried"),
                discarded=counts("discarded"),
                wait={t: _snap(w) for t, (w, _) in self._histograms.items() if any(w.counts)},
                run={t: _snap(r) for t, (_, r) in self._histograms.items() if any(r.counts)},
            )
