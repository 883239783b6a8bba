"""The plans PostgreSQL runs, for the tests that bound what a statement reads (#23): an App
on one connection whose every statement auto_explain logs (EXPLAIN ANALYZE, nested ones
too), and the rows of rota_jobs a logged plan read."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

import rota

_SCAN = re.compile(r"on rota_jobs\b.*\(actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)\)")
_REMOVED = re.compile(r"Rows Removed by (?:Filter|Index Recheck): (\d+)")


@dataclass
class Table:
    app: rota.App
    plans: list[str]
    running: list[tuple[int, str]] = field(default_factory=list)


def log_plans(conn: psycopg.Connection[Any], plans: list[str]) -> None:
    """Append the plan of every statement `conn` runs from now on to `plans`."""
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    for setting in (
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_nested_statements = on",
        "auto_explain.log_analyze = on",
        "auto_explain.log_level = notice",
        "client_min_messages = notice",
    ):
        conn.execute(f"SET {setting}".encode())


# Finishes every job in the table, one in ten discarded, the rest completed (the shape of
# the finished history the hot and service plan tests insert).
FINISH_ALL = (
    "UPDATE rota_jobs SET state = CASE WHEN id % 10 = 0 THEN 'discarded' ELSE 'completed' END"
)


def freeze_statistics(conn: psycopg.Connection[Any]) -> None:
    """Keep autovacuum from analysing rota_jobs: its statistics stay what they are now."""
    conn.execute("ALTER TABLE rota_jobs SET (autovacuum_enabled = off)")


def finish_after_statistics(conn: psycopg.Connection[Any], finish: str = FINISH_ALL) -> None:
    """Take rota_jobs' statistics while the jobs in it wait, then run `finish` (an UPDATE
    that finishes them): the planner goes on believing they wait, as it does right after a
    drain until autovacuum analyses the table again (switched off here for that)."""
    freeze_statistics(conn)
    conn.execute("VACUUM (ANALYZE) rota_jobs")
    conn.execute(finish.encode())


@contextmanager
def watched(
    pg_url: str,
    running: list[tuple[int, str]] | None = None,
    app: rota.App | None = None,
) -> Iterator[Table]:
    """An App on the (migrated, filled) database whose one connection logs its plans
    (`app`, made with pool_size=1, if given: one connection, the one auto_explain watches)."""
    app = app or rota.App(pg_url, pool_size=1)
    plans: list[str] = []
    with app.driver.database.connection() as conn:
        log_plans(conn, plans)
    try:
        yield Table(app, plans, running or [])
    finally:
        app.close()


def rows_read(plan: str) -> int:
    """Rows the plan's nodes on rota_jobs produced or filtered away, over all loops."""
    total = 0
    lines = plan.splitlines()
    for i, line in enumerate(lines):
        scan = _SCAN.search(line)
        if scan is None:
            continue
        rows, loops = int(scan[1]), int(scan[2])
        removed = 0
        for detail in lines[i + 1 : i + 6]:
            if "->" in detail:
                break
            if match := _REMOVED.search(detail):
                removed += int(match[1])
        total += (rows + removed) * loops
    return total


def cached_plans(table: Table, call: Callable[[int], object]) -> list[str]:
    """The plans on rota_jobs of the seventh `call(n)`: psycopg prepares a statement on its
    sixth run, so the seventh runs the prepared statement (a custom plan still: PostgreSQL
    considers the generic one from a prepared statement's sixth execution on; the tests
    that use this also force the generic plan outright)."""
    for n in range(7):
        del table.plans[:]
        call(n)
    return [p for p in table.plans if "rota_jobs" in p]


def assert_bounded(name: str, plans: list[str], bound: int) -> None:
    """No plan scans rota_jobs or reads more than `bound` of its rows."""
    for plan in plans:
        assert "Seq Scan on rota_jobs" not in plan, f"{name} scans the table:\n{plan}"
        read = rows_read(plan)
        assert read <= bound, f"{name} read {read} rows of rota_jobs:\n{plan}"
