"""A worker's own /metrics: its slots per queue, its roles and its completer, beside the
process counters (rota.telemetry.prometheus), served by `--metrics-port`."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from rota.telemetry.prometheus import ProcessCollector, registry_of
from rota.telemetry.server import MetricsServer, metrics_app, metrics_token
from rota.worker.db_calls import BUCKETS

if TYPE_CHECKING:
    from rota.worker.worker import Worker


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
        yield from _partition_metrics(worker)
        yield GaugeMetricFamily(
            "rota_worker_present",
            "1 while the worker holds its presence lock (it claims only then; a peer "
            "rescues the jobs of a worker whose lock is gone).",
            value=1 if worker.presence.present else 0,
        )
        yield CounterMetricFamily(
            "rota_worker_presence_losses",
            "Times the presence lock was lost while the worker lived (its session was cut).",
            value=worker.presence.losses,
        )
        yield GaugeMetricFamily(
            "rota_worker_ready",
            "1 while the worker fetches jobs (started, database reachable, not draining).",
            value=1 if worker.ready else 0,
        )


def _partition_metrics(worker: Worker) -> Iterator[Metric]:
    """How the worker's database calls fare, and what a cut link did (#21)."""
    calls = worker.calls
    cumulative = list(itertools.accumulate(calls.counts))
    buckets = [(f"{bound:g}", count) for bound, count in zip(BUCKETS, cumulative, strict=False)]
    buckets.append(("+Inf", cumulative[-1]))
    yield HistogramMetricFamily(
        "rota_worker_db_call_seconds",
        "Latency of this worker's database calls, from the request (a wait for a free "
        "database thread included) to the answer or the error.",
        buckets=buckets,
        sum_value=calls.total_seconds,
    )
    yield GaugeMetricFamily(
        "rota_worker_db_calls_in_flight",
        "Database calls waiting for an answer now.",
        value=calls.in_flight,
    )
    yield GaugeMetricFamily(
        "rota_worker_db_calls_hung_now",
        "Database calls waiting for an answer for longer than the hang threshold now.",
        value=calls.hung(),
    )
    yield CounterMetricFamily(
        "rota_worker_db_calls_hung",
        "Database calls that waited past the hang threshold (each counted once).",
        value=calls.hung_total,
    )
    yield CounterMetricFamily(
        "rota_worker_db_calls_failed",
        "Database calls that ended in an error.",
        value=calls.failed,
    )
    last = worker.heartbeater.last_beat
    yield GaugeMetricFamily(
        "rota_worker_heartbeat_age_seconds",
        "Seconds since the last heartbeat that succeeded (-1 before the first).",
        value=-1.0 if last is None else time.monotonic() - last,
    )
    yield GaugeMetricFamily(
        "rota_worker_cut_off",
        "1 while heartbeats fail or hang: claims are paused and leases run down.",
        value=1 if worker.cut_off else 0,
    )
    yield CounterMetricFamily(
        "rota_worker_lease_lost",
        "Jobs this worker stopped (or did not start) because their lease could not be "
        "confirmed in time.",
        value=worker.heartbeater.lease_lost,
    )
    yield CounterMetricFamily(
        "rota_worker_leader_lapses",
        "Leadership terms that ended here because no election came back in time.",
        value=worker.elector.lapses,
    )
    silences = getattr(worker.notifier, "silences", None)
    if silences is not None:
        yield CounterMetricFamily(
            "rota_worker_listen_silences",
            "Times the LISTEN connection's own NOTIFY did not come back in time.",
            value=silences,
        )


def worker_registry(worker: Worker) -> CollectorRegistry:
    """What `rota worker --metrics-port` serves: this process's counters and its slots."""
    return registry_of(ProcessCollector(worker.app.metrics), WorkerCollector(worker))


def worker_metrics_server(worker: Worker) -> MetricsServer:
    """The /metrics server of `worker` on its settings' metrics host and port."""
    port = worker.settings.metrics_port
    assert port is not None
    app = metrics_app(worker_registry(worker), in_thread=False, token=metrics_token())
    return MetricsServer(app, worker.settings.metrics_host, port)
