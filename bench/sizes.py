"""Finished history for the size scenarios (issue 23): N finished jobs written with plain
SQL on other queues, shaped like real ones, then fresh statistics, as autovacuum would
leave them. `finished`: 90% completed (one history entry, a small result) and 10%
discarded (three failed attempts with tracebacks), finished over the last 12 hours;
`dead`: N dead letters, discarded over the last 7 days. Both stay inside the default
retention (24 hours completed, 14 days discarded), so the pruner leaves them alone.
`lived`: N no-op jobs run through a `rota worker` on the `history` queue, fed steadily,
as a deployment makes its history (slower: about 3 minutes per million on this machine);
`lived_dead`: the same with a task that fails at once, for good: N dead letters, each with
its attempt and traceback, written the way a worker writes them.
Rows written finished fill every page to its end and leave a small gap on each, which a
burst of new jobs then takes one job per page; a lived history leaves the space of each
job's earlier row versions, where new jobs land densely (docs/benchmarks.md)."""

from __future__ import annotations

import datetime
import json
import sqlite3
import time

import psycopg

from bench import cli, tasks
from bench.db import BenchError, Database, pg_connect, settle, sqlite_connect
from rota.drivers import queries

VARIANTS = ("finished", "dead", "lived", "lived_dead")
LIVED_QUEUE = "history"
CHUNK = 200_000  # rows per INSERT statement (one transaction each)
WORKER = "worker-7.shop.internal:4242:a1b2c3"
TRACEBACK_LINE = (
    '  File "/srv/shop/tasks.py", line 42, in send_receipt\n    resp.raise_for_status()\n'
)

# One statement per dialect (JSON building is spelled differently); `%%` is psycopg's `%`.
_PG = """
INSERT INTO rota_jobs (task, queue, args, state, priority, attempt, max_attempts, run_at,
                       created_at, attempted_at, finished_at, worker, result, history)
SELECT 'shop.' || (ARRAY['send_receipt', 'sync_stock', 'render_invoice', 'notify'])[1 + g %% 4],
       'history-' || (g %% 4),
       jsonb_build_object('order_id', g, 'customer', 'customer-' || (g %% 5000),
                          'items', jsonb_build_array(g %% 97, g %% 89, g %% 83),
                          'note', repeat('n', 80)),
       s.state, 0, s.attempts, 3, s.at - interval '2 s', s.at - interval '2 s',
       s.at - interval '50 ms', s.at, %(worker)s::text,
       CASE WHEN s.state = 'completed' THEN jsonb_build_object('ok', true, 'ms', g %% 50) END,
       CASE WHEN s.state = 'completed' THEN jsonb_build_array(jsonb_build_object(
                'attempt', 1, 'worker', %(worker)s::text, 'outcome', 'completed',
                'started_at', s.at - interval '50 ms', 'finished_at', s.at))
            ELSE %(dead_history)s::jsonb
       END
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g,
LATERAL (SELECT CASE WHEN %(dead)s::bool OR g %% 10 = 0 THEN 'discarded'
                     ELSE 'completed' END AS state,
                CASE WHEN %(dead)s::bool OR g %% 10 = 0 THEN 3 ELSE 1 END AS attempts,
                now() - make_interval(secs => %(span)s::float8 * g / %(n)s::float8) AS at) AS s
"""

_SQLITE = """
WITH RECURSIVE seq(g) AS (SELECT :first UNION ALL SELECT g + 1 FROM seq WHERE g < :last),
s AS (
    SELECT g,
           CASE WHEN :dead OR g % 10 = 0 THEN 'discarded' ELSE 'completed' END AS state,
           CASE WHEN :dead OR g % 10 = 0 THEN 3 ELSE 1 END AS attempts,
           :now - :span * g / :n AS at
    FROM seq
)
INSERT INTO rota_jobs (task, queue, args, state, priority, attempt, max_attempts, run_at,
                       created_at, attempted_at, finished_at, worker, result, history)
SELECT 'shop.' || CASE g % 4 WHEN 0 THEN 'send_receipt' WHEN 1 THEN 'sync_stock'
                             WHEN 2 THEN 'render_invoice' ELSE 'notify' END,
       'history-' || (g % 4),
       json_object('order_id', g, 'customer', 'customer-' || (g % 5000),
                   'items', json_array(g % 97, g % 89, g % 83), 'note', printf('%.80c', 'n')),
       state, 0, attempts, 3, at - 2, at - 2, at - 0.05, at, :worker,
       CASE WHEN state = 'completed' THEN json_object('ok', json('true'), 'ms', g % 50) END,
       CASE WHEN state = 'completed' THEN json_array(json_object(
                'attempt', 1, 'worker', :worker, 'outcome', 'completed',
                'started_at', at - 0.05, 'finished_at', at))
            ELSE :dead_history
       END
FROM s
"""


def _dead_history(dialect: str, span: float) -> str:
    """Three failed attempts with tracebacks: the same text for every dead letter (its size
    is what matters here; per-row JSON building made the fill itself slow). Times as each
    dialect stores them: ISO text on PostgreSQL, Unix seconds on SQLite."""
    at = time.time() - span / 2

    def stamp(t: float) -> float | str:
        if dialect == "postgres":
            return datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat()
        return t

    entries = [
        {
            "attempt": attempt,
            "worker": WORKER,
            "outcome": "failed" if attempt < 3 else "discarded",
            "started_at": stamp(at + attempt * 60 - 0.05),
            "finished_at": stamp(at + attempt * 60),
            "error_type": "shop.errors.UpstreamTimeout",
            "message": "upstream timed out after 30s",
            "traceback": "Traceback (most recent call last):\n" + TRACEBACK_LINE * 6,
        }
        for attempt in (1, 2, 3)
    ]
    return json.dumps(entries)


def fill(db: Database, n: int, variant: str, processes: int = 1) -> float:
    """Write `n` finished jobs of `variant` into `db`, then refresh the statistics
    (VACUUM ANALYZE / ANALYZE); returns the seconds it took. A lived history is made by a
    worker of `processes` processes. The SQL names rota's columns:
    a schema change there is reported as a BenchError, not a crash."""
    try:
        return _fill(db, n, variant, processes)
    except (psycopg.Error, sqlite3.Error) as exc:
        raise BenchError(
            f"filling {n:,} {variant} jobs failed (rota's schema changed?): {exc}"
        ) from exc


def _fill(db: Database, n: int, variant: str, processes: int) -> float:
    if variant not in VARIANTS:
        raise ValueError(f"unknown size variant {variant!r}")
    started = time.perf_counter()
    if n <= 0:
        return 0.0
    if variant in ("lived", "lived_dead"):
        task = tasks.NOOP_ASYNC if variant == "lived" else tasks.FAIL_ONCE
        cli.live(db, n, LIVED_QUEUE, task_name=task, processes=processes)
        settle(db)
        return time.perf_counter() - started
    dead = variant == "dead"
    span = (7 * 86400.0) if dead else (12 * 3600.0)
    dead_history = _dead_history(db.dialect, span)
    chunks = [(first, min(first + CHUNK - 1, n)) for first in range(1, n + 1, CHUNK)]
    if db.dialect == "postgres":
        with pg_connect(db.url) as conn:
            for first, last in chunks:
                params = {"first": first, "last": last, "n": n, "dead": dead, "span": span}
                conn.execute(_PG, {**params, "worker": WORKER, "dead_history": dead_history})
            conn.execute("VACUUM ANALYZE rota_jobs")
    else:
        lite = sqlite_connect(db.sqlite_path)
        try:
            for first, last in chunks:
                lite.execute("BEGIN IMMEDIATE")
                lite.execute(
                    _SQLITE,
                    {
                        "first": first,
                        "last": last,
                        "n": n,
                        "dead": int(dead),
                        "span": span,
                        "now": time.time(),
                        "worker": WORKER,
                        "dead_history": dead_history,
                    },
                )
                lite.execute("COMMIT")
            # Rows written with SQL were never counted by the leader's pass, which on SQLite
            # counts the jobs enqueued since its last pass by id: its first pass would count
            # the whole history as enqueued this minute, reading all of it inside the write
            # lock (97 ms at 200,000 rows). A deployment's history was counted as it came,
            # and `rota db copy` recounts what it wrote: the same recount here, with rota's
            # own statements.
            lite.execute("BEGIN IMMEDIATE")
            for statement in queries.statements_of(queries.load("sqlite")["copy_recount"]):
                lite.execute(statement)
            lite.execute("COMMIT")
            lite.execute("ANALYZE")
            lite.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            lite.close()
    return time.perf_counter() - started
