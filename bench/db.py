"""Throwaway databases for one measurement: a fresh SQLite file (WAL, synchronous=FULL)
in its own temporary directory, or a fresh PostgreSQL schema; both migrated by rota and
removed afterwards. Also the raw connections the baseline and the checks use."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

import rota
from bench.tasks import make_app

SQLITE_BUSY_MS = 30_000


class BenchError(Exception):
    """A measurement could not be taken (a stall, a crash, a wrong count)."""


@dataclass(frozen=True)
class Database:
    dialect: str  # "sqlite" | "postgres"
    url: str  # what rota.App takes
    sqlite_path: str = ""  # sqlite only
    schema: str = ""  # postgres only


def schema_url(base_url: str, schema: str) -> str:
    """`base_url` with every connection's search_path set to `schema`."""
    sep = "&" if "?" in base_url else "?"
    return f"{base_url}{sep}options={quote(f'-csearch_path={schema}')}"


@contextlib.contextmanager
def fresh_database(
    dialect: str, *, pg_url: str, tmpdir: str | None, migrate: bool = True
) -> Iterator[Database]:
    """A new, migrated, empty rota database; dropped (or deleted) on exit. With
    `migrate=False` it is left empty, for a peer to install its own tables."""
    if dialect == "sqlite":
        folder = tempfile.mkdtemp(prefix="rota-bench-", dir=tmpdir)
        path = str(Path(folder, "rota.db").resolve())
        db = Database("sqlite", f"sqlite:///{path}?synchronous=FULL", sqlite_path=path)
        try:
            if migrate:
                _migrate(db)
            yield db
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    schema = f"rota_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    db = Database("postgres", schema_url(pg_url, schema), schema=schema)
    try:
        if migrate:
            _migrate(db)
        yield db
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _migrate(db: Database) -> None:
    with rota.App(db.url) as app:
        app.migrate()


def sqlite_connect(path: str) -> sqlite3.Connection:
    """A plain autocommit connection with the same settings rota uses (WAL, FULL)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=SQLITE_BUSY_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def pg_connect(url: str, **kwargs: Any) -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] = psycopg.connect(url, autocommit=True, **kwargs)
    return conn


def prefill(db: Database, task_name: str, jobs: int, batch: int = 1000) -> None:
    """Insert `jobs` available jobs of `task_name` through rota (enqueue_many)."""
    with make_app(db.url) as app:
        task = app.get_task(task_name)
        for start in range(0, jobs, batch):
            task.enqueue_many([{"n": i} for i in range(start, min(start + batch, jobs))])
    settle(db)


# How often `vacuum_stand_in` vacuums: autovacuum's default naptime. With rota's scale
# factor for rota_jobs (0.02, migration 0001) a history growing by thousands of jobs a
# second crosses the threshold at every naptime, so autovacuum would run about this often.
STAND_IN_EVERY = 60.0


@contextlib.contextmanager
def vacuum_stand_in(db: Database, every: float = STAND_IN_EVERY) -> Iterator[None]:
    """While the block runs, `VACUUM rota_jobs` every `every` seconds if the server's
    autovacuum is off (as on the CI machine, `conf.d/90-ci.conf`): a history made over
    minutes without any vacuum is not one a deployment has. No-op on SQLite or with
    autovacuum on."""
    if db.dialect != "postgres":
        yield
        return
    with pg_connect(db.url) as conn:
        if conn.execute("SHOW autovacuum").fetchone() == ("on",):
            yield
            return
    print(f"autovacuum is off on this server: VACUUM rota_jobs every {every:.0f} s", flush=True)
    stop = threading.Event()

    def vacuum() -> None:
        with pg_connect(db.url) as conn:
            while not stop.wait(every):
                conn.execute("VACUUM rota_jobs")

    thread = threading.Thread(target=vacuum, name="bench-vacuum", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def settle(db: Database) -> None:
    """The same starting state for every drain: fresh statistics (PostgreSQL) or an
    empty WAL (SQLite)."""
    if db.dialect == "postgres":
        with pg_connect(db.url) as conn:
            conn.execute("VACUUM ANALYZE rota_jobs")
        return
    lite = sqlite_connect(db.sqlite_path)
    try:
        lite.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        lite.close()


def clear_queue(db: Database, queue: str = "bench") -> None:
    """Delete the jobs of `queue` (a drained batch), so the next drain starts beside the
    same table; `prefill` settles afterwards."""
    sql = "DELETE FROM rota_jobs WHERE queue = %s"
    if db.dialect == "postgres":
        with pg_connect(db.url) as conn:
            conn.execute(sql, (queue,))
        return
    lite = sqlite_connect(db.sqlite_path)
    try:
        lite.execute(sql.replace("%s", "?"), (queue,))
    finally:
        lite.close()


def checkpoint(db: Database) -> None:
    """Write out what the server (or the WAL file) still holds of a bulk fill. On
    PostgreSQL CHECKPOINT needs a superuser or pg_checkpoint; without it the server's own
    schedule has to do."""
    if db.dialect == "postgres":
        with (
            pg_connect(db.url) as conn,
            contextlib.suppress(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute("CHECKPOINT")
        return
    settle(db)


def state_counts(db: Database) -> dict[str, int]:
    sql = "SELECT state, count(*) FROM rota_jobs GROUP BY state"
    if db.dialect == "postgres":
        with pg_connect(db.url) as conn:
            return {str(s): int(n) for s, n in conn.execute(sql).fetchall()}
    lite = sqlite_connect(db.sqlite_path)
    try:
        return {str(s): int(n) for s, n in lite.execute(sql).fetchall()}
    finally:
        lite.close()


def check_drained(db: Database, jobs: int, what: str) -> None:
    """Every job must have ended `completed`, or the number is not a drain rate."""
    counts = state_counts(db)
    if counts.get("completed", 0) != jobs or sum(counts.values()) != jobs:
        raise BenchError(f"{what}: expected {jobs} completed jobs, found {counts}")


def server_version(pg_url: str) -> str | None:
    """The PostgreSQL server version, or None when it is unreachable."""
    try:
        with psycopg.connect(pg_url, connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except psycopg.Error:
        return None
    return str(row[0]) if row else None
