"""Cluster-wide metrics read from the database at scrape time, with a few cheap queries:
jobs by queue and state, the oldest waiting job, dead letters, live workers, the leader
and how late each cron schedule is. Served by `rota metrics` and `rota dashboard`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from rota.drivers.base import Driver, QueueReport
from rota.errors import RotaError
from rota.job import JobState
from rota.maintenance.horizon import HORIZON_THRESHOLD, HorizonHolder, horizon_holders
from rota.observe.holds import hold_families
from rota.observe.prometheus import registry_of
from rota.observe.store import LeaderReport, MetricsStore, WorkerReport
from rota.ops.hold_store import HoldStore
from rota.schedules.schedule import spec_of
from rota.schedules.store import ScheduleRecord, ScheduleStore
from rota.tenants.metrics import tenant_families
from rota.tenants.store import TenantStore

log = logging.getLogger("rota.metrics")

STATES = tuple(str(s) for s in JobState)


def schedule_lag(record: ScheduleRecord, now: datetime) -> float:
    """Seconds since the oldest tick that is due but not started (0 when on time or
    suspended). The base is the latest of creation, last start and last recorded miss,
    as the cron service reconciles it; a tick blocked by concurrency=forbid keeps
    counting until its run can start or is recorded as missed."""
    if record.suspended:
        return 0.0
    spec = spec_of(record)
    base = max(
        t
        for t in (record.created_at, record.last_schedule_time, record.last_missed_time)
        if t is not None
    )
    due = spec.ticks.next_after(base)
    if due is None or due > now:
        return 0.0
    return (now - due).total_seconds()


class ClusterCollector(Collector):
    """Reads the database when scraped. A scrape within `cache_seconds` of the last one
    reuses its numbers, so several scrapers or a live dashboard cost one set of queries.
    An unreachable database makes `rota_database_up` 0 instead of failing the scrape."""

    def __init__(self, driver: Driver, *, cache_seconds: float = 1.0) -> None:
        self.driver = driver
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._cached: list[Metric] = []
        self._cached_at = float("-inf")
        self.database_up = False  # whether the last reading succeeded

    def describe(self) -> Iterable[Metric]:
        return []  # never query the database just to register

    def collect(self) -> Iterator[Metric]:
        with self._lock:  # concurrent scrapes wait for one set of queries
            if time.monotonic() - self._cached_at >= self.cache_seconds:
                self._cached = self._read()
                self._cached_at = time.monotonic()
            families = list(self._cached)
        yield from families

    def _read(self) -> list[Metric]:
        start = time.perf_counter()
        up = GaugeMetricFamily(
            "rota_database_up", "1 when the cluster metrics could be read from the database."
        )
        try:
            driver = self.driver
            now = driver.db_now()
            queues = driver.queue_list()
            workers = MetricsStore(driver).workers()
            leaders = MetricsStore(driver).leaders()
            schedules = ScheduleStore(driver).all()
            holds, breakers = driver.queue_hold_list(), HoldStore(driver).breaker_list()
            tenants = TenantStore(driver).tenant_list()
            holders = horizon_holders(driver)
        except Exception as exc:  # a scrape reports the outage; it never raises
            log.warning("reading cluster metrics failed: %s: %s", type(exc).__name__, exc)
            up.add_metric([], 0)
            self.database_up = False
            return [up, _duration(start)]
        up.add_metric([], 1)
        self.database_up = True
        return [
            up,
            *_queue_families(queues),
            *_worker_families(workers, leaders),
            *_schedule_families(schedules, now),
            *hold_families(holds, breakers),
            *tenant_families(tenants),
            *_horizon_families(holders),
            _duration(start),
        ]


def _duration(start: float) -> Metric:
    return GaugeMetricFamily(
        "rota_cluster_scrape_duration_seconds",
        "Seconds the last read of the cluster metrics took.",
        value=time.perf_counter() - start,
    )


def _queue_families(queues: list[QueueReport]) -> list[Metric]:
    jobs = GaugeMetricFamily(
        "rota_queue_jobs", "Jobs per queue and state.", labels=("queue", "state")
    )
    oldest = GaugeMetricFamily(
        "rota_queue_oldest_job_age_seconds",
        "Seconds the oldest available job of the queue has waited since it was due "
        "(0 when none waits).",
        labels=("queue",),
    )
    paused = GaugeMetricFamily(
        "rota_queue_paused", "1 while the queue is paused.", labels=("queue",)
    )
    dead = GaugeMetricFamily(
        "rota_dead_letter_jobs",
        "Discarded jobs kept for inspection and replay (until the pruner removes them).",
        labels=("queue",),
    )
    for report in queues:
        for state in STATES:
            jobs.add_metric([report.name, state], report.counts.get(state, 0))
        oldest.add_metric([report.name], max(0.0, report.oldest_available_age or 0.0))
        paused.add_metric([report.name], 1 if report.paused else 0)
        dead.add_metric([report.name], report.counts.get(str(JobState.DISCARDED), 0))
    return [jobs, oldest, paused, dead]


def _worker_families(workers: list[WorkerReport], leaders: list[LeaderReport]) -> list[Metric]:
    # No worker registry exists: a worker is live when it holds a live job lease or a
    # live leader row. Idle followers are not visible here (their own /metrics are).
    live = {w.worker for w in workers} | {leader.leader for leader in leaders}
    live_workers = GaugeMetricFamily(
        "rota_workers_live",
        "Workers holding a live job lease or leader row (idle followers are not counted).",
        value=len(live),
    )
    running = GaugeMetricFamily(
        "rota_jobs_running_leased",
        "Running jobs whose lease is live (a lower count than running jobs means leases "
        "expired and the rescuer has work).",
        value=sum(w.running for w in workers),
    )
    info = InfoMetricFamily(
        "rota_leader", "The worker holding each leader-only role.", labels=("role",)
    )
    for leader in leaders:
        info.add_metric([leader.name], {"worker": leader.leader})
    since = GaugeMetricFamily(
        "rota_leader_elected_timestamp_seconds",
        "When the current leader of each role was elected (Unix time).",
        labels=("role",),
    )
    for leader in leaders:
        since.add_metric([leader.name], leader.elected_at.timestamp())
    return [live_workers, running, info, since]


def _horizon_families(holders: list[HorizonHolder] | None) -> list[Metric]:
    if holders is None:  # SQLite: no horizon to hold
        return []
    oldest = holders[0].age_s if holders else 0.0
    age = GaugeMetricFamily(
        "rota_database_xmin_horizon_age_seconds",
        "Seconds the oldest transaction holding a snapshot has run (0: none); while it "
        "runs VACUUM keeps every dead row version newer than it (PostgreSQL).",
        value=max(0.0, oldest),
    )
    held = GaugeMetricFamily(
        "rota_database_xmin_horizon_held",
        f"1 while a transaction has held the xmin horizon longer than {HORIZON_THRESHOLD:.0f}s "
        "(docs/operations.md#long-transactions).",
        value=1 if oldest >= HORIZON_THRESHOLD else 0,
    )
    return [age, held]


def _schedule_families(schedules: list[ScheduleRecord], now: datetime) -> list[Metric]:
    lag = GaugeMetricFamily(
        "rota_schedule_lag_seconds",
        "Seconds since the oldest due tick of the schedule that has not started (0: on time).",
        labels=("schedule",),
    )
    last = GaugeMetricFamily(
        "rota_schedule_last_schedule_timestamp_seconds",
        "The tick the schedule last started a run for (Unix time).",
        labels=("schedule",),
    )
    suspended = GaugeMetricFamily(
        "rota_schedule_suspended", "1 while the schedule is suspended.", labels=("schedule",)
    )
    active = GaugeMetricFamily(
        "rota_schedule_active_runs",
        "Unfinished runs the schedule started on its own.",
        labels=("schedule",),
    )
    for record in schedules:
        try:
            lag.add_metric([record.name], schedule_lag(record, now))
        except RotaError as exc:
            # Stored by a host whose tz database knows a zone this one lacks, say.
            log.warning("schedule %s: no lag metric (%s)", record.name, exc)
        if record.last_schedule_time is not None:
            last.add_metric([record.name], record.last_schedule_time.timestamp())
        suspended.add_metric([record.name], 1 if record.suspended else 0)
        active.add_metric([record.name], record.active)
    return [lag, last, suspended, active]


def cluster_registry(driver: Driver, *, cache_seconds: float = 1.0) -> CollectorRegistry:
    """A registry with the cluster-wide metrics alone (what `rota metrics` serves). The
    dashboard can register a ClusterCollector into its own registry instead."""
    return registry_of(ClusterCollector(driver, cache_seconds=cache_seconds))
