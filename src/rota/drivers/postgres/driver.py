"""PostgreSQL driver: psycopg 3 with a connection pool, `FOR UPDATE SKIP LOCKED`
claims, array-parameter batch writes and LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import select
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from rota.drivers import queries
from rota.drivers.base import (
    BacklogReport,
    ClaimStatus,
    Completion,
    DurationReport,
    JobFilter,
    JobInsert,
    LeaseRenewal,
    ManualRun,
    QueueReport,
    RescueReport,
    ScheduleRecord,
    ScheduleRun,
    ScheduleRunFilter,
    ScheduleUpsert,
    TickClaim,
    TickClaimResult,
    WakeFunc,
    claim_refusal,
    tick_minute,
)
from rota.drivers.postgres.batches import PostgresBatchStore
from rota.drivers.postgres.copy import PostgresCopyStore
from rota.drivers.postgres.events import PostgresEventStore
from rota.drivers.postgres.hardening import (
    PostgresCatalogStore,
    PostgresProgressStore,
    PostgresSealedArgsStore,
)
from rota.drivers.postgres.holds import PostgresHoldStore
from rota.drivers.postgres.metrics import PostgresMetricsStore
from rota.drivers.postgres.ops import PostgresOpsStore
from rota.drivers.postgres.routing import PostgresRoutingStore
from rota.drivers.postgres.sagas import PostgresSagaStore
from rota.drivers.postgres.tenants import PostgresTenantStore
from rota.drivers.postgres.tokens import PostgresTokenStore
from rota.drivers.postgres.web import PostgresWebStore
from rota.drivers.postgres.workflows import PostgresWorkflowStore
from rota.drivers.url import DatabaseURL, SecretFilter
from rota.errors import (
    ConfigurationError,
    DatabaseUnavailableError,
    InvalidTransitionError,
    JobNotFoundError,
    PermissionDeniedError,
    ScheduleError,
    ScheduleNotFoundError,
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


def _schedule(row: dict[str, Any]) -> ScheduleRecord:
    return ScheduleRecord(
        id=row["id"],
        name=row["name"],
        task=row["task"],
        queue=row["queue"],
        priority=row["priority"],
        max_attempts=row["max_attempts"],
        args_json=row["args_json"],
        expression=row["expression"],
        timezone=row["timezone"],
        dst=row["dst"],
        concurrency=row["concurrency"],
        starting_deadline=row["starting_deadline"],
        successful_history_limit=row["successful_history_limit"],
        failed_history_limit=row["failed_history_limit"],
        strict_missed_limit=row["strict_missed_limit"],
        suspended=row["suspended"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_schedule_time=row["last_schedule_time"],
        last_successful_time=row["last_successful_time"],
        last_missed_time=row["last_missed_time"],
        last_event=row["last_event"],
        last_event_at=row["last_event_at"],
        active=int(row["active"]),
    )


def _run(row: dict[str, Any]) -> ScheduleRun:
    state = row["job_state"]
    return ScheduleRun(
        id=row["id"],
        schedule_id=row["schedule_id"],
        schedule=row["schedule"],
        name=row["name"],
        trigger=row["kind"],
        scheduled_at=row["scheduled_at"],
        scheduled_local=row["scheduled_local"],
        job_id=row["job_id"],
        job_state=None if state is None else JobState(state),
        created_at=row["created_at"],
        scheduler=row["scheduler"],
        attempted_at=row["attempted_at"],
        finished_at=row["finished_at"],
    )


def _claimed(rows: list[dict[str, Any]]) -> list[Job]:
    jobs = [job_from_row(r) for r in rows]
    jobs.sort(key=lambda j: (j.priority, j.run_at, j.id))
    return jobs


class _Refused(Exception):
    """Rolls a tick claim back (the job it inserted goes with it)."""

    def __init__(self, status: ClaimStatus) -> None:
        super().__init__(status)
        self.status = status


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ConfigurationError("pass a timezone-aware datetime (e.g. datetime.now(UTC))")
    return value


def _check_connection(conn: psycopg.Connection[Any]) -> None:
    """Checked on every checkout, so no call fails on a session the server has ended (a
    restart, a failover, pg_terminate_backend). An idle pooled connection has nothing to
    read, and one the server ended has its goodbye (or EOF) waiting: only then is the full
    round-trip check run (psycopg_pool's check_connection), which raises and makes the
    pool discard it and hand out another. The probe costs a syscall, not a round trip."""
    if _readable(conn.pgconn.socket):
        psycopg_pool.ConnectionPool.check_connection(conn)


def _readable(fd: int) -> bool:
    if hasattr(select, "poll"):  # any descriptor number (select() stops at 1024)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))  # POLLHUP and POLLERR count as an answer too
    return bool(select.select([fd], [], [], 0)[0])


class PostgresDriver:
    dialect = "postgres"
    latest_schema_version = len(_MIGRATIONS)

    def __init__(self, url: DatabaseURL, *, pool_size: int = 4) -> None:
        self.url = url
        # A URL from a file is read again for every new connection: a rotated password
        # is used from the next reconnect on (docs/security.md).
        self._conninfo: str | Callable[[], str] = url.current if url.file else url.raw
        self._pool = psycopg_pool.ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=max(1, pool_size),
            open=False,
            timeout=10.0,
            reconnect_timeout=86400.0,  # keep trying: a database that is down comes back
            # Autocommit: a single statement needs no BEGIN/COMMIT round trips; methods
            # with several statements open a transaction explicitly (_tx).
            kwargs={"autocommit": True, "row_factory": dict_row},
            check=_check_connection,
            name="rota",
        )
        self._opened = False
        self._closed = False
        # psycopg's pool logs connection errors, which can quote the connection string.
        self._log_filter = SecretFilter(url)
        logging.getLogger("psycopg.pool").addFilter(self._log_filter)
        self.tokens = PostgresTokenStore(self)
        self.ops = PostgresOpsStore(self)
        self._limited_queues: set[str] = set()  # claimed through job_fetch_limited last time
        # Limited queues whose last claim left jobs waiting (held back by the limit): the
        # fetcher's hint to claim again soon.
        self._held_back: set[str] = set()
        self.batches = PostgresBatchStore(self)
        self.sagas = PostgresSagaStore(self)
        self.events = PostgresEventStore(self)
        self.metrics = PostgresMetricsStore(self)
        self.progress = PostgresProgressStore(self)
        self.sealed = PostgresSealedArgsStore(self)
        self.catalog = PostgresCatalogStore(self)
        self.copy = PostgresCopyStore(self)
        self.web = PostgresWebStore(self)
        self.holds = PostgresHoldStore(self)
        self.routing = PostgresRoutingStore(self)
        self.tenants = PostgresTenantStore(self)
        self.workflows = PostgresWorkflowStore(self)

    # --- connections ------------------------------------------------------------------

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise DatabaseUnavailableError("the driver is closed")
        if not self._opened:
            self._pool.open(wait=False)
            self._opened = True
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseUnavailableError(
                f"PostgreSQL at {self.url.redacted()} is unreachable: {self.url.scrub(str(exc))}"
            ) from None
        except psycopg.errors.InsufficientPrivilege as exc:
            # A least-privilege role (`rota db roles`) was refused by the database.
            raise PermissionDeniedError(
                f"PostgreSQL refused: {exc.diag.message_primary} (the role connected lacks "
                "this privilege; see `rota db roles` and docs/security.md)"
            ) from None
        except psycopg.errors.UndefinedTable as exc:
            raise SchemaError(
                f"{exc.diag.message_primary}: the database has no rota schema; run `rota migrate`"
            ) from None
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(f"PostgreSQL error: {self.url.scrub(str(exc))}") from exc

    @contextlib.contextmanager
    def _tx(
        self, conn: Any = None, *, single: bool = False
    ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor in the caller's transaction (`conn`), or on a pooled connection in a
        transaction of its own (in autocommit when the caller runs a `single` statement)."""
        if conn is not None:
            if not isinstance(conn, psycopg.Connection):
                raise ConfigurationError(
                    f"conn= must be a psycopg.Connection for a PostgreSQL app, "
                    f"not {type(conn).__name__}"
                )
            # The caller's transaction: join it, and let the caller commit or roll back.
            with conn.cursor(row_factory=dict_row) as cur:
                yield cur
            return
        with self._conn() as own:
            if single:
                with own.cursor() as cur:
                    yield cur
            else:
                with own.transaction(), own.cursor() as cur:
                    yield cur

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one named statement (in autocommit) and return its rows."""
        with self._tx(single=True) as cur:
            cur.execute(_Q[name], params or {})
            return cur.fetchall() if cur.description else []

    def close(self) -> None:
        self._closed = True
        if self._opened:
            self._pool.close()
        logging.getLogger("psycopg.pool").removeFilter(self._log_filter)

    # --- schema -------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self._tx() as cur:
            cur.execute(_Q["schema_has_table"])
            row = cur.fetchone()
            if not row or not next(iter(row.values())):
                return 0
            cur.execute(_Q["schema_version"])
            row = cur.fetchone()
            return int(next(iter(row.values()))) if row else 0

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

    def db_now(self) -> datetime:
        rows = self._rows("db_now")
        value = next(iter(rows[0].values()))
        assert isinstance(value, datetime)
        return value

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

    def job_checkpoint(self, job_id: int, lease_token: str, value_json: str) -> bool:
        params = {"id": job_id, "token": lease_token, "value": value_json}
        return bool(self._rows("job_checkpoint", params))

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

    def job_get(self, job_id: int) -> Job | None:
        rows = self._rows("job_get", {"id": job_id})
        return job_from_row(rows[0]) if rows else None

    def job_list(self, where: JobFilter) -> list[Job]:
        params = {
            "states": [str(s) for s in where.states],
            "queue": where.queue,
            "task": where.task,
            "before_id": where.before_id,
            "limit": where.limit,
        }
        return [job_from_row(r) for r in self._rows("job_list", params)]

    def _job_change(self, name: str, job_id: int, verb: str) -> Job:
        with self._tx() as cur:
            cur.execute(_Q[name], {"id": job_id})
            row = cur.fetchone()
            if row is not None:
                return job_from_row(row)
            cur.execute(_Q["job_get"], {"id": job_id})
            current = cur.fetchone()
        if current is None:
            raise JobNotFoundError(f"no job with id {job_id}")
        raise InvalidTransitionError(f"job {job_id} is {current['state']}: it cannot be {verb}")

    def job_cancel(self, job_id: int) -> Job:
        return self._job_change("job_cancel", job_id, "cancelled")

    def job_retry(self, job_id: int) -> Job:
        return self._job_change("job_retry", job_id, "retried")

    def job_prune_finished(self, completed_age: float, discarded_age: float, limit: int) -> int:
        # Cancelled jobs share the completed retention here; the pruner sets each apart.
        ages = {"completed": completed_age, "cancelled": completed_age, "discarded": discarded_age}
        return sum(self.ops.job_prune(state, age, limit) for state, age in ages.items())

    # --- leadership and queues ------------------------------------------------------------

    def leader_attempt_elect(self, name: str, leader: str, ttl_seconds: float) -> bool:
        params = {"name": name, "leader": leader, "ttl": ttl_seconds}
        return bool(self._rows("leader_attempt_elect", params))

    def leader_resign(self, name: str, leader: str) -> None:
        self._rows("leader_resign", {"name": name, "leader": leader})

    def queue_list(self) -> list[QueueReport]:
        counts: dict[str, dict[str, int]] = {}
        for row in self._rows("queue_counts"):
            counts.setdefault(row["queue"], {})[row["state"]] = int(row["n"])
        oldest = {r["queue"]: float(r["age"]) for r in self._rows("queue_oldest")}
        paused = {r["name"]: bool(r["paused"]) for r in self._rows("queue_settings")}
        names = sorted(set(counts) | set(paused))
        return [
            QueueReport(n, paused.get(n, False), counts.get(n, {}), oldest.get(n)) for n in names
        ]

    def queue_set_paused(self, name: str, paused: bool) -> None:
        self._rows("queue_set_paused", {"name": name, "paused": paused})

    def queue_backlog(self, queue: str) -> BacklogReport:
        row = self._rows("queue_backlog", {"queue": queue})[0]
        return BacklogReport(
            queue, int(row["backlog"]), int(row["running"]), float(row["oldest_age_s"])
        )

    def queue_durations(self, queue: str, window: float) -> DurationReport:
        row = self._rows("queue_durations", {"queue": queue, "window": window})[0]
        mean = row["mean_s"]
        return DurationReport(
            queue, window, int(row["samples"]), None if mean is None else float(mean)
        )

    # --- schedules ----------------------------------------------------------------------

    def schedule_upsert_many(self, rows: Sequence[ScheduleUpsert]) -> list[ScheduleRecord]:
        with self._tx() as cur:
            for row in rows:
                cur.execute(_Q["schedule_upsert"], row.params())
        found = [self.schedule_get(row.name) for row in rows]
        return [record for record in found if record is not None]

    def schedule_list(self) -> list[ScheduleRecord]:
        return [_schedule(r) for r in self._rows("schedule_list")]

    def schedule_get(self, name: str) -> ScheduleRecord | None:
        rows = self._rows("schedule_get", {"name": name})
        return _schedule(rows[0]) if rows else None

    def schedule_set_suspended(self, name: str, suspended: bool) -> ScheduleRecord:
        changed = self._rows("schedule_set_suspended", {"name": name, "suspended": suspended})
        record = self.schedule_get(name) if changed else None
        if record is None:
            raise ScheduleNotFoundError(f"no schedule named {name!r}")
        return record

    def schedule_delete(self, name: str) -> bool:
        return bool(self._rows("schedule_delete", {"name": name}))

    def schedule_event_record(
        self, schedule_id: int, event: str, missed_at: datetime | None
    ) -> None:
        params = {"id": schedule_id, "event": event, "missed": _aware(missed_at)}
        self._rows("schedule_event_record", params)

    def schedule_tick_claim(self, claim: TickClaim) -> TickClaimResult:
        params = {
            "id": claim.schedule_id,
            "name": claim.name,
            "minute": tick_minute(claim.at),
            "at": _aware(claim.at),
            "local": claim.local,
            "scheduler": claim.scheduler,
        }
        try:
            with self._tx() as cur:
                # The row lock makes concurrent claims on one schedule take turns, so the
                # Forbid check below sees every committed run (READ COMMITTED re-reads per
                # statement). A duplicate tick is stopped by the unique tick key itself.
                cur.execute(_Q["schedule_lock"], params)
                cur.execute(_Q["schedule_tick_claim"], params)
                inserted = cur.fetchone()
                if inserted is None:
                    cur.execute(_Q["schedule_tick_state"], params)
                    raise _Refused(claim_refusal(cur.fetchone()))
                job = self.job_insert_many([claim.job], conn=cur.connection)[0]
                cur.execute(_Q["schedule_run_link"], {"run_id": inserted["id"], "job_id": job.id})
                cur.execute(_Q["schedule_last_time_set"], params)
                if cur.fetchone() is None:
                    raise _Refused(ClaimStatus.STALE)
                run = self._run_in(cur, inserted["id"])
        except _Refused as refused:
            return TickClaimResult(refused.status)
        return TickClaimResult(ClaimStatus.CLAIMED, run, job)

    def schedule_run_trigger(self, run: ManualRun) -> ScheduleRun:
        params = {
            "id": run.schedule_id,
            "name": run.name,
            "at": _aware(run.at),
            "local": run.local,
            "scheduler": run.scheduler,
        }
        with self._tx() as cur:
            cur.execute(_Q["schedule_run_insert_manual"], params)
            inserted = cur.fetchone()
            if inserted is None:
                raise ScheduleError(f"this schedule already has a run named {run.name!r}")
            job = self.job_insert_many([run.job], conn=cur.connection)[0]
            cur.execute(_Q["schedule_run_link"], {"run_id": inserted["id"], "job_id": job.id})
            return self._run_in(cur, inserted["id"])

    def _run_in(self, cur: psycopg.Cursor[dict[str, Any]], run_id: int) -> ScheduleRun:
        params = {"schedule_id": None, "run_id": run_id, "active_only": False, "limit": 1}
        cur.execute(_Q["schedule_run_list"], params)
        row = cur.fetchone()
        assert row is not None
        return _run(row)

    def schedule_run_list(self, where: ScheduleRunFilter) -> list[ScheduleRun]:
        params = {
            "schedule_id": where.schedule_id,
            "run_id": None,
            "active_only": where.active_only,
            "limit": where.limit,
        }
        return [_run(r) for r in self._rows("schedule_run_list", params)]

    def schedule_history_prune(self, limit: int) -> int:
        with self._tx() as cur:
            # lastSuccessfulTime first: the prune may delete the run it comes from.
            cur.execute(_Q["schedule_success_refresh"])
            cur.execute(_Q["schedule_history_prune"], {"limit": limit})
            return cur.rowcount

    # --- steps, inbox and user transactions -------------------------------------------------

    def step_list(self, job_id: int) -> dict[str, Any]:
        return {r["name"]: r["result"] for r in self._rows("step_list", {"job_id": job_id})}

    def step_record(self, job_id: int, lease_token: str, name: str, result_json: str) -> bool:
        params = {"job_id": job_id, "token": lease_token, "name": name, "result": result_json}
        return bool(self._rows("step_record", params))

    def inbox_record(self, conn: Any, source: str, message_id: str) -> bool:
        with self._tx(conn, single=True) as cur:
            cur.execute(_Q["inbox_record"], {"source": source, "message_id": message_id})
            return cur.fetchone() is not None

    def inbox_prune(self, age: float, limit: int) -> int:
        with self._tx() as cur:
            cur.execute(_Q["inbox_prune"], {"age": age, "limit": limit})
            return cur.rowcount

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction, committed when the block exits cleanly."""
        with self._conn() as conn, conn.transaction():
            yield conn

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
                # Jittered, so the workers of a restarted server do not reconnect in step.
                wait = random.uniform(delay / 2, delay)
                log.warning("LISTEN connection lost (%s); retrying in %.1fs", exc, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, 5.0)


__all__ = ["PostgresDriver"]
