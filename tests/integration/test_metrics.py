"""Prometheus metrics on both dialects: a worker's own /metrics over real HTTP (counters
by outcome, histograms, saturation), the cluster-wide collector reading the database,
and `rota metrics --once`."""

from __future__ import annotations

import asyncio
import threading
import urllib.request
from datetime import timedelta

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

import rota
from rota.cli.main import cli
from rota.errors import ConfigurationError
from rota.observe.cluster import ClusterCollector, cluster_registry
from rota.telemetry.prometheus import registry_of, render_text
from rota.telemetry.server import MetricsServer, metrics_app
from tests.helpers import async_wait_for, fast_settings

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def scrape(port: int) -> tuple[str, str]:
    with _OPENER.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode(), response.headers["Content-Type"]


def test_worker_metrics_count_outcomes_and_saturation(app: rota.App) -> None:
    release = threading.Event()

    @app.task(queue="tickets")
    def ok(n: int) -> int:
        return n

    @app.task(queue="tickets", max_attempts=2, backoff=rota.Backoff(base=0))
    def flaky() -> None:
        raise ValueError("always")

    @app.task(queue="tickets")
    def spam() -> None:
        raise rota.Discard("not for us")

    @app.task(queue="reports")
    def hold() -> None:
        release.wait(10)

    ok.enqueue_many([{"n": i} for i in range(5)])
    flaky.enqueue()
    spam.enqueue()
    ok.enqueue(n=99, key="once")
    ok.enqueue(n=99, key="once")  # a duplicate key: not a new job
    hold.enqueue()
    settings = fast_settings(
        queues={"tickets": 3, "reports": 2}, metrics_port=0, metrics_host="127.0.0.1"
    )
    worker = rota.Worker(app, settings)

    async def scenario() -> Samples:
        task = asyncio.create_task(worker.run())
        try:
            await async_wait_for(lambda: worker.ready, timeout=10)
            assert worker.metrics_server is not None
            port = worker.metrics_server.port
            # The held job occupies one of the two report slots while we look.
            await async_wait_for(
                lambda: worker.fetchers["reports"].free == 1 and worker.completed >= 9,
                timeout=10,
            )
            text, content_type = await asyncio.to_thread(scrape, port)
            assert content_type.startswith("text/plain; version=0.0.4")
            release.set()
            return parse(text)
        finally:
            release.set()
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    samples = asyncio.run(scenario())
    tq = {"queue": "tickets"}
    assert value(samples, "rota_jobs_enqueued_total", task=ok.name, **tq) == 6
    assert value(samples, "rota_jobs_enqueued_total", task=hold.name, queue="reports") == 1
    assert value(samples, "rota_jobs_completed_total", task=ok.name, **tq) == 6
    assert value(samples, "rota_jobs_failed_total", task=flaky.name, **tq) == 2
    assert value(samples, "rota_jobs_retried_total", task=flaky.name, **tq) == 1
    assert value(samples, "rota_jobs_discarded_total", task=flaky.name, **tq) == 1
    assert value(samples, "rota_jobs_discarded_total", task=spam.name, **tq) == 1
    assert value(samples, "rota_jobs_failed_total", task=spam.name, **tq) is None
    assert value(samples, "rota_job_run_seconds_count", task=ok.name) == 6
    assert value(samples, "rota_job_run_seconds_bucket", task=ok.name, le="+Inf") == 6
    assert value(samples, "rota_job_queue_wait_seconds_count", task=flaky.name) == 2
    assert (value(samples, "rota_job_queue_wait_seconds_sum", task=ok.name) or 0) > 0
    assert value(samples, "rota_worker_running_jobs", queue="reports") == 1
    assert value(samples, "rota_worker_concurrency", queue="reports") == 2
    assert value(samples, "rota_worker_concurrency", queue="tickets") == 3
    assert value(samples, "rota_worker_ready") == 1
    assert value(samples, "rota_worker_leader") in (0, 1)


def test_cluster_metrics_read_the_database(app: rota.App) -> None:
    @app.task(queue="tickets")
    def ticket(n: int) -> None: ...

    @app.task(queue="mail", max_attempts=1)
    def mail() -> None:
        raise ValueError("bounced")

    ticket.enqueue_many([{"n": i} for i in range(3)])
    ticket.enqueue(n=9, delay=3600)
    mail.enqueue()
    app.pause_queue("paused-empty")
    app.schedule(ticket, "*/5 * * * *", args={"n": 0}, name="every-five")
    app.sync_schedules()
    collector = ClusterCollector(app.driver, cache_seconds=0)
    registry = registry_of(collector)

    # A worker runs only the mail queue: its job is dead-lettered, and it leads.
    worker = rota.Worker(app, fast_settings(queues={"mail": 1}))

    async def run() -> None:
        task = asyncio.create_task(worker.run())
        try:
            await async_wait_for(lambda: worker.elector.is_leader and worker.completed >= 1)
            samples = parse(await asyncio.to_thread(render_text, registry))
            assert value(samples, "rota_leader_info", role="maintenance", worker=worker.id) == 1
            assert value(samples, "rota_workers_live") == 1
        finally:
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    asyncio.run(run())
    samples = parse(render_text(registry))
    assert collector.database_up
    assert value(samples, "rota_database_up") == 1
    jobs = "rota_queue_jobs"
    assert value(samples, jobs, queue="tickets", state="available") == 3
    assert value(samples, jobs, queue="tickets", state="scheduled") == 1
    assert value(samples, jobs, queue="tickets", state="running") == 0
    assert value(samples, jobs, queue="mail", state="discarded") == 1
    assert value(samples, "rota_dead_letter_jobs", queue="mail") == 1
    assert value(samples, "rota_dead_letter_jobs", queue="tickets") == 0
    assert value(samples, "rota_queue_paused", queue="paused-empty") == 1
    assert value(samples, "rota_queue_paused", queue="tickets") == 0
    assert (value(samples, "rota_queue_oldest_job_age_seconds", queue="tickets") or 0) > 0
    assert value(samples, "rota_queue_oldest_job_age_seconds", queue="mail") == 0
    assert value(samples, "rota_workers_live") == 0  # it stopped and resigned
    assert value(samples, "rota_leader_info", role="maintenance", worker=worker.id) is None
    assert value(samples, "rota_schedule_lag_seconds", schedule="every-five") == 0
    assert value(samples, "rota_schedule_suspended", schedule="every-five") == 0
    assert value(samples, "rota_schedule_active_runs", schedule="every-five") == 0
    assert (value(samples, "rota_cluster_scrape_duration_seconds") or 0) > 0


def test_cluster_reading_is_cached(app: rota.App) -> None:
    @app.task
    def noop() -> None: ...

    collector = ClusterCollector(app.driver, cache_seconds=60)
    registry = registry_of(collector)
    before = parse(render_text(registry))
    noop.enqueue()
    cached = parse(render_text(registry))
    assert value(cached, "rota_queue_jobs", queue="default", state="available") is None
    assert cached == before
    collector.cache_seconds = 0
    fresh = parse(render_text(registry))
    assert value(fresh, "rota_queue_jobs", queue="default", state="available") == 1


def test_an_unreadable_database_is_a_metric_not_an_error(sqlite_url: str) -> None:
    unmigrated = rota.App(sqlite_url)
    try:
        down = ClusterCollector(unmigrated.driver, cache_seconds=0)
        samples = parse(render_text(registry_of(down)))
    finally:
        unmigrated.close()
    assert value(samples, "rota_database_up") == 0
    assert not down.database_up
    assert not any(name == "rota_queue_jobs" for name, _ in samples)


def test_cluster_metrics_served_over_http(app: rota.App) -> None:
    @app.task
    def noop() -> None: ...

    noop.enqueue()
    server = MetricsServer(
        metrics_app(cluster_registry(app.driver, cache_seconds=0), in_thread=True),
        "127.0.0.1",
        0,
    )

    async def run() -> tuple[str, str]:
        await server.start()
        try:
            return await asyncio.to_thread(scrape, server.port)
        finally:
            await server.stop()

    text, _ = asyncio.run(run())
    assert value(parse(text), "rota_queue_jobs", queue="default", state="available") == 1


def test_rota_metrics_once(app: rota.App) -> None:
    @app.task(queue="tickets")
    def noop() -> None: ...

    noop.enqueue(delay=timedelta(hours=1).total_seconds())
    result = CliRunner().invoke(cli, ["metrics", "--database-url", app.url.raw, "--once"])
    assert result.exit_code == 0, result.output
    samples = parse(result.output)
    assert value(samples, "rota_queue_jobs", queue="tickets", state="scheduled") == 1
    assert "# TYPE rota_queue_jobs gauge" in result.output


def test_rota_metrics_once_fails_on_an_unmigrated_database(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/empty.db"
    result = CliRunner().invoke(cli, ["metrics", "--database-url", url, "--once"])
    assert result.exit_code == 1
    assert "rota_database_up 0.0" in result.output


def test_metrics_port_is_validated_and_a_taken_port_is_an_error(sqlite_url: str) -> None:
    with pytest.raises(ConfigurationError, match="metrics_port"):
        rota.WorkerSettings(metrics_port=70_000)
    with pytest.raises(ConfigurationError, match="its own"):
        rota.WorkerSettings(metrics_port=9100, health_port=9100)
    app = rota.App(sqlite_url)
    app.migrate()

    @app.task
    def noop() -> None: ...

    async def run() -> None:
        first = MetricsServer(metrics_app(registry_of(), in_thread=False), "127.0.0.1", 0)
        await first.start()
        try:
            worker = rota.Worker(
                app, fast_settings(metrics_port=first.port, metrics_host="127.0.0.1")
            )
            with pytest.raises(ConfigurationError, match="--metrics-port"):
                await worker.run()
        finally:
            await first.stop()

    try:
        asyncio.run(run())
    finally:
        app.close()


def test_metrics_port_needs_one_process() -> None:
    result = CliRunner().invoke(
        cli,
        ["worker", "--app", "x:app", "--processes", "2", "--metrics-port", "9100"],
    )
    assert result.exit_code == 2
    assert "--metrics-port serves one worker process" in result.output
