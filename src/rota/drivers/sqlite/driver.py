"""SQLite driver: one file shared by every worker process on a host, WAL mode,
`BEGIN IMMEDIATE` for writes, and a data_version watcher instead of LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from rota.drivers import queries
from rota.drivers.base import Completion, JobInsert, LeaseRenewal, RescueReport, WakeFunc
from rota.drivers.sql import SQLDriver
from rota.drivers.sqlite.copy import SQLiteCopyStore
from rota.drivers.sqlite.database import SQLiteDatabase
from rota.drivers.sqlite.hardening import (
    SQLiteProgressStore,
)
from rota.drivers.sqlite.tokens import SQLiteTokenStore
from rota.drivers.url import DatabaseURL
from rota.errors import (
    ConfigurationError,
    SchemaError,
)
from rota.job import Attempt, Job, JobState

_Q = queries.load("sqlite")
_MIGRATIONS = queries.migrations("sqlite")


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _epoch(value: datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ConfigurationError("pass a timezone-aware datetime (e.g. datetime.now(UTC))")
    return value.timestamp()


def job_from_row(row: sqlite3.Row, *, created: bool = True) -> Job:
    result = row["result"]
    history = row["history"]
    return Job(
        id=row["id"],
        task=row["task"],
        queue=row["queue"],
        args=json.loads(row["args"]),
        state=JobState(row["state"]),
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        run_at=datetime.fromtimestamp(row["run_at"], UTC),
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        attempted_at=_ts(row["attempted_at"]),
        finished_at=_ts(row["finished_at"]),
        key=row["key"],
        worker=row["worker"],
        lease_token=row["lease_token"],
        lease_expires_at=_ts(row["lease_expires_at"]),
        cancel_requested=bool(row["cancel_requested"]),
        result=None if result is None else json.loads(result),
        checkpoint=None if row["checkpoint"] is None else json.loads(row["checkpoint"]),
        meta={} if row["meta"] is None else json.loads(row["meta"]),
        progress=row["progress"],
        progress_message=row["progress_message"],
        progress_at=_ts(row["progress_at"]),
        history=()
        if history == "[]"
        else tuple(Attempt.from_entry(e, _ts) for e in json.loads(history)),
        created=created,
        partition_key=row["partition_key"],
        expires_at=_ts(row["expires_at"]),
        requires=() if row["requires"] is None else tuple(json.loads(row["requires"])),
        tenant=row["tenant"],
    )


class SQLiteDriver(SQLDriver):
    dialect = "sqlite"
    latest_schema_version = len(_MIGRATIONS)

    def __init__(self, url: DatabaseURL) -> None:
        self._sqlite = SQLiteDatabase(url)
        super().__init__(self._sqlite)
        self._path = url.path
        self._busy_ms = self._sqlite.busy_ms
        self.tokens = SQLiteTokenStore(self)
        # Limited queues whose last claim left jobs waiting (held back by the limit): the
        # fetcher's hint to claim again soon.
        self._held_back: set[str] = set()
        self.progress = SQLiteProgressStore(self)
        self.copy = SQLiteCopyStore(self)

    def queue_limited_hint(self, name: str) -> bool:
        return name in self._held_back

    # --- connections (through the dialect seam) ----------------------------------------

    def _conn(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._sqlite._pooled()

    @contextlib.contextmanager
    def _write(self, conn: Any = None) -> Iterator[sqlite3.Cursor]:
        with self._sqlite.write(conn) as session:
            yield session._cursor

    def _read(self, name: str, params: dict[str, Any] | None = None) -> list[sqlite3.Row]:
        return self._sqlite.query(name, params)  # type: ignore[return-value]

    # --- schema -------------------------------------------------------------------------

    def schema_migrate(self) -> list[int]:
        applied: list[int] = []
        with self._write() as conn:
            conn.execute(_Q["schema_create_migrations"])
            current = int(conn.execute(_Q["schema_version"]).fetchone()[0])
            if current > self.latest_schema_version:
                raise SchemaError(
                    f"the database schema is at version {current}, newer than this rota knows "
                    f"({self.latest_schema_version}): upgrade rota"
                )
            for version, name, sql in _MIGRATIONS:
                if version <= current:
                    continue
                for statement in _statements(sql):
                    conn.execute(statement)
                conn.execute(_Q["schema_record"], {"version": version, "name": name})
                applied.append(version)
        return applied

    # --- jobs ---------------------------------------------------------------------------

    def job_insert_many(self, rows: Sequence[JobInsert], conn: Any = None) -> list[Job]:
        jobs: list[Job] = []
        with self._write(conn) as db:
            for row in rows:
                jobs.append(self._insert_one(db, row))
        return jobs

    def _insert_one(self, db: sqlite3.Cursor, row: JobInsert) -> Job:
        params = {
            "task": row.task,
            "queue": row.queue,
            "args": row.args_json,
            "priority": row.priority,
            "max_attempts": row.max_attempts,
            "key": row.key,
            "at": _epoch(row.at),
            "delay": row.delay,
            "meta": row.meta_json,
            "partition_key": row.partition_key,
            "expires_at": _epoch(row.expires_at),
            "requires": None if row.requires is None else json.dumps(list(row.requires)),
            "tenant": row.tenant,
        }
        inserted = db.execute(_Q["job_insert_many"], params).fetchone()
        if inserted is not None:
            return job_from_row(inserted)
        key = {"task": row.task, "key": row.key}
        released = db.execute(
            _Q["job_release_keys"],
            {**key, "ttl": row.key_ttl, "states": _states(row.key_states)},
        ).fetchall()
        if released:
            inserted = db.execute(_Q["job_insert_many"], params).fetchone()
            if inserted is not None:
                return job_from_row(inserted)
        # The write lock is held since BEGIN IMMEDIATE, so the holder cannot change now.
        existing = db.execute(_Q["job_get_by_keys"], key).fetchone()
        return job_from_row(existing, created=False)

    def job_fetch_available(
        self,
        queue: str,
        limit: int,
        worker: str,
        lease_seconds: float,
        capabilities: Sequence[str] | None = None,
    ) -> list[Job]:
        caps = None if capabilities is None else "," + ",".join(capabilities) + ","
        if not self._read("job_peek_available", {"queue": queue, "caps": caps})[0][0]:
            self._held_back.discard(queue)
            return []
        params = {
            "queue": queue,
            "limit": limit,
            "worker": worker,
            "lease": lease_seconds,
            "caps": caps,
        }
        with self._write() as db:
            # Under the write lock every claim of every process takes turns, so a limited
            # queue's room (limit - running, rate - recent starts) is exact here.
            ctl = db.execute(_Q["queue_lock"], params).fetchone()
            held_back = False
            if ctl is None or (
                ctl["global_limit"] is None and ctl["rate_limit"] is None and not ctl["fair"]
            ):
                rows = db.execute(_Q["job_fetch_available"], params).fetchall()
            elif ctl["paused"]:
                rows = []
            else:
                # A fair queue picks by tenant (rota.tenants); its limits apply all the same.
                fetch = "job_fetch_fair" if ctl["fair"] else "job_fetch_limited"
                rows = db.execute(_Q[fetch], params).fetchall()
                held_back = len(rows) == limit or bool(
                    db.execute(_Q["job_peek_available"], params).fetchone()[0]
                )
                if ctl["rate_limit"] is not None:
                    period = {"queue": queue, "period": ctl["rate_period"]}
                    db.execute(_Q["queue_starts_prune"], period)
                    if rows:
                        db.execute(_Q["queue_start_record"], {"queue": queue, "n": len(rows)})
        if held_back:
            self._held_back.add(queue)
        else:
            self._held_back.discard(queue)
        jobs = [job_from_row(r) for r in rows]
        jobs.sort(key=lambda j: (j.priority, j.run_at, j.id))
        return jobs

    def job_complete_many(self, completions: Sequence[Completion], conn: Any = None) -> set[int]:
        if not completions:
            return set()
        batch = json.dumps(
            [
                {
                    "id": c.job_id,
                    "token": c.lease_token,
                    "state": str(c.state),
                    "delay": c.delay,
                    "result": c.result_json,
                    "entry": c.entry_json,
                    "refund": 1 if c.refund_attempt else 0,
                }
                for c in completions
            ]
        )
        with self._write(conn) as db:
            rows = db.execute(_Q["job_complete_many"], {"batch": batch}).fetchall()
        return {r[0] for r in rows}

    def job_claim(self, job_id: int, worker: str, lease_seconds: float) -> Job | None:
        params = {"id": job_id, "worker": worker, "lease": lease_seconds}
        with self._write() as db:
            row = db.execute(_Q["job_claim"], params).fetchone()
        return None if row is None else job_from_row(row)

    def job_lease_renew(
        self, leases: Sequence[tuple[int, str]], lease_seconds: float
    ) -> list[LeaseRenewal]:
        if not leases:
            return []
        params = {"leases": json.dumps(list(leases)), "lease": lease_seconds}
        with self._write() as db:
            rows = db.execute(_Q["job_lease_renew"], params).fetchall()
        return [LeaseRenewal(r[0], r[1], bool(r[2])) for r in rows]

    def job_rescue_expired(self, limit: int) -> RescueReport:
        with self._write() as db:
            rows = db.execute(_Q["job_rescue_expired"], {"limit": limit}).fetchall()
        states = [r[1] for r in rows]
        return RescueReport(
            rescued=states.count("available"),
            discarded=states.count("discarded"),
            cancelled=states.count("cancelled"),
        )

    def job_stage_due(self, limit: int, horizon: float = 0.0) -> int:
        with self._write() as db:
            params = {"limit": limit, "horizon": horizon}
            return len(db.execute(_Q["job_stage_due"], params).fetchall())

    # --- leadership and queues ------------------------------------------------------------

    # --- steps, inbox and user transactions -------------------------------------------------

    # --- wake-ups -------------------------------------------------------------------------

    def notifier(self) -> DataVersionNotifier:
        return DataVersionNotifier(self._path, self._busy_ms)


class DataVersionNotifier:
    """Wakes workers when another connection commits to the file.

    `PRAGMA data_version` changes whenever another connection commits, and costs
    microseconds to read, so a 1 ms watch gives SQLite near-instant pick-up across
    processes without scanning the job table.
    """

    interval = 0.001

    def __init__(self, path: str, busy_ms: int) -> None:
        self._path = path
        self._busy_ms = busy_ms

    async def run(self, wake: WakeFunc, control: Callable[[str], None]) -> None:
        loop = asyncio.get_running_loop()
        stop = threading.Event()

        def watch() -> None:
            conn = sqlite3.connect(self._path, timeout=self._busy_ms / 1000)
            try:
                last = conn.execute("PRAGMA data_version").fetchone()[0]
                while not stop.wait(self.interval):
                    current = conn.execute("PRAGMA data_version").fetchone()[0]
                    if current != last:
                        last = current
                        loop.call_soon_threadsafe(wake, None)
            finally:
                conn.close()

        thread = threading.Thread(target=watch, name="rota-sqlite-watch", daemon=True)
        thread.start()
        try:
            await asyncio.get_running_loop().create_future()  # until cancelled
        finally:
            stop.set()


def _states(states: tuple[str, ...] | None) -> str | None:
    return None if states is None else ",".join(states)


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (sqlite3 executes one at a time)."""
    out, current = [], []
    for line in sql.splitlines():
        if line.strip().startswith("--"):
            continue
        current.append(line)
        if sqlite3.complete_statement("\n".join(current)):
            out.append("\n".join(current).strip())
            current = []
    if "".join(current).strip():
        raise SchemaError("a migration ends with an incomplete statement")
    return [s for s in out if s]
