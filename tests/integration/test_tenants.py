"""Tenants on both dialects: the fair claim takes what rota.tenants.fair.fair_pick
takes, caps hold across claims, a burst of one tenant does not starve another (real
in-process workers), and bad input is refused."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import defaultdict

import pytest

import rota
from rota.tenants.fair import Candidate, fair_pick
from rota.worker.fetcher import claim_now
from tests.helpers import fast_settings, run_worker_until


def _candidate(job: rota.Job) -> Candidate:
    return Candidate(job.id, job.tenant, job.priority, job.run_at)


def test_the_fair_claim_takes_what_fair_pick_takes(app: rota.App) -> None:
    @app.task(queue="reports")
    def report(n: int) -> None:
        pass

    app.tenants.set_fair("reports")
    assert app.tenants.fair_queues() == ["reports"]
    assert app.tenants.configure("small", max_running=2).max_running == 2
    jobs = []
    for n in range(30):
        tenant = ("big", "big", "big", "small", None, "mid")[n % 6]
        jobs.append(report.enqueue(n=n, tenant=tenant, priority=(n * 7) % 3 - 1))
    waiting = {j.id: _candidate(app.get_job(j.id)) for j in jobs}
    running: dict[str | None, int] = defaultdict(int)
    for size in (5, 3, 7, 4):
        expected = fair_pick(list(waiting.values()), running, {"small": 2}, size)
        claimed = claim_now(app, "reports", size, "w", 30, ())
        assert sorted(j.id for j in claimed) == sorted(expected)
        for job_id in expected:
            running[waiting.pop(job_id).tenant] += 1
    assert running["small"] == 2  # capped, though five of its jobs wait
    small = app.tenants.get("small")
    assert (small.running, small.waiting, small.max_running) == (2, 3, 2)
    assert {t.name for t in app.tenants.list()} == {"big", "small", "mid"}
    app.tenants.set_fair("reports", False)  # plain again: priority order, no caps
    assert app.tenants.fair_queues() == []
    claimed = claim_now(app, "reports", 100, "w", 30, ())
    assert len(claimed) == len(waiting)


@pytest.mark.parametrize("seed", range(4))
def test_random_fair_claims_match_fair_pick(app: rota.App, seed: int) -> None:
    rng = random.Random(seed)

    @app.task(queue="mixed")
    def job(n: int) -> None:
        pass

    app.tenants.set_fair("mixed")
    caps = {t: rng.randint(1, 4) for t in ("t1", "t2", "t3") if rng.random() < 0.7}
    for tenant, cap in caps.items():
        app.tenants.configure(tenant, max_running=cap)
    for n in range(rng.randint(10, 60)):
        tenant = rng.choice([None, "t1", "t2", "t3", "t4"])
        job.enqueue(n=n, tenant=tenant, priority=rng.randint(-1, 1))
    waiting = {j.id: _candidate(j) for j in app.list_jobs(queue="mixed", limit=1000)}
    running: dict[str | None, int] = defaultdict(int)
    while True:
        size = rng.randint(1, 9)
        expected = fair_pick(list(waiting.values()), running, caps, size)
        claimed = claim_now(app, "mixed", size, "w", 30, ())
        assert sorted(j.id for j in claimed) == sorted(expected)
        if not expected:
            break
        for job_id in expected:
            running[waiting.pop(job_id).tenant] += 1


def test_a_burst_of_one_tenant_does_not_starve_another(app: rota.App) -> None:
    lock = threading.Lock()
    order: list[str] = []
    load: dict[str, int] = defaultdict(int)
    peak: dict[str, int] = defaultdict(int)

    @app.task(queue="reports")
    def report(ctx: rota.Context) -> None:
        tenant = ctx.job.tenant or "-"
        with lock:
            order.append(tenant)
            load[tenant] += 1
            peak[tenant] = max(peak[tenant], load[tenant])
        time.sleep(0.01)
        with lock:
            load[tenant] -= 1

    app.tenants.set_fair("reports")
    app.tenants.configure("acme", max_running=2)
    report.enqueue_many([{}] * 120, tenant="acme")  # the burst comes first
    report.enqueue_many([{}] * 4, tenant="bolt")
    worker = rota.Worker(app, fast_settings(queues={"reports": 4}))
    asyncio.run(run_worker_until(worker, lambda: len(order) >= 40, timeout=30))
    last_bolt = max(i for i, t in enumerate(order) if t == "bolt")
    assert last_bolt < 12, order[:20]  # without fairness bolt would wait for 120 jobs
    assert peak["acme"] <= 2  # the cap held, while bolt used the other slots


def test_tenant_options_are_validated(app: rota.App) -> None:
    @app.task(queue="reports")
    def report() -> None:
        pass

    for bad in ("", "a b", "x" * 200, 5):
        with pytest.raises(rota.ArgumentsError):
            report.enqueue(tenant=bad)  # type: ignore[arg-type]
    assert app.list_jobs(queue="reports") == []
    assert report.enqueue(tenant="acme").tenant == "acme"
    for cap in (0, -1, True, 2.5, "3"):
        with pytest.raises(rota.ArgumentsError, match="max_running"):
            app.tenants.configure("acme", max_running=cap)  # type: ignore[arg-type]
    assert app.tenants.configure("acme", max_running=None).max_running is None
    with pytest.raises(rota.ArgumentsError):
        app.tenants.set_fair("bad queue")
    with pytest.raises(rota.ArgumentsError):
        app.tenants.set_fair("reports", "yes")  # type: ignore[arg-type]


def test_tenant_in_cluster_metrics_and_in_spans(app: rota.App) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rota.observe.cluster import ClusterCollector
    from rota.telemetry import tracing

    done: list[int] = []

    @app.task(queue="reports")
    def report(n: int) -> None:
        done.append(n)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.set_tracer_provider(provider)
    try:
        report.enqueue(n=1, tenant="acme")
        report.enqueue(n=2)
        app.tenants.configure("acme", max_running=3)
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in ClusterCollector(app.driver).collect()
            for s in family.samples
            if s.name.startswith("rota_tenant")
        }
        assert samples == {
            ("rota_tenant_jobs", (("state", "running"), ("tenant", "acme"))): 0,
            ("rota_tenant_jobs", (("state", "waiting"), ("tenant", "acme"))): 1,
            ("rota_tenant_max_running", (("tenant", "acme"),)): 3,
        }
        worker = rota.Worker(app, fast_settings(queues={"reports": 2}))
        asyncio.run(run_worker_until(worker, lambda: len(done) == 2))
    finally:
        tracing.set_tracer_provider(None)
        provider.shutdown()
    tenants = {
        (str(s.kind), s.attributes.get("rota.job.tenant"))  # type: ignore[union-attr]
        for s in exporter.get_finished_spans()
    }
    assert tenants == {
        ("SpanKind.PRODUCER", "acme"),
        ("SpanKind.PRODUCER", None),
        ("SpanKind.CONSUMER", "acme"),
        ("SpanKind.CONSUMER", None),
    }


def test_cli_tenants_and_enqueue_options(
    app: rota.App, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    from click.testing import CliRunner

    from rota.cli.main import cli

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "e2e" / "apps"))
    runner = CliRunner()
    env = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None, "ROTA_API_TOKEN": None}

    def run(*args: str) -> str:
        result = runner.invoke(cli, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result.output

    assert "fair by tenant" in run("tenants", "fair", "ml")
    assert "max running 3" in run("tenants", "set", "acme", "--max-running", "3")
    out = run(
        "enqueue", "--app", "routing_app:app", "route.tidy", "--tenant", "acme",
        "--require", "gpu", "--require", "mem:large", "--json",
    )  # fmt: skip
    body = json.loads(out)
    assert (body["tenant"], body["requires"]) == ("acme", ["gpu", "mem:large"])
    listing = json.loads(run("tenants", "ls", "--json"))
    assert listing == {
        "tenants": [{"name": "acme", "max_running": 3, "running": 0, "waiting": 1}],
        "fair_queues": ["ml"],
    }
    assert "no cap" in run("tenants", "set", "acme", "--max-running", "none")
    assert "plain" in run("tenants", "fair", "ml", "--off")
    bad = runner.invoke(cli, ["tenants", "set", "acme", "--max-running", "0"], env=env)
    assert bad.exit_code == 1 and "max_running" in bad.output
    bad = runner.invoke(cli, ["tenants", "set", "acme", "--max-running", "lots"], env=env)
    assert bad.exit_code == 2
    bad = runner.invoke(
        cli, ["enqueue", "--app", "routing_app:app", "route.tidy", "--require", "GPU"], env=env
    )
    assert bad.exit_code == 1 and "lower-case" in bad.output
