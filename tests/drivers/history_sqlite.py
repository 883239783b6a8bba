"""A SQLite file beside a large history, for the tests that bound what a statement does
(#23): finished jobs written with SQL, a few hundred live ones, and a way to count the
work SQLite does (virtual-machine steps, from a progress handler)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

STEP = 100  # the progress handler runs every STEP instructions

_FINISHED = """
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < :n)
INSERT INTO rota_jobs (task, queue, args, state, max_attempts, run_at, created_at,
                       attempted_at, finished_at, worker, key, history)
SELECT 'shop.task_' || (i % 7), 'history-' || (i % 4),
       json_object('order', i, 'note', 'order number ' || i),
       CASE WHEN i % 100 = 0 THEN 'cancelled' WHEN i % 11 = 0 THEN 'discarded'
            ELSE 'completed' END, 3, t, t, t, t, 'old-worker-' || (i % 3),
       CASE WHEN i % 50 = 0 THEN 'key-' || i END, '[{"outcome": "completed"}]'
FROM (SELECT i, (julianday('now') - 2440587.5) * 86400.0 - 43200.0 * (:n - i) / :n AS t
      FROM g)
"""

_LIVE = """
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 400)
INSERT INTO rota_jobs (task, queue, state, attempt, max_attempts, run_at,
                       created_at, worker, attempted_at, lease_token,
                       lease_expires_at)
SELECT 'shop.live', 'live', s, 1, 3, now + 3600, now,
       CASE WHEN s = 'running' THEN 'w-' || (i % 4) END,
       CASE WHEN s = 'running' THEN now END,
       CASE WHEN s = 'running' THEN 'token-' || i END,
       CASE WHEN s = 'running' THEN now + 60 END
FROM (SELECT i, (julianday('now') - 2440587.5) * 86400.0 AS now,
             CASE i % 4 WHEN 0 THEN 'available' WHEN 1 THEN 'retryable'
                        WHEN 2 THEN 'scheduled' ELSE 'running' END AS s
      FROM g)
"""


def fill_history(path: Path, finished: int) -> None:
    """Write `finished` finished jobs (completed, 9% discarded, 1% cancelled, over the last
    12 hours; every 50th with a key) and 400 live ones (available, retryable, scheduled
    and running, a quarter each) into the migrated file at `path`. No statistics: rota
    never runs ANALYZE, so a user's file has none."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute(_FINISHED, {"n": finished})
        conn.execute(_LIVE)
        conn.execute("COMMIT")
    finally:
        conn.close()


def step_counter(conn: sqlite3.Connection, count: Callable[[int], None]) -> None:
    """Report every STEP virtual-machine instructions `conn` runs to `count`."""

    def progress() -> int:
        count(STEP)
        return 0  # go on

    conn.set_progress_handler(progress, STEP)


def steps_of(
    path: Path, statements: Sequence[str], params: Mapping[str, object] | Sequence[object] = ()
) -> int:
    """The virtual-machine steps (to STEP) that running `statements` on `path` takes."""
    steps = 0

    def count(n: int) -> None:
        nonlocal steps
        steps += n

    conn = sqlite3.connect(path)
    step_counter(conn, count)
    try:
        for statement in statements:
            conn.execute(statement, params).fetchall()
    finally:
        conn.close()
    return steps
