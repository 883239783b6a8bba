"""PostgreSQL driver: psycopg 3 with a connection pool, `FOR UPDATE SKIP LOCKED`
claims, array-parameter batch writes and LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg

from rota.drivers import queries
from rota.drivers.base import Completion, JobInsert, LeaseRenewal, RescueReport, WakeFunc
from rota.drivers.postgres.copy import PostgresCopyStore
from rota.drivers.postgres.database import PostgresDatabase
from rota.drivers.postgres.hardening import (
    PostgresProgressStore,
)
from rota.drivers.postgres.tokens import PostgresTokenStore
from rota.drivers.sql import SQLDriver
from rota.drivers.url import DatabaseURL
from rota.errors import (
    ConfigurationError,
    DatabaseUnavailableError,
    SchemaError,
)
from rota.job import Attempt, Job, JobState

_Q = queries.load("postgres")
_MIGRATIONS = queries.migrations("postgres")
log = logging.getLogger("rota.postgres")

JOBS_CHANNEL = "rota_jobs"
CONTROL_CHANNEL = "rota_control"


def _parse_ts(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


def job_from_row(row: dict[str, Any], *, created: bool = True) -> Job:
    token = row["lease_token"]
    return Job(
        id=row["id"],
        task=row["task"],
        queue=row["queue"],
        args=row["args"],
        state=JobState(row["state"]),
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        run_at=row["run_at"],
        created_at=row["created_at"],
        attempted_at=row["attempted_at"],
        finished_at=row["finished_at"],
        key=row["key"],
        worker=row["worker"],
        lease_token=None if token is None else str(token),
        lease_expires_at=row["lease_expires_at"],
        cancel_requested=row["cancel_requested"],
        result=row["result"],
        checkpoint=row["checkpoint"],
        meta=row["meta"] or {},
        progress=row["progress"],
        progress_message=row["progress_message"],
        progress_at=row["progress_at"],
        history=tuple(Attempt.from_entry(e, _parse_ts) for e in row["history"]),
        created=created,
        partition_key=row["partition_key"],
        expires_at=row["expires_at"],
        requires=tuple(row["requires"] or ()),
        tenant=row["tenant"],
    )


def _states(states: tuple[str, ...] | None) -> str | None:
    return None if states is None else ",".join(states)


def _claimed(rows: list[dict[str, Any]]) -> list[Job]:
    jobs = [job_from_row(r) for r in rows]
    jobs.sort(key=lambda j: (j.priority, j.run_at, j.id))
    return jobs


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ConfigurationError("pass a timezone-aware datetime (e.g. datetime.now(UTC))")
    return value


class PostgresDriver(SQLDriver):
    dialect = "postgres"
    latest_schema_version = len(_MIGRATIONS)

    def __init__(self, url: DatabaseURL, *, pool_size: int = 4) -> None:
        self._pg = PostgresDatabase(url, pool_size=pool_size)
        super().__init__(self._pg)
        self._conninfo = self._pg.conninfo
        self.tokens = PostgresTokenStore(self)
        self._limited_queues: set[str] = set()  # claimed through job_fetch_limited last time
        # Limited queues whose last claim left jobs waiting (held back by the limit): the
        # fetcher's hint to claim again soon.
        self._held_back: set[str] = set()
        self.progress = PostgresProgressStore(self)
        self.copy = PostgresCopyStore(self)

    def queue_limited_hint(self, name: str) -> bool:
        return name in self._held_back

    # --- connections (through the dialect seam) ----------------------------------------

    def _conn(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        return self._pg.connection()

    @contextlib.contextmanager
    def _tx(
        self, conn: Any = None, *, single: bool = False
    ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor in the caller's transaction (`conn`), or on a pooled connection in a
        transaction of its own (in autocommit when the caller runs a `single` statement)."""
        opened = self._pg.read(conn) if single else self._pg.write(conn)
        with opened as session:
            yield session._cursor

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one named statement (in autocommit) and return its rows."""
        with self._tx(single=True) as cur:
            cur.execute(_Q[name], params or {})
            return cur.fetchall() if cur.description else []

    # --- schema -------------------------------------------------------------------------

    def schema_migrate(self) -> list[int]:
        applied: list[int] = []
        with self._tx() as cur:
            cur.execute(_Q["schema_lock"])
            cur.execute(_Q["schema_create_migrations"])
            cur.execute(_Q["schema_version"])
            row = cur.fetchone()
            current = int(next(iter(row.values()))) if row else 0
            if current > self.latest_schema_version:
                raise SchemaError(
                    f"the database schema is at version {current}, newer than this rota knows "
                    f"({self.latest_schema_version}): upgrade rota"
                )
            for version, name, sql in _MIGRATIONS:
                if version <= current:
                    continue
                cur.execute(sql.encode())  # a whole file: several statements
                cur.execute(_Q["schema_record"], {"version": version, "name": name})
                applied.append(version)
        return applied

    # --- jobs ---------------------------------------------------------------------------

    def job_insert_many(self, rows: Sequence[JobInsert], conn: Any = None) -> list[Job]:
        if not rows:
            return []
        result: list[Job | None] = [None] * len(rows)
        with self._tx(conn) as cur:
            pending = list(range(len(rows)))
            # A conflicting key may be stale (past its window, or its job left the guarded
            # states): release those and insert again. Twice is enough; a third conflict
            # means another transaction took the key just now, and its job is the answer.
            for _ in range(2):
                self._insert_rows(cur, rows, pending, result)
                conflicts = [i for i in pending if result[i] is None]
                if not conflicts:
                    break
                cur.execute(
                    _Q["job_release_keys"],
                    {
                        "tasks": [rows[i].task for i in conflicts],
                        "keys": [rows[i].key for i in conflicts],
                        "ttls": [rows[i].key_ttl for i in conflicts],
                        "states": [_states(rows[i].key_states) for i in conflicts],
                    },
                )
                released = {(r["task"], r["key"]) for r in cur.fetchall()}
                pending = [i for i in conflicts if (rows[i].task, rows[i].key) in released]
                if not pending:
                    break
            missing = [i for i, job in enumerate(result) if job is None]
            if missing:
                cur.execute(
                    _Q["job_get_by_keys"],
                    {
                        "tasks": [rows[i].task for i in missing],
                        "keys": [rows[i].key for i in missing],
                    },
                )
                existing = {(r["task"], r["key"]): r for r in cur.fetchall()}
                for i in missing:
                    holder = existing.get((rows[i].task, rows[i].key))
                    if holder is None:
                        raise DatabaseUnavailableError(
                            f"key {rows[i].key!r} of {rows[i].task} changed hands during the "
                            "enqueue; retry it"
                        )
                    result[i] = job_from_row(holder, created=False)
        return [job for job in result if job is not None]

    def _insert_rows(
        self,
        cur: psycopg.Cursor[Any],
        rows: Sequence[JobInsert],
        indexes: list[int],
        result: list[Job | None],
    ) -> None:
        subset = [rows[i] for i in indexes]
        cur.execute(
            _Q["job_insert_many"],
            {
                "tasks": [r.task for r in subset],
                "queues": [r.queue for r in subset],
                "args": [r.args_json for r in subset],
                "priorities": [r.priority for r in subset],
                "max_attempts": [r.max_attempts for r in subset],
                "keys": [r.key for r in subset],
                "ats": [_aware(r.at) for r in subset],
                "delays": [r.delay for r in subset],
                "metas": [r.meta_json for r in subset],
                "partition_keys": [r.partition_key for r in subset],
                "expires": [_aware(r.expires_at) for r in subset],
                # Comma-joined (labels have no commas): unnest cannot yield an array per row.
                "requires": [None if r.requires is None else ",".join(r.requires) for r in subset],
                "tenants": [r.tenant for r in subset],
            },
        )
        for record in cur.fetchall():
            result[indexes[record["ord"] - 1]] = job_from_row(record)

    def job_fetch_available(
        self,
        queue: str,
        limit: int,
        worker: str,
        lease_seconds: float,
        capabilities: Sequence[str] | None = None,
    ) -> list[Job]:
        params = {
            "queue": queue,
            "limit": limit,
            "worker": worker,
            "lease": lease_seconds,
            "caps": None if capabilities is None else list(capabilities),
        }
        if queue not in self._limited_queues:
            # The fast path: one statement, and it refuses paused, limited and fair queues.
            rows = self._rows("job_fetch_available", params)
            if rows or not self._rows("queue_claim_path", params)[0]["exists"]:
                return _claimed(rows)
            self._limited_queues.add(queue)
        rows, limited = self._fetch_limited(params)
        if not limited:  # the limits were lifted: back to the fast path
            self._limited_queues.discard(queue)
            self._held_back.discard(queue)
            rows = self._rows("job_fetch_available", params)
        return _claimed(rows)

    def _fetch_limited(self, params: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """Claim from a queue with a global or rate limit: the queue row's lock makes the
        claims of that queue take turns, and the claim statement, run after the lock is
        held, counts what every earlier claim committed."""
        with self._tx() as cur:
            cur.execute(_Q["queue_lock"], params)
            ctl = cur.fetchone()
            if ctl is None or (
                ctl["global_limit"] is None and ctl["rate_limit"] is None and not ctl["fair"]
            ):
                return [], False
            if ctl["paused"]:
                self._held_back.discard(params["queue"])
                return [], True
            # A fair queue picks by tenant (rota.tenants); its limits apply all the same.
            cur.execute(_Q["job_fetch_fair" if ctl["fair"] else "job_fetch_limited"], params)
            rows = cur.fetchall()
            waiting = len(rows) == params["limit"]
            if not waiting:  # short: the limit held jobs back, or the queue ran dry
                cur.execute(_Q["job_peek_available"], params)
                row = cur.fetchone()
                waiting = bool(row and next(iter(row.values())))
            if waiting:
                self._held_back.add(params["queue"])
            else:
                self._held_back.discard(params["queue"])
            return rows, True

    def job_complete_many(self, completions: Sequence[Completion], conn: Any = None) -> set[int]:
        if not completions:
            return set()
        params = {
            "ids": [c.job_id for c in completions],
            "tokens": [c.lease_token for c in completions],
            "states": [str(c.state) for c in completions],
            # float(): Retry(after=0) gives an int, and psycopg refuses a mixed-type list.
            "delays": [None if c.delay is None else float(c.delay) for c in completions],
            "results": [c.result_json for c in completions],
            "entries": [c.entry_json for c in completions],
            "refunds": [c.refund_attempt for c in completions],
        }
        with self._tx(conn, single=True) as cur:
            cur.execute(_Q["job_complete_many"], params)
            return {r["id"] for r in cur.fetchall()}

    def job_claim(self, job_id: int, worker: str, lease_seconds: float) -> Job | None:
        params = {"id": job_id, "worker": worker, "lease": lease_seconds}
        rows = self._rows("job_claim", params)
        return job_from_row(rows[0]) if rows else None

    def job_lease_renew(
        self, leases: Sequence[tuple[int, str]], lease_seconds: float
    ) -> list[LeaseRenewal]:
        if not leases:
            return []
        params = {
            "ids": [job_id for job_id, _ in leases],
            "tokens": [token for _, token in leases],
            "lease": lease_seconds,
        }
        return [
            LeaseRenewal(r["id"], r["lease_token"], r["cancel_requested"])
            for r in self._rows("job_lease_renew", params)
        ]

    def job_rescue_expired(self, limit: int) -> RescueReport:
        states = [r["state"] for r in self._rows("job_rescue_expired", {"limit": limit})]
        return RescueReport(
            rescued=states.count("available"),
            discarded=states.count("discarded"),
            cancelled=states.count("cancelled"),
        )

    def job_stage_due(self, limit: int, horizon: float = 0.0) -> int:
        params = {"limit": limit, "horizon": horizon}
        return sum(int(r["n"]) for r in self._rows("job_stage_due", params))

    # --- leadership and queues ------------------------------------------------------------

    # --- steps, inbox and user transactions -------------------------------------------------

    # --- wake-ups -------------------------------------------------------------------------

    def notifier(self) -> ListenNotifier:
        return ListenNotifier(self._conninfo)


class ListenNotifier:
    """LISTEN on the jobs and control channels; reconnects with backoff when the
    connection drops (polling covers the gap, so nothing waits forever)."""

    def __init__(self, conninfo: str | Callable[[], str]) -> None:
        self._conninfo = conninfo

    async def run(self, wake: WakeFunc, control: Callable[[str], None]) -> None:
        delay = 0.1
        while True:
            try:
                conninfo = self._conninfo() if callable(self._conninfo) else self._conninfo
                conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {JOBS_CHANNEL}")
                    await conn.execute(f"LISTEN {CONTROL_CHANNEL}")
                    delay = 0.1
                    wake(None)  # anything inserted while we were not listening
                    async for note in conn.notifies():
                        if note.channel == JOBS_CHANNEL:
                            wake(note.payload or None)
                        else:
                            control(note.payload)
            except psycopg.Error as exc:
                log.warning("LISTEN connection lost (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


__all__ = ["PostgresDriver"]
