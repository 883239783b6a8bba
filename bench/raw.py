"""The raw-SQL baseline: one process, one connection, no framework, draining rota_jobs with
a claim of 100 and a fenced batch complete in a tight loop (see docs/benchmarks.md). The
`rota` variant runs rota's own two statements from the same loop, to separate SQL from Python.
The single-enqueue baseline is here too: one raw insert per commit on one connection. The
same loops run on asyncpg in pgqueuer's virtualenv (`asyncpg_insert`, `asyncpg_drain`), to
show what the driver alone gives."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from typing import Any

from psycopg.rows import dict_row

from bench.db import Database, pg_connect, sqlite_connect
from bench.tasks import QUEUE
from rota.drivers.postgres.lane import positional

BATCH = 100
LEASE_SECONDS = 30.0

PG_CLAIM = """
WITH picked AS (
    SELECT id FROM rota_jobs
    WHERE state = 'available' AND queue = %(queue)s
      AND NOT EXISTS (SELECT 1 FROM rota_queues q WHERE q.name = %(queue)s AND q.paused)
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE rota_jobs AS j
SET state = 'running',
    attempt = j.attempt + 1,
    attempted_at = now(),
    worker = %(worker)s,
    lease_token = gen_random_uuid(),
    lease_expires_at = now() + make_interval(secs => %(lease)s)
FROM picked
WHERE j.id = picked.id
RETURNING j.id, j.task, j.args, j.lease_token
"""

PG_COMPLETE = """
UPDATE rota_jobs AS j
SET state = 'completed', finished_at = now(), lease_token = NULL, lease_expires_at = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS c(id, token)
WHERE j.id = c.id AND j.lease_token = c.token AND j.state = 'running'
"""

SQLITE_NOW = "(julianday('now') - 2440587.5) * 86400.0"

SQLITE_CLAIM = f"""
UPDATE rota_jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = {SQLITE_NOW},
    worker = :worker,
    lease_token = lower(hex(randomblob(16))),
    lease_expires_at = {SQLITE_NOW} + :lease
WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE state = 'available' AND queue = :queue
      AND NOT EXISTS (SELECT 1 FROM rota_queues q WHERE q.name = :queue AND q.paused)
    ORDER BY priority, run_at, id
    LIMIT :limit
)
RETURNING id, task, args, lease_token
"""

# `+state` keeps SQLite from driving the join from the (state, queue) index and re-reading
# json_each for every running row (that plan is 4x slower); it looks up each id instead.
SQLITE_COMPLETE = f"""
UPDATE rota_jobs
SET state = 'completed', finished_at = {SQLITE_NOW}, lease_token = NULL, lease_expires_at = NULL
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token
      FROM json_each(:batch)) AS c
WHERE rota_jobs.id = c.id AND rota_jobs.lease_token = c.token AND +rota_jobs.state = 'running'
"""


def noop(n: int = 0) -> None:
    return None


def statements(dialect: str, variant: str) -> tuple[list[str], str]:
    """(claim statements, complete) SQL for `dialect`: the lean baseline, or rota's own
    plain claim (a script on SQLite), which carries the completions of the last batch."""
    if variant == "lean":
        if dialect == "postgres":
            return [PG_CLAIM], PG_COMPLETE
        return [SQLITE_CLAIM], SQLITE_COMPLETE
    from rota.drivers import queries

    named = queries.load(dialect)
    return queries.statements_of(named["job_claim_plain"]), named["job_complete_many"]


def _pg_complete_params(variant: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    ids = [r["id"] for r in rows]
    tokens = [r["lease_token"] for r in rows]
    if variant == "lean":
        return {"ids": ids, "tokens": tokens}
    n = len(rows)
    return {
        "c_id": ids,
        "c_token": tokens,
        "c_state": ["completed"] * n,
        "c_delay": [None] * n,
        "c_result": [None] * n,
        "c_entry": [None] * n,  # as the driver sends a plain completion: its entry implied
        "c_refund": [False] * n,
    }


def _sqlite_complete_params(variant: str, rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    if variant == "lean":
        return {"batch": json.dumps([[r[0], r[1]] for r in rows])}
    # As the driver sends plain completions (SQLiteCodec.completions): lease tokens by id.
    return {"p": json.dumps({str(job_id): token for job_id, token in rows}), "c": "[]"}


def drain_child(
    dialect: str, url: str, sqlite_path: str, variant: str, jobs: int
) -> dict[str, Any]:
    """Child-process entry: drain the table; return the elapsed seconds and counts."""
    claim_sql, complete_sql = statements(dialect, variant)
    worker = f"raw-{uuid.uuid4().hex[:6]}"
    # caps=None: a worker that advertises no capabilities, as the rota drains run.
    params = {
        "queue": QUEUE,
        "limit": BATCH,
        "worker": worker,
        "lease": LEASE_SECONDS,
        "caps": None,
    }
    run: Callable[[], tuple[int, int]]
    if dialect == "postgres":
        conn = pg_connect(url, row_factory=dict_row)

        def run() -> tuple[int, int]:
            done = batches = 0
            if variant == "lean":
                while True:
                    rows = conn.execute(claim_sql[0], params).fetchall()
                    if not rows:
                        return done, batches
                    for row in rows:
                        noop(**row["args"])
                    conn.execute(complete_sql, _pg_complete_params(variant, rows))
                    done += len(rows)
                    batches += 1
            # rota's plain claim: the last batch's completions ride along with the next claim.
            carried: list[dict[str, Any]] = []
            while True:
                found = conn.execute(
                    claim_sql[0], {**params, **_pg_complete_params(variant, carried)}
                ).fetchall()
                done += len(carried)
                carried = [r for r in found if r["kind"] == "job"]
                if not carried:
                    return done, batches
                for row in carried:
                    noop(**row["args"])
                batches += 1

        close = conn.close
    else:
        db = sqlite_connect(sqlite_path)
        db.row_factory = sqlite3.Row

        def run() -> tuple[int, int]:
            done = batches = 0
            if variant == "lean":
                while True:
                    db.execute("BEGIN IMMEDIATE")
                    claimed = db.execute(claim_sql[0], params).fetchall()
                    db.execute("COMMIT")
                    if not claimed:
                        return done, batches
                    rows = []
                    for row in claimed:
                        noop(**json.loads(row["args"]))
                        rows.append((row["id"], row["lease_token"]))
                    db.execute("BEGIN IMMEDIATE")
                    db.execute(complete_sql, _sqlite_complete_params(variant, rows)).fetchall()
                    db.execute("COMMIT")
                    done += len(rows)
                    batches += 1
            finished: list[tuple[Any, ...]] = []
            while True:
                step = {**params, **_sqlite_complete_params(variant, finished)}
                db.execute("BEGIN IMMEDIATE")
                found = []
                for statement in claim_sql:
                    found.extend(db.execute(statement, step).fetchall())
                db.execute("COMMIT")
                done += len(finished)
                finished = []
                for row in found:
                    if row["kind"] == "job":
                        noop(**json.loads(row["args"]))
                        finished.append((row["id"], row["lease_token"]))
                if not finished:
                    return done, batches
                batches += 1

        close = db.close
    try:
        cpu = time.process_time()
        started = time.perf_counter()
        done, batches = run()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
    finally:
        close()
    return {"elapsed": elapsed, "cpu": cpu, "completed": done, "batches": batches}


# --- enqueue ----------------------------------------------------------------------------

# One job per statement, committed on its own (autocommit): the columns without a default
# and the id back. On PostgreSQL the same statement sends the wake-up, as rota's insert and
# pgqueuer's trigger do.
PG_INSERT = """
WITH ins AS (
    INSERT INTO rota_jobs (task, queue, args, max_attempts)
    VALUES (%(task)s, %(queue)s, %(args)s, 20)
    RETURNING id, queue
)
SELECT id, pg_notify('rota_jobs', queue) FROM ins
"""
SQLITE_INSERT = f"""
INSERT INTO rota_jobs (task, queue, args, max_attempts, run_at, created_at)
VALUES (:task, :queue, :args, 20, {SQLITE_NOW}, {SQLITE_NOW})
RETURNING id
"""


def enqueue_single(db: Database, task: str, jobs: int) -> float:
    """Jobs/s of a raw single-row insert in a loop on one connection: the ceiling of a
    one-job-per-call enqueue through this driver, beside which rota's and the peers' are
    read."""
    conn: Any
    if db.dialect == "postgres":
        conn, sql = pg_connect(db.url), PG_INSERT
    else:
        conn, sql = sqlite_connect(db.sqlite_path), SQLITE_INSERT
    try:
        started = time.perf_counter()
        for i in range(-10, jobs):  # ten warm-up inserts: the statement prepared, caches hot
            if i == 0:
                started = time.perf_counter()
            conn.execute(
                sql, {"task": task, "queue": QUEUE, "args": json.dumps({"n": i})}
            ).fetchone()
        return jobs / (time.perf_counter() - started)
    finally:
        conn.close()


# --- the same loops on asyncpg (run by bench/peers/pgqueuer_peer.py) ----------------------
# Their SQL numbered as asyncpg wants it by `positional`, rota's own (drivers/postgres/lane).


def asyncpg_insert(task: str) -> dict[str, Any]:
    """The spec of the raw single insert on asyncpg: PG_INSERT, numbered."""
    sql, names = positional(PG_INSERT)
    return {"insert": sql, "insert_params": names, "task": task, "queue": QUEUE}


def asyncpg_drain(variant: str) -> dict[str, Any]:
    """The spec of a raw drain on asyncpg, numbered: the lean SQL (PG_CLAIM, then
    PG_COMPLETE), or rota's plain claim carrying the last batch's completions, whose
    parameters besides the ids and tokens are the same for every job (`carried`)."""
    claims, complete = statements("postgres", variant)
    claim, claim_names = positional(claims[0])
    spec: dict[str, Any] = {
        "variant": variant,
        "claim": claim,
        "claim_params": claim_names,
        "queue": QUEUE,
        "batch": BATCH,
        "lease": LEASE_SECONDS,
    }
    if variant == "lean":
        sql, names = positional(complete)
        if names != ["ids", "tokens"]:  # the peer script sends them in this order
            raise ValueError(f"PG_COMPLETE's parameters changed: {names}")
        spec["complete"] = sql
    else:
        one = _pg_complete_params(variant, [{"id": 0, "lease_token": None}])
        spec["carried"] = {k: v[0] for k, v in one.items() if k not in ("c_id", "c_token")}
    return spec
