"""Prometheus collectors over the process-local numbers: the counters and histograms of
`app.metrics`, read only at scrape time (a worker adds its slots: rota.worker.metrics).
The registries here are private to rota, so several apps or workers in one process never
share series."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from rota.telemetry.metrics import HistogramSnapshot, ProcessMetrics

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


def registry_of(*collectors: Collector) -> CollectorRegistry:
    """A private registry holding `collectors` (never the global default one)."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return registry


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
