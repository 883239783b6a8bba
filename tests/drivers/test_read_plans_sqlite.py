"""SQLite's side of #23: every query behind the dashboard's pages and polls and a /metrics
scrape does a bounded amount of work beside 100k finished jobs (made with SQL). The work
is counted in SQLite virtual-machine steps (a progress handler), which a scan of the
finished jobs multiplies by a hundred; a plan that reads through an index, or walks the
primary key down for one page, stays far below the bound."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

import rota
from bench.cli import PENDING
from rota.drivers.sqlite.database import SCRIPTS
from rota.maintenance.counts import CountFolder
from rota.web.records import SEARCH_SCAN
from tests.drivers.history_sqlite import fill_history, steps_of

FINISHED = 100_000
# A full scan of 100k rows takes millions of steps; a page or a backlog, thousands.
MAX_STEPS = 200_000
# The bounded text search reads the newest SEARCH_SCAN jobs: allowed as many steps per row
# as a scan takes, on that many rows only.
BOUNDED = {"search text", "search task", "text filter"}
MAX_STEPS_BOUNDED = 60 * SEARCH_SCAN

NO_FILTER = {
    "q": None,
    "q_id": None,
    "id": None,
    "key": None,
    "task": None,
    "queue": None,
    "tenant": None,
    "states": "[]",
    "text": None,
    "before_id": None,
    "limit": 50,
    "args": 1,
    "scan": SEARCH_SCAN,
}
DEAD = {
    "ids": None,
    "task": None,
    "queue": None,
    "tenant": None,
    "partition_key": None,
    "error_type": None,
    "text": None,
    "since": None,
    "until": None,
    "before_id": None,
    "limit": 50,
}
READS: dict[str, tuple[str, dict[str, object]]] = {
    "queue counts": ("queue_counts", {}),
    "queue oldest": ("queue_oldest", {}),
    "series": ("web_queue_series", {"window": 3600, "bucket": 60}),
    "series a week": ("web_queue_series", {"window": 7 * 86400, "bucket": 3600}),
    "workers": ("web_worker_list", {"window": 600}),
    "metrics workers": ("metrics_workers", {}),
    "tenants": ("tenant_list", {"name": None}),
    "failures": (
        "web_job_list",
        {**NO_FILTER, "states": json.dumps(["retryable", "discarded"]), "limit": 6},
    ),
    "jobs page": ("web_job_list", NO_FILTER),
    "jobs page 2": ("web_job_list", {**NO_FILTER, "before_id": FINISHED // 2}),
    "by key filter": ("web_job_list", {**NO_FILTER, "key": f"key-{FINISHED // 2}"}),
    "by id filter": ("web_job_list", {**NO_FILTER, "id": FINISHED // 3}),
    "text filter": ("web_job_list", {**NO_FILTER, "text": "order number 99999"}),
    "search id": ("web_job_search", {**NO_FILTER, "q": "33333", "q_id": 33333}),
    "search key": ("web_job_search", {**NO_FILTER, "q": f"key-{FINISHED // 2}"}),
    "search task": ("web_job_search", {**NO_FILTER, "q": "shop.task_3"}),
    "search text": ("web_job_search", {**NO_FILTER, "q": "order number 12345"}),
    "dead letters": ("dead_letter_list", DEAD),
    "dead letters 500": ("dead_letter_list", {**DEAD, "limit": 500}),
}


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reads") / "rota.db"
    app = rota.App(f"sqlite:///{path}")
    app.migrate()
    fill_history(path, FINISHED)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("ANALYZE")  # the plans with statistics (the service test has none)
    CountFolder(app.driver).run_once()  # the leader's first pass
    app.close()
    return path


@pytest.mark.parametrize("read", sorted(READS))
def test_every_dashboard_and_metrics_read_is_bounded_beside_100k_finished_jobs(
    filled: Path, read: str
) -> None:
    name, params = READS[read]
    steps = steps_of(filled, SCRIPTS[name], params)
    bound = MAX_STEPS_BOUNDED if read in BOUNDED else MAX_STEPS
    assert steps <= bound, f"{read} ({name}) took {steps:,} steps beside {FINISHED:,} jobs"


def test_the_benchmarks_look_at_a_drain_is_bounded_beside_100k_finished_jobs(
    filled: Path,
) -> None:
    """bench/cli.py looks every 25 ms whether the drain it times is done: a scan there
    slows the drain it measures, beside a history only."""
    steps = steps_of(filled, [PENDING], ("bench", "bench", "bench"))
    assert steps <= MAX_STEPS // 10, f"the bench's look took {steps:,} steps"


def test_the_bound_catches_a_scan(filled: Path) -> None:
    """The same measure over a count of every row is far above the bound."""
    steps = steps_of(filled, ["SELECT queue, state, count(*) FROM rota_jobs GROUP BY 1, 2"])
    assert steps > 5 * MAX_STEPS
