"""Prometheus collectors over the process-local numbers: the counters and histograms of
`app.metrics` and a worker's slots, read only at scrape time. The registries here are
private to rota, so several apps or workers in one process never share series."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from rota.observe.metrics import HistogramSnapshot, ProcessMetrics

if TYPE_CHECKING:
    from rota.worker.worker import Worker

TASK_QUEUE = ("task", "queue")


class ProcessCollector(Collector):
    """Enqueue and attempt counters, queue wait and run time histograms of one process."""

    def __init__(self, metrics: ProcessMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return []  # never collect just to register

    def collect(self) -> Iterator[Metric]:
        snap = self.metrics.snapshot()
        for name, help_text, values in (
            (
                "rota_jobs_enqueued",
                "Jobs this process enqueued (created, not deduplicated).",
                snap.enqueued,
            ),
            ("rota_jobs_completed", "Attempts that completed the job.", snap.completed),
            (
                "rota_jobs_failed",
                "Attempts that ended with an error (retried or dead-lettered).",
                snap.failed,
            ),
            ("rota_jobs_retried", "Failed attempts whose job will run again.", snap.retried),
            (
                "rota_jobs_discarded",
                "Jobs dead-lettered by this worker (attempts spent, a permanent error, "
                "Discard, bad arguments).",
                snap.discarded,
            ),
        ):
            family = CounterMetricFamily(name, help_text, labels=TASK_QUEUE)
            for (task, queue), value in sorted(values.items()):
                family.add_metric([task, queue], value)
            yield family
        yield _histogram(
            "rota_job_queue_wait_seconds",
            "Seconds from when a job was due (run_at) to when an attempt started.",
            snap.wait,
        )
        yield _histogram("rota_job_run_seconds", "Seconds one attempt ran, by task.", snap.run)


def _histogram(name: str, help_text: str, series: dict[str, HistogramSnapshot]) -> Metric:
    family = HistogramMetricFamily(name, help_text, labels=("task",))
    for task, hist in sorted(series.items()):
        family.add_metric([task], hist.buckets, hist.sum)
    return family


class WorkerCollector(Collector):
    """A worker's slots per queue (running vs concurrency: saturation) and its roles."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        worker = self.worker
        running = GaugeMetricFamily(
            "rota_worker_running_jobs",
            "Slots of this worker in use per queue (jobs running, or a timed-out sync task "
            "whose thread has not returned yet).",
            labels=("queue",),
        )
        concurrency = GaugeMetricFamily(
            "rota_worker_concurrency", "Slots of this worker per queue.", labels=("queue",)
        )
        for queue, slots in sorted(worker.settings.queues.items()):
            fetcher = worker.fetchers.get(queue)
            busy = 0 if fetcher is None else fetcher.concurrency - fetcher.free
            running.add_metric([queue], busy)
            concurrency.add_metric([queue], slots)
        yield running
        yield concurrency
        yield GaugeMetricFamily(
            "rota_worker_leader",
            "1 while this worker is the elected leader running the maintenance services.",
            value=1 if worker.elector.is_leader else 0,
        )
        yield GaugeMetricFamily(
            "rota_worker_completions_pending",
            "Finished attempts waiting to be written by the completer.",
            value=worker.completer.pending,
        )
        yield GaugeMetricFamily(
            "rota_worker_hung_slots",
            "Slots held by a sync task still running in its thread after it timed out "
            "(Python cannot stop a thread; the slot comes back when it returns).",
            value=worker.hung,
        )
        yield CounterMetricFamily(
            "rota_worker_tasks_hung",
            "Sync tasks that went on running in their thread after they timed out.",
            value=worker.hung_total,
        )
        yield GaugeMetricFamily(
            "rota_worker_ready",
            "1 while the worker fetches jobs (started, database reachable, not draining).",
            value=1 if worker.ready else 0,
        )


def registry_of(*collectors: Collector) -> CollectorRegistry:
    """A private registry holding `collectors` (never the global default one)."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return registry


def worker_registry(worker: Worker) -> CollectorRegistry:
    """What `rota worker --metrics-port` serves: this process's counters and its slots."""
    return registry_of(ProcessCollector(worker.app.metrics), WorkerCollector(worker))


Renderer = Callable[[str], tuple[bytes, str]]


def renderer(registry: CollectorRegistry) -> Renderer:
    """A function from a request's Accept header to (body, content type): the Prometheus
    text format, or OpenMetrics when the scraper asks for it."""

    def render(accept: str) -> tuple[bytes, str]:
        encode, content_type = choose_encoder(accept)
        return encode(registry), content_type

    return render


def render_text(registry: CollectorRegistry) -> str:
    """The registry in the Prometheus text format (what `rota metrics --once` prints)."""
    body, _ = renderer(registry)("")
    return body.decode()
