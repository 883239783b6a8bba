"""promtool (Debian's `prometheus` package; .ci/install-promtool) checks what rota
exposes: a worker's and the cluster's real metrics output pass `promtool check metrics`,
and the sample alert rules pass `promtool check rules` and their `promtool test rules`
unit tests. In CI ($ROTA_REQUIRE_POSTGRES) a missing promtool fails instead of skipping."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import rota
from rota.observe.cluster import cluster_registry
from rota.telemetry.prometheus import render_text
from rota.worker.metrics import worker_registry
from tests.helpers import async_wait_for, fast_settings

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus-rules.yaml"
RULES_TEST = ROOT / "tests" / "data" / "prometheus" / "rules-test.yaml"


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        message = "promtool is not installed: run `bash .ci/install-promtool`"
        if os.environ.get("ROTA_REQUIRE_POSTGRES"):
            pytest.fail(message + " (CI must not skip)")
        pytest.skip(message)
    return path


def check_metrics(promtool: str, text: str) -> None:
    result = subprocess.run(
        [promtool, "check", "metrics"],
        check=False,
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
    )
    # promtool prints lint problems (naming, units, help) and exits 1 when there are any.
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_worker_and_cluster_metrics_pass_promtool(app: rota.App, promtool: str) -> None:
    @app.task(queue="tickets", max_attempts=2, backoff=rota.Backoff(base=0))
    def flaky(n: int) -> None:
        if n % 2:
            raise ValueError("odd")

    @app.task
    def digest() -> None: ...

    app.schedule(digest, "0 * * * *", name="hourly")
    flaky.enqueue_many([{"n": i} for i in range(4)])
    digest.enqueue(delay=600)
    app.pause_queue("paused")
    worker = rota.Worker(app, fast_settings(queues={"tickets": 2}))
    texts: list[str] = []

    async def run() -> None:
        task = asyncio.create_task(worker.run())
        try:
            await async_wait_for(lambda: worker.completed >= 6 and worker.elector.is_leader)
            texts.append(render_text(worker_registry(worker)))
            texts.append(await asyncio.to_thread(render_text, cluster_registry(app.driver)))
        finally:
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    asyncio.run(run())
    worker_text, cluster_text = texts
    # Real content, not empty families: the check must see every kind of series.
    assert 'rota_job_run_seconds_bucket{le="+Inf"' in worker_text
    assert "rota_jobs_retried_total{" in worker_text
    assert 'rota_leader_info{role="maintenance"' in cluster_text
    assert 'rota_schedule_lag_seconds{schedule="hourly"}' in cluster_text
    check_metrics(promtool, worker_text)
    check_metrics(promtool, cluster_text)


def test_promtool_catches_a_bad_name(promtool: str) -> None:
    """The check can fail: a counter without _total and a non-base unit are reported."""
    bad = (
        "# HELP rota_jobs_done Done.\n# TYPE rota_jobs_done counter\nrota_jobs_done 1\n"
        "# HELP rota_wait_milliseconds Wait.\n# TYPE rota_wait_milliseconds gauge\n"
        "rota_wait_milliseconds 3\n"
    )
    with pytest.raises(AssertionError, match=r"rota_jobs_done|milliseconds"):
        check_metrics(promtool, bad)


def test_alert_rules_are_valid_and_fire(promtool: str) -> None:
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 10 rules found" in checked.stdout
    tested = subprocess.run(
        [promtool, "test", "rules", RULES_TEST.name],
        check=False,
        cwd=RULES_TEST.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
