"""What the dashboard, the HTTP API and a /metrics scrape read costs what it shows, not
what the table holds (#23): beside 100k finished jobs (made with SQL), every query behind
the overview, its polls, the jobs and dead-letter pages, job search and the cluster
metrics reads a bounded number of rota_jobs rows and never scans the table. Checked on the
plan PostgreSQL caches after the sixth run and on the generic plan forced outright, with
the plans auto_explain logs (tests/drivers/test_hot_plans_postgres.py does the same for
the claim and the completion)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest

import rota
from rota.observe.cluster import ClusterCollector
from rota.observe.store import MetricsStore
from rota.web.records import SEARCH_SCAN, JobSearch
from rota.web.store import WebStore
from tests.drivers.plans import (
    Table,
    assert_bounded,
    cached_plans,
    finish_after_statistics,
    watched,
)

FINISHED = 100_000
# Rows of rota_jobs one read may touch (a tenth of the table): a page from an index, the
# waiting and running jobs (a few hundred here), a page of 500 dead letters found walking
# the primary key down when one job in eleven is one (the planner's choice: ~6,000 rows),
# or the newest SEARCH_SCAN jobs for a text search. A read that grows with the finished
# history reads them all.
MAX_ROWS_READ = 10_000
BOUNDED_SCANS = {"search text", "search task", "text filter"}


@pytest.fixture
def table(pg_url: str) -> Iterator[Table]:
    _fill(pg_url, stale=False)
    with watched(pg_url) as table:
        yield table


@pytest.fixture
def stale_table(pg_url: str) -> Iterator[Table]:
    """The same history, with statistics taken while it still waited: as right after a
    drain, before autovacuum has caught up (the planner believes every job waits)."""
    _fill(pg_url, stale=True)
    with watched(pg_url) as table:
        yield table


def _fill(pg_url: str, *, stale: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rota.App(pg_url).migrate()
        # Finished history: 90% completed, 9% discarded, 1% cancelled, one in fifty with
        # an idempotency key, over four queues, finished over the last twelve hours.
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, args, state, max_attempts, run_at, created_at,
                                   attempted_at, finished_at, worker, key, key_active, history)
            SELECT 'shop.task_' || (i %% 7), 'history-' || (i %% 4),
                   jsonb_build_object('order', i, 'note', 'order number ' || i),
                   CASE WHEN %s THEN 'available'
                        WHEN i %% 100 = 0 THEN 'cancelled' WHEN i %% 11 = 0 THEN 'discarded'
                        ELSE 'completed' END, 3, at, at, at, at, 'old-worker-' || (i %% 3),
                   CASE WHEN i %% 50 = 0 THEN 'key-' || i END, false, '[{"outcome": "completed"}]'
            FROM generate_series(1, %s) AS i,
                 LATERAL (SELECT now() - make_interval(secs => 43200.0 * (%s - i) / %s)) AS t(at)
            """,
            (stale, FINISHED, FINISHED, FINISHED),
        )
        if stale:
            finish_after_statistics(
                conn,
                """
                UPDATE rota_jobs SET state = CASE WHEN id % 100 = 0 THEN 'cancelled'
                                                  WHEN id % 11 = 0 THEN 'discarded'
                                                  ELSE 'completed' END
                """,
            )
        # What is going on now: a backlog, retries, scheduled jobs and running ones.
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, state, attempt, max_attempts, run_at, worker,
                                   attempted_at, lease_token, lease_expires_at)
            SELECT 'shop.live', 'live', s.state, 1, 3, now() + interval '1 hour',
                   CASE WHEN s.state = 'running' THEN 'w-' || (i %% 4) END,
                   CASE WHEN s.state = 'running' THEN now() END,
                   CASE WHEN s.state = 'running' THEN gen_random_uuid() END,
                   CASE WHEN s.state = 'running' THEN now() + interval '1 minute' END
            FROM generate_series(1, 400) AS i,
                 LATERAL (SELECT (ARRAY['available', 'retryable', 'scheduled', 'running'])
                                 [1 + i %% 4] AS state) AS s
            """,
            (),
        )
        if not stale:
            conn.execute("VACUUM (ANALYZE) rota_jobs")


def _reads(table: Table) -> dict[str, Callable[[], object]]:
    """Each read as the dashboard, the API and the scrape make it."""
    app = table.app
    driver = app.driver
    web = WebStore(driver)

    def search(**where: object) -> Callable[[], object]:
        return lambda: web.job_search(JobSearch(**where))  # type: ignore[arg-type]

    return {
        # The overview's polls (every 3 s while a tab is open).
        "queues": driver.queue_list,
        "series": lambda: web.queue_series(3600.0, 60.0),
        "series a week": lambda: web.queue_series(7 * 86400.0, 3600.0),
        "failures": search(states=("retryable", "discarded"), limit=6),
        "workers": lambda: web.worker_list(600.0),
        "leaders": web.leader_list,
        # A /metrics scrape: every query of the cluster collector.
        "scrape": lambda: ClusterCollector(driver, cache_seconds=0)._read(),
        "metrics workers": MetricsStore(driver).workers,
        # The jobs page and its filters.
        "jobs page": search(limit=50),
        "jobs page 2": search(limit=50, before_id=FINISHED // 2),
        "by state completed": search(states=("completed",), limit=50),
        "by state cancelled": search(states=("cancelled",), limit=50),
        "by state running": search(states=("running",), limit=50),
        "by queue": search(queue="history-1", limit=50),
        "by key filter": search(key=f"key-{FINISHED // 2}", limit=50),
        "by id filter": search(id=FINISHED // 3, limit=50),
        "text filter": search(text="order number 99999", limit=50),
        # Search: an id and a key at any age through their index; task and text bounded.
        "search id": search(q=str(FINISHED // 3), limit=50),
        "search key": search(q=f"key-{FINISHED // 2}", limit=50),
        "search task": search(q="shop.task_3", limit=50),
        "search text": search(q="order number 12345", limit=50),
        # The dead-letter page.
        "dead letters": lambda: app.dlq.list(limit=50),
        "dead letters 500": lambda: app.dlq.list(limit=500),
    }


@pytest.mark.parametrize("plan_cache_mode", ["auto", "force_generic_plan"])
def test_every_dashboard_and_metrics_read_uses_an_index_beside_100k_finished_jobs(
    table: Table, plan_cache_mode: str
) -> None:
    with table.app.driver.database.connection() as conn:
        conn.execute(f"SET plan_cache_mode = {plan_cache_mode}".encode())
    for name, call in _reads(table).items():
        plans = cached_plans(table, lambda _, call=call: call())
        bound = SEARCH_SCAN + MAX_ROWS_READ if name in BOUNDED_SCANS else MAX_ROWS_READ
        assert_bounded(name, plans, bound)


# The reads nobody asks for: the overview's polls and a /metrics scrape, every few seconds.
UNATTENDED = (
    "queues",
    "series",
    "series a week",
    "failures",
    "workers",
    "leaders",
    "scrape",
    "metrics workers",
)


@pytest.mark.parametrize("plan_cache_mode", ["auto", "force_generic_plan"])
def test_the_polls_and_the_scrape_stay_bounded_with_statistics_from_before_a_drain(
    stale_table: Table, plan_cache_mode: str
) -> None:
    """With the planner believing all 100k jobs wait, the oldest job's age per queue once
    scanned the whole table on every scrape and overview poll. (A jobs page filtered by a
    finished state still reads that state's rows in this window: it runs when asked.)"""
    with stale_table.app.driver.database.connection() as conn:
        conn.execute(f"SET plan_cache_mode = {plan_cache_mode}".encode())
    reads = _reads(stale_table)
    for name in UNATTENDED:
        assert_bounded(name, cached_plans(stale_table, lambda _, c=reads[name]: c()), MAX_ROWS_READ)


def test_the_counts_follow_every_change_and_survive_the_fold(pg_url: str) -> None:
    """The counts kept by the triggers match a count over rota_jobs after enqueues, claims,
    completions, a retry, a prune and a truncate, folded or not."""
    app = rota.App(pg_url)
    app.migrate()
    try:
        driver = app.driver

        def kept() -> dict[tuple[str, str], int]:
            return {(q.name, s): n for q in driver.queue_list() for s, n in q.counts.items() if n}

        def truth() -> dict[tuple[str, str], int]:
            with psycopg.connect(pg_url) as conn:
                rows = conn.execute(
                    "SELECT queue, state, count(*) FROM rota_jobs GROUP BY 1, 2"
                ).fetchall()
            return {(q, s): int(n) for q, s, n in rows}

        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO rota_jobs (task, queue, state, max_attempts) "
                "SELECT 't', 'q' || (i % 3), 'available', 3 FROM generate_series(1, 300) AS i"
            )
            assert kept() == truth()
            conn.execute(
                "UPDATE rota_jobs SET state = 'running', worker = 'w1', attempted_at = now(), "
                "lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 min' "
                "WHERE id % 2 = 0"
            )
            # A renewal changes no count and appends nothing.
            before = conn.execute("SELECT count(*) FROM rota_job_deltas").fetchone()
            conn.execute(
                "UPDATE rota_jobs SET lease_expires_at = now() + interval '2 min' "
                "WHERE state = 'running'"
            )
            assert conn.execute("SELECT count(*) FROM rota_job_deltas").fetchone() == before
            conn.execute(
                "UPDATE rota_jobs SET state = 'completed', finished_at = now(), "
                "lease_token = NULL, lease_expires_at = NULL WHERE id % 4 = 0"
            )
            assert kept() == truth()
            from rota.maintenance.counts import CountFolder

            assert CountFolder(driver).run_once().folded > 0
            assert conn.execute("SELECT count(*) FROM rota_job_deltas").fetchone() == (0,)
            assert kept() == truth()
            conn.execute("DELETE FROM rota_jobs WHERE state = 'completed' AND id % 8 = 0")
            conn.execute("UPDATE rota_jobs SET state = 'available' WHERE state = 'completed'")
            assert kept() == truth()
            series = WebStore(driver).queue_series(3600.0, 60.0)
            assert sum(p.count for p in series if p.kind == "completed") == 75
            assert sum(p.count for p in series if p.kind == "enqueued") == 300
            assert [w.worker for w in WebStore(driver).worker_list(600.0)] == ["w1"]
            conn.execute("TRUNCATE rota_jobs CASCADE")
            assert kept() == truth() == {}
    finally:
        app.close()
