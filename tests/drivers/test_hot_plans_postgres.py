"""The hot statements keep one fast plan at any size (#23): beside 200k finished jobs and
hundreds of running ones, each claim, completion, renewal, rescue, staging, expiry and
prune reads a bounded number of rota_jobs rows, never scans the table, and never loops
over the running jobs once per row it writes. Checked on the plan PostgreSQL really runs
after the sixth execution of the prepared statement (psycopg prepares after five), and
on the generic plan forced outright. Plans come from auto_explain (EXPLAIN ANALYZE of
every statement the session runs)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import psycopg
import pytest

import rota
from rota.drivers.base import Claim, Completion
from rota.ops.store import OpsStore
from rota.routing.store import RoutingStore
from rota.web.records import JobSearch
from rota.web.store import WebStore
from tests.drivers.plans import (
    Table,
    assert_bounded,
    cached_plans,
    finish_after_statistics,
    freeze_statistics,
    watched,
)

FINISHED = 200_000
RUNNING = 2_500
# Plenty waiting in the plain queue: a generic plan guesses a LIMIT takes a tenth of what
# the index holds, and with enough of it a hash join over the whole table looks cheaper.
AVAILABLE = {"q": 30_000, "g": 3_000, "l": 3_000, "f": 3_000}
BATCH = 100
# Rows of rota_jobs one statement may read: a claim of 100 carrying 100 completions reads
# about 300 (the completions' and the claimed rows by primary key, the picked ones from
# the claim index). A plan that scans the finished rows, or loops over the running jobs
# for each completion, reads tens of thousands.
MAX_ROWS_READ = 2_000
# A limited or fair claim also counts the running jobs its limits apply to (per queue, per
# tenant), from their partial indexes: its cost grows with the jobs running, never with
# the finished ones.
COUNTING_CLAIMS = {"job_claim_limited", "job_claim_fair"}
MAX_ROWS_READ_COUNTING = 10_000


@pytest.fixture(params=["analyzed", "stale", "never"])
def table(pg_url: str, request: pytest.FixtureRequest) -> Iterator[Table]:
    """ "analyzed": the statistics know the 200k jobs are finished. "stale": they were taken
    while those jobs still waited, as right after a drain before autovacuum has caught up.
    "never": none were taken, as on a new installation's first burst."""
    stale, never = request.param == "stale", request.param == "never"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rota.App(pg_url).migrate()
        if never:
            freeze_statistics(conn)
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, state, max_attempts, run_at, finished_at,
                                   attempted_at, history)
            SELECT 't', CASE WHEN i %% 3 = 0 THEN 'other' ELSE 'q' END,
                   CASE WHEN %s THEN 'available'
                        WHEN i %% 10 = 0 THEN 'discarded' ELSE 'completed' END, 3,
                   now() - interval '1 hour', now() - interval '1 minute',
                   now() - interval '2 minutes', '[{"outcome": "completed"}]'
            FROM generate_series(1, %s) AS i
            """,
            (stale, FINISHED),
        )
        if stale:
            finish_after_statistics(conn)
        for queue, waiting in AVAILABLE.items():
            conn.execute(
                """
                INSERT INTO rota_jobs (task, queue, state, max_attempts, run_at, tenant)
                SELECT 't', %s, 'available', 3, now() - interval '1 second', 'tenant-' || i %% 7
                FROM generate_series(1, %s) AS i
                """,
                (queue, waiting),
            )
        conn.execute(
            """
            INSERT INTO rota_queues (name, paused, gated, fair, global_limit, updated_at)
            VALUES ('g', false, true, false, NULL, now()), ('l', false, false, false, 10000, now()),
                   ('f', false, false, true, NULL, now())
            """
        )
        if not stale and not never:
            conn.execute("VACUUM (ANALYZE) rota_jobs")
        # The jobs running now came after the statistics were taken, as they do in a real
        # deployment (a batch is enqueued, analysed, then claimed): the planner believes
        # almost nothing runs, which is when a plan driven from the running jobs looks cheap.
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, state, attempt, max_attempts, run_at, worker,
                                   attempted_at, lease_token, lease_expires_at)
            SELECT 't', 'q', 'running', 1, 3, now(), 'w0', now(), gen_random_uuid(),
                   now() + interval '1 hour'
            FROM generate_series(1, %s)
            """,
            (RUNNING,),
        )
        running = [
            (int(i), str(token))
            for i, token in conn.execute(
                "SELECT id, lease_token FROM rota_jobs WHERE state = 'running' ORDER BY id"
            )
        ]
    with watched(pg_url, running) as table:
        yield table


def _calls(table: Table) -> dict[str, Callable[[int], object]]:
    """Each hot statement, as the engine calls it; round `n` uses its own running jobs."""
    driver = table.app.driver
    claims = table.app.claim_queries()
    done = '{"outcome":"completed"}'

    def completions(n: int, offset: int) -> list[Completion]:
        start = (n * 3 + offset) * BATCH
        return [
            Completion(job_id, token, rota.JobState.COMPLETED, done)
            for job_id, token in table.running[start : start + BATCH]
        ]

    def claim(queue: str, mode: str) -> Callable[[int], object]:
        def run(n: int) -> object:
            carried = completions(n, 0) if mode in ("plain", "gated") else []
            return driver.job_fetch(Claim(queue, BATCH, "w1", 30.0, claims[mode], None, carried))

        return run

    return {
        "job_claim_plain": claim("q", "plain"),
        "job_claim_gated": claim("g", "gated"),
        "job_claim_limited": claim("l", "limited"),
        "job_claim_fair": claim("f", "fair"),
        "job_complete_many": lambda n: driver.job_complete_many(completions(n, 1)),
        "job_lease_renew": lambda n: driver.job_lease_renew(
            [(c.job_id, c.lease_token) for c in completions(n, 2)], 30.0
        ),
        "job_rescue_expired": lambda n: driver.job_rescue_expired(1000),
        "job_stage_due": lambda n: driver.job_stage_due(1000),
        "job_prune_finished": lambda n: driver.job_prune("completed", 3600.0, 1000),
        "job_expire_due": lambda n: OpsStore(driver).job_expire_due(1000),
    }


@pytest.mark.parametrize("plan_cache_mode", ["auto", "force_generic_plan"])
def test_hot_statements_read_a_bounded_number_of_rows_beside_200k_finished_jobs(
    table: Table, plan_cache_mode: str
) -> None:
    with table.app.driver.database.connection() as conn:
        conn.execute(f"SET plan_cache_mode = {plan_cache_mode}".encode())
    for name, call in _calls(table).items():
        plans = cached_plans(table, call)
        assert plans, f"{name}: no plan was logged"
        bound = MAX_ROWS_READ_COUNTING if name in COUNTING_CLAIMS else MAX_ROWS_READ
        assert_bounded(name, plans, bound)


_INDEX_USE = re.compile(
    r"(?:Index (?:Only )?Scan(?: Backward)? using|Bitmap Index Scan on|Conflict Arbiter Indexes:)"
    r" (\w+)"
)


def test_every_index_on_rota_jobs_serves_a_named_statement(table: Table, pg_url: str) -> None:
    """Each index costs every insert and state change, so each must earn it (#16): the
    plans of the engine's named statements, run beside 200k finished jobs, use every index
    on rota_jobs. A new index without a statement that uses it fails here."""
    app = table.app
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # Per-job gates and scheduled work, so the statements that serve them have rows.
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, state, max_attempts, run_at, partition_key,
                                   requires, expires_at)
            SELECT 't', 'g', CASE WHEN i % 2 = 0 THEN 'available' ELSE 'scheduled' END, 3,
                   now() + CASE WHEN i % 2 = 0 THEN interval '0' ELSE interval '1 hour' END,
                   CASE WHEN i % 3 = 0 THEN 'key-' || i % 11 END,
                   CASE WHEN i % 3 = 1 THEN ARRAY['gpu'] END,
                   CASE WHEN i % 3 = 2 THEN now() + interval '1 day' END
            FROM generate_series(1, 600) AS i
            """
        )
        # A due backlog on another queue: what KEDA asks of one queue must not read it.
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, state, max_attempts, run_at)
            SELECT 't', 'backlog', 'scheduled', 3, now() - interval '1 minute'
            FROM generate_series(1, 20000)
            """
        )
        conn.execute("ANALYZE rota_jobs")
        indexes = {
            str(name)
            for (name,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'rota_jobs'"
                " AND schemaname = current_schema()"
            )
        }
    calls = _calls(table)
    del table.plans[:]
    for call in calls.values():
        call(0)
    task = app.task(name="t.keyed", queue="q")(lambda: None)
    task.enqueue(key="once")  # the idempotency key's arbiter
    RoutingStore(app.driver).job_unroutable(None, 100)  # `rota queues unroutable`
    search = WebStore(app.driver)  # the dashboard: search by key, a state newest first
    search.job_search(JobSearch(q="once"))
    search.job_search(JobSearch(states=("cancelled",)))  # a rare state
    with app.driver.database.connection() as conn:
        for queue in ("g", "q"):  # what KEDA polls (queue_keda_demand)
            conn.execute(
                f"SELECT rota_keda_backlog('{queue}') + rota_keda_running('{queue}')".encode()
            )
    used = {m for plan in table.plans for m in _INDEX_USE.findall(plan)}
    idle = sorted(indexes - used)
    assert not idle, f"indexes no named statement uses: {idle}"
