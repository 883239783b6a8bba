"""SQLDriver: the engine's storage written once over the dialect seam. Jobs, leases,
leadership, queue holds, durable steps and the inbox are named queries; what a dialect
still does its own way (its notifier, how it runs a migration file) its subclass adds."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator, Iterator, Sequence
from datetime import datetime
from typing import Any

from rota.drivers.adapters import plain_connection_async, run_on_aiosqlite
from rota.drivers.base import (
    COMPLETED_ENTRY,
    BacklogReport,
    Claim,
    Claimed,
    Completion,
    DurationReport,
    HoldSource,
    JobFilter,
    JobInsert,
    LeaseRenewal,
    ProgressUpdate,
    QueueHold,
    QueueReport,
    RescueReport,
)
from rota.drivers.catalog import CatalogStore
from rota.drivers.database import Database, Row, Session
from rota.drivers.rows import claimed_jobs, due_in, inserted_job, job_from_row, uniform_jobs
from rota.errors import DatabaseUnavailableError, InvalidTransitionError, JobNotFoundError
from rota.job import Job, JobState

# The columns of one inserted job, in the order job_insert_many reads them (`j_*`).
_INSERT = (
    "task",
    "queue",
    "args",
    "priority",
    "max_attempts",
    "key",
    "at",
    "delay",
    "meta",
    "partition_key",
    "expires_at",
    "requires",
    "tenant",
)
# The columns of a job without a key, a gate or a tenant (job_insert_plain and _many_plain).
_INSERT_PLAIN = ("task", "queue", "args", "priority", "max_attempts", "at", "delay", "meta")
# The columns of one completion (`c_*`): job_complete_many and every claim statement.
_COMPLETION = ("id", "token", "state", "delay", "result", "entry", "refund")


def _implied(done: Completion) -> bool:
    """A plain completed attempt: its history entry is implied by the job's columns."""
    return done.state is JobState.COMPLETED and done.entry_json == COMPLETED_ENTRY


# The column of job_insert_many_uniform's one row that holds every id drawn.
_UNIFORM = "ids"


def _shared(row: JobInsert) -> tuple[Any, ...]:
    """What job_insert_many_uniform sends once for all its jobs (all but the arguments)."""
    return (row.task, row.queue, row.priority, row.max_attempts, row.at, row.delay, row.meta_json)


def _plain(row: JobInsert) -> bool:
    """A job without an idempotency key, a per-job gate or a tenant (job_insert_plain)."""
    return (
        row.key is None
        and row.partition_key is None
        and row.expires_at is None
        and row.requires is None
        and row.tenant is None
    )


class SQLDriver:
    """The engine's storage on one Database. Thread-safe; every method blocks."""

    dialect: str

    def __init__(self, database: Database[Any]) -> None:
        self._database = database
        self.dialect = database.dialect
        self.url = database.url
        self.catalog = CatalogStore(database)

    @property
    def database(self) -> Database[Any]:
        return self._database

    def close(self) -> None:
        self._database.close()

    async def aclose(self) -> None:
        """close(), from async code: what a dialect opened on the loop is closed on it."""
        self.close()

    # --- schema and clock -----------------------------------------------------------------

    def schema_version(self) -> int:
        with self._database.read() as session:
            if not session.value("schema_has_table"):
                return 0
            return int(session.value("schema_version") or 0)

    def db_now(self) -> datetime:
        with self._database.read() as session:
            return self._database.codec.instant(session.value("db_now"))

    # --- the hot path: insert, claim, complete, renew ---------------------------------------

    def job_insert_many(self, rows: Sequence[JobInsert], conn: object = None) -> list[Job]:
        """Insert jobs in one statement; a job whose idempotency key is held gets the
        holder back (`created` False). A held key may be stale (past its window, or its job
        left the guarded states): those are released and inserted again.

        Without the caller's connection the insert runs on its own (one round trip, no
        BEGIN/COMMIT, keyed or not); only a key conflict opens a transaction, to release
        stale keys, insert again and read the holders."""
        if not rows:
            return []
        db = self._database
        result: list[Job | None] = [None] * len(rows)
        if conn is None:
            if len(rows) == 1 and _plain(rows[0]):
                # No key: no conflict to resolve, and the one row returned is the job.
                return [inserted_job(db.execute(*self._insert(rows))[0], rows[0], db.codec)]
            self._insert_into(db.execute(*self._insert(rows)), rows, range(len(rows)), result)
            if all(job is not None for job in result):
                return result  # type: ignore[return-value]  # every slot is filled
            with db.write() as session:
                self._resolve_conflicts(session, rows, result)
        else:
            with db.write(conn) as session:
                inserted = session.all(*self._insert(rows))
                self._insert_into(inserted, rows, range(len(rows)), result)
                self._resolve_conflicts(session, rows, result)
        return [job for job in result if job is not None]

    async def job_insert_many_async(
        self, rows: Sequence[JobInsert], conn: object = None
    ) -> list[Job]:
        """job_insert_many without blocking the event loop. Here (SQLite): the blocking
        insert in a worker thread, or, in the caller's connection, at once on the caller's
        thread (a sqlite3 connection belongs to it; a local write takes microseconds)."""
        if conn is None:
            return await asyncio.to_thread(self.job_insert_many, rows)
        conn = await plain_connection_async(conn)
        on_thread = await run_on_aiosqlite(conn, lambda own: self.job_insert_many(rows, own))
        return on_thread if on_thread is not None else self.job_insert_many(rows, conn)

    def _resolve_conflicts(
        self, session: Session[Any], rows: Sequence[JobInsert], result: list[Job | None]
    ) -> None:
        """Run the conflict plan (`_conflict_plan`) on `session`."""
        plan = self._conflict_plan(rows, result)
        with contextlib.suppress(StopIteration):
            step = next(plan)
            while True:
                step = plan.send(session.all(*step))

    def _conflict_plan(
        self, rows: Sequence[JobInsert], result: list[Job | None]
    ) -> Generator[tuple[str, dict[str, Any]], list[Row], None]:
        """Inputs whose key was held: release the holders that are stale and insert those
        again (twice is enough: a third conflict means another transaction took the key
        just now, and its job is the answer), then hand back the holders of the rest.

        It yields each statement (name, parameters) and is sent its rows, so the blocking
        and the async insert (`enqueue_async`) run the same steps in one transaction."""
        pending = [i for i, job in enumerate(result) if job is None]
        for _ in range(2):
            if not pending:
                break
            released = yield "job_release_keys", self._key_params(rows, pending, True)
            freed = {(r["task"], r["key"]) for r in released}
            pending = [i for i in pending if (rows[i].task, rows[i].key) in freed]
            if not pending:
                break
            subset = [rows[i] for i in pending]
            self._insert_into((yield self._insert(subset)), rows, pending, result)
            pending = [i for i in pending if result[i] is None]
        missing = [i for i, job in enumerate(result) if job is None]
        if missing:
            holders = yield "job_get_by_keys", self._key_params(rows, missing, False)
            self._holders_into(holders, rows, missing, result)

    def _insert(self, rows: Sequence[JobInsert]) -> tuple[str, dict[str, Any]]:
        """The statement inserting `rows` and its parameters (one job: scalars)."""
        c = self._database.codec
        if len(rows) == 1 and _plain(rows[0]):
            # A single enqueue: one parameter per column in both dialects.
            r = rows[0]
            return "job_insert_plain", {
                "j_task": r.task,
                "j_queue": r.queue,
                "j_args": r.args_json,
                "j_priority": r.priority,
                "j_max_attempts": r.max_attempts,
                "j_at": c.time_param(r.at),
                "j_delay": r.delay,
                "j_meta": r.meta_json,
            }
        if all(_plain(r) for r in rows):
            first = rows[0]
            shared = _shared(first)
            if len(rows) > 1 and all(_shared(r) == shared for r in rows):
                return "job_insert_many_uniform", {
                    "u_task": first.task,
                    "u_queue": first.queue,
                    "u_priority": first.priority,
                    "u_max_attempts": first.max_attempts,
                    "u_at": c.time_param(first.at),
                    "u_delay": first.delay,
                    "u_meta": first.meta_json,
                    "j_args": c.array([r.args_json for r in rows]),
                }
            plain = [
                (
                    r.task,
                    r.queue,
                    r.args_json,
                    r.priority,
                    r.max_attempts,
                    c.time_param(r.at),
                    r.delay,
                    r.meta_json,
                )
                for r in rows
            ]
            return "job_insert_many_plain", c.columns("j", _INSERT_PLAIN, plain)
        values = [
            (
                r.task,
                r.queue,
                r.args_json,
                r.priority,
                r.max_attempts,
                r.key,
                c.time_param(r.at),
                r.delay,
                r.meta_json,
                r.partition_key,
                c.time_param(r.expires_at),
                # Comma-joined (labels have no commas): one text per row in both dialects.
                None if r.requires is None else ",".join(r.requires),
                r.tenant,
            )
            for r in rows
        ]
        if len(values) == 1:
            return "job_insert_one", c.row("j", _INSERT, values[0])
        return "job_insert_many", c.columns("j", _INSERT, values)

    def _key_params(
        self, rows: Sequence[JobInsert], indexes: Sequence[int], release: bool
    ) -> dict[str, Any]:
        if release:
            return self._database.codec.columns(
                "k",
                ("task", "key", "ttl", "states"),
                [
                    (
                        rows[i].task,
                        rows[i].key,
                        rows[i].key_ttl,
                        _joined(rows[i].key_states),
                    )
                    for i in indexes
                ],
            )
        return self._database.codec.columns(
            "k", ("task", "key"), [(rows[i].task, rows[i].key) for i in indexes]
        )

    def _insert_into(
        self,
        inserted: list[Row],
        rows: Sequence[JobInsert],
        indexes: Sequence[int],
        result: list[Job | None],
    ) -> None:
        """Map inserted rows back to their inputs. Ids are drawn in input order, so the
        rows sorted by id meet the inputs in order; an input with a key that is not among
        them met a conflict (an existing holder, or an earlier input with the same key)."""
        c = self._database.codec
        # job_insert_many_uniform: one row, with every id (all inputs, no keys). (`keys()`:
        # `in` on an sqlite3.Row looks at its values.)
        if len(inserted) == 1 and _UNIFORM in inserted[0].keys():  # noqa: SIM118
            jobs = uniform_jobs(inserted[0], [rows[i] for i in indexes], c)
            for i, job in zip(indexes, jobs, strict=True):
                result[i] = job
            return
        ordered = iter(sorted(inserted, key=lambda r: int(r["id"])))
        keyed: set[tuple[Any, Any]] = set()
        if any(rows[i].key is not None for i in indexes):  # (job_insert_plain returns no key)
            keyed = {(r["task"], r["key"]) for r in inserted if r["key"] is not None}
        for i in indexes:
            row = rows[i]
            if row.key is not None:
                if (row.task, row.key) not in keyed:
                    continue
                keyed.discard((row.task, row.key))  # a later duplicate in this batch conflicts
            result[i] = inserted_job(next(ordered), row, c)

    def _holders_into(
        self,
        holders: list[Row],
        rows: Sequence[JobInsert],
        indexes: Sequence[int],
        result: list[Job | None],
    ) -> None:
        c = self._database.codec
        existing = {(r["task"], r["key"]): r for r in holders}
        for i in indexes:
            holder = existing.get((rows[i].task, rows[i].key))
            if holder is None:
                raise DatabaseUnavailableError(
                    f"key {rows[i].key!r} of {rows[i].task} changed hands during the "
                    "enqueue; retry it"
                )
            result[i] = job_from_row(holder, c, created=False)

    def _completion_params(self, completions: Sequence[Completion]) -> dict[str, Any]:
        # Sorted by id: every statement that updates several running jobs locks them in
        # id order, so a heartbeat and a completion batch never deadlock.
        ordered = sorted(completions, key=lambda done: done.job_id)
        return self._database.codec.completions(
            "c",
            _COMPLETION,
            [
                (
                    done.job_id,
                    done.lease_token,
                    str(done.state),
                    # float(): Retry(after=0) gives an int, and a typed array refuses a mix.
                    None if done.delay is None else float(done.delay),
                    done.result_json,
                    # NULL: an entry the store implies instead of writing (COMPLETED_ENTRY).
                    None if _implied(done) else done.entry_json,
                    done.refund_attempt,
                )
                for done in ordered
            ],
        )

    def job_fetch(self, claim: Claim) -> Claimed:
        db = self._database
        c = db.codec
        params = {
            "queue": claim.queue,
            "limit": claim.limit,
            "worker": claim.worker,
            "lease": claim.lease,
            "caps": None if claim.capabilities is None else c.array(list(claim.capabilities)),
            **self._completion_params(claim.completions),
        }
        claimed: list[Row] = []
        accepted: set[int] = set()
        mode: str | None = None
        paused = False
        waiting: bool | None = None
        for row in db.execute(claim.query, params):
            kind = row["kind"]
            if kind == "job":
                claimed.append(row)
            elif kind == "done":
                accepted.add(int(row["id"]))
            elif kind == "accepted":  # every accepted completion's id in one row
                accepted.update(int(job_id) for job_id in row["accepted"])
            elif kind == "queue":
                mode, paused = row["mode"], c.flag(row["paused"])
                waiting = None if row["waiting"] is None else c.flag(row["waiting"])
        jobs = claimed_jobs(claimed, c)
        jobs.sort(key=lambda j: (j.priority, j.run_at, j.id))
        return Claimed(jobs, accepted, mode, paused, waiting)

    def job_complete_many(self, completions: Sequence[Completion], conn: object = None) -> set[int]:
        if not completions:
            return set()
        rows = self._database.execute(
            "job_complete_many", self._completion_params(completions), conn
        )
        return {int(r["id"]) for r in rows}

    def job_lease_renew(
        self, leases: Sequence[tuple[int, str]], lease_seconds: float
    ) -> list[LeaseRenewal]:
        if not leases:
            return []
        c = self._database.codec
        params = {"lease": lease_seconds, **c.columns("c", ("id", "token"), sorted(leases))}
        return [
            LeaseRenewal(int(r["id"]), str(r["lease_token"]), c.flag(r["cancel_requested"]))
            for r in self._database.execute("job_lease_renew", params)
        ]

    def job_progress_record_many(self, updates: Sequence[ProgressUpdate]) -> set[int]:
        """Store ctx.progress() values of running jobs, each fenced by its lease token
        (sorted by id, like every multi-row write about running jobs); returns ids written."""
        if not updates:
            return set()
        params = self._database.codec.columns(
            "p",
            ("id", "token", "fraction", "message"),
            sorted(
                ((u.job_id, u.lease_token, u.fraction, u.message) for u in updates),
                key=lambda row: row[0],
            ),
        )
        return {int(r["id"]) for r in self._database.execute("job_progress_record_many", params)}

    def job_claim(self, job_id: int, worker: str, lease_seconds: float) -> Job | None:
        params = {"id": job_id, "worker": worker, "lease": lease_seconds}
        rows = self._database.execute("job_claim", params)
        return job_from_row(rows[0], self._database.codec) if rows else None

    def job_rescue_expired(self, limit: int) -> RescueReport:
        states = [
            r["state"] for r in self._database.execute("job_rescue_expired", {"limit": limit})
        ]
        return RescueReport(
            rescued=states.count("available"),
            discarded=states.count("discarded"),
            cancelled=states.count("cancelled"),
        )

    def job_stage_due(self, limit: int, horizon: float = 0.0) -> int:
        rows = self._database.execute("job_stage_due", {"limit": limit, "horizon": horizon})
        return sum(int(r["n"]) for r in rows)

    def job_next_due(self) -> float | None:
        """Seconds until the earliest scheduled or retryable job is due (negative when
        one is overdue), or None when no job waits for its time."""
        return due_in(self._database, "job_next_due")

    # --- jobs -----------------------------------------------------------------------------

    def job_get(self, job_id: int) -> Job | None:
        rows = self._database.query("job_get", {"id": job_id})
        return job_from_row(rows[0], self._database.codec) if rows else None

    def job_get_many(self, ids: Sequence[int]) -> list[Job]:
        c = self._database.codec
        rows = self._database.query("job_get_many", {"ids": c.array(list(ids))})
        return [job_from_row(row, c) for row in rows]

    def job_await_mark(self, job_id: int) -> Job | None:
        """Flag a job as awaited and read it (one statement): the flag makes its finish
        notify a waiter (PostgreSQL; migration 0017)."""
        rows = self._database.execute("job_await_mark", {"id": job_id})
        return job_from_row(rows[0], self._database.codec) if rows else None

    def job_list(self, where: JobFilter) -> list[Job]:
        c = self._database.codec
        params = {
            "states": c.array([str(s) for s in where.states]),
            "queue": where.queue,
            "task": where.task,
            "before_id": where.before_id,
            "limit": where.limit,
        }
        return [job_from_row(r, c) for r in self._database.query("job_list", params)]

    def _job_change(self, name: str, job_id: int, verb: str) -> Job:
        with self._database.write() as session:
            row = session.one(name, {"id": job_id})
            current = None if row is not None else session.one("job_get", {"id": job_id})
        if row is not None:
            return job_from_row(row, self._database.codec)
        if current is None:
            raise JobNotFoundError(f"no job with id {job_id}")
        raise InvalidTransitionError(f"job {job_id} is {current['state']}: it cannot be {verb}")

    def job_cancel(self, job_id: int) -> Job:
        return self._job_change("job_cancel", job_id, "cancelled")

    def job_retry(self, job_id: int) -> Job:
        return self._job_change("job_retry", job_id, "retried")

    def job_checkpoint(self, job_id: int, lease_token: str, value_json: str) -> bool:
        params = {"id": job_id, "token": lease_token, "value": value_json}
        return bool(self._database.execute("job_checkpoint", params))

    def job_prune(self, state: str, age: float, limit: int) -> int:
        """Delete up to `limit` jobs of one finished state older than `age` seconds."""
        params = {"state": state, "age": age, "limit": limit}
        with self._database.write() as session:
            return session.count("job_prune_finished", params)

    def job_prune_finished(self, completed_age: float, discarded_age: float, limit: int) -> int:
        # Cancelled jobs share the completed retention here; the pruner sets each apart.
        ages = {"completed": completed_age, "cancelled": completed_age, "discarded": discarded_age}
        return sum(self.job_prune(state, age, limit) for state, age in ages.items())

    # --- durable steps, the inbox and the application's transactions ----------------------

    def step_list(self, job_id: int) -> dict[str, Any]:
        c = self._database.codec
        rows = self._database.query("step_list", {"job_id": job_id})
        return {r["name"]: c.json(r["result"]) for r in rows}

    def step_record(self, job_id: int, lease_token: str, name: str, result_json: str) -> bool:
        params = {"job_id": job_id, "token": lease_token, "name": name, "result": result_json}
        return bool(self._database.execute("step_record", params))

    def inbox_record(self, conn: object, source: str, message_id: str) -> bool:
        params = {"source": source, "message_id": message_id}
        return bool(self._database.execute("inbox_record", params, conn))

    def inbox_prune(self, age: float, limit: int) -> int:
        with self._database.write() as session:
            return session.count("inbox_prune", {"age": age, "limit": limit})

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._database.transaction() as conn:
            yield conn

    # --- leadership -----------------------------------------------------------------------

    def leader_attempt_elect(self, name: str, leader: str, ttl_seconds: float) -> bool:
        params = {"name": name, "leader": leader, "ttl": ttl_seconds}
        return bool(self._database.execute("leader_attempt_elect", params))

    def leader_resign(self, name: str, leader: str) -> None:
        self._database.execute("leader_resign", {"name": name, "leader": leader})

    # --- queues ---------------------------------------------------------------------------

    def queue_list(self) -> list[QueueReport]:
        db = self._database
        counts: dict[str, dict[str, int]] = {}
        with db.read() as session:
            for row in session.all("queue_counts"):
                counts.setdefault(row["queue"], {})[row["state"]] = int(row["n"])
            oldest = {r["queue"]: float(r["age"]) for r in session.all("queue_oldest")}
            paused = {r["name"]: db.codec.flag(r["paused"]) for r in session.all("queue_settings")}
        names = sorted(set(counts) | set(paused))
        return [
            QueueReport(n, paused.get(n, False), counts.get(n, {}), oldest.get(n)) for n in names
        ]

    def queue_set_paused(self, name: str, paused: bool) -> None:
        self._database.execute("queue_set_paused", {"name": name, "paused": paused})

    def queue_backlog(self, queue: str) -> BacklogReport:
        row = self._database.query("queue_backlog", {"queue": queue})[0]
        return BacklogReport(
            queue, int(row["backlog"]), int(row["running"]), max(0.0, float(row["oldest_age_s"]))
        )

    def queue_durations(self, queue: str, window: float) -> DurationReport:
        row = self._database.query("queue_durations", {"queue": queue, "window": window})[0]
        mean = row["mean_s"]
        return DurationReport(
            queue, window, int(row["samples"]), None if mean is None else float(mean)
        )

    def _hold_change(self, name: str, params: dict[str, Any]) -> tuple[bool, bool]:
        """Apply one hold change; (paused before, paused after). The queue's row is
        created or locked first, so changes of its holds take turns."""
        flag = self._database.codec.flag
        with self._database.write() as session:
            before = flag(session.value("hold_lock_queue", params))
            session.count("hold_adopt", params)
            session.count(name, params)
            after = flag(session.value("hold_sync", params))
        return before, after

    def queue_hold_put(
        self, queue: str, source: HoldSource, reason: str, until: datetime | None
    ) -> bool:
        """Add or update one source's hold on a queue; True when that paused the queue
        (it had none). The queue starts nothing while it has any hold."""
        until_param = self._database.codec.time_param(until)
        params = {"queue": queue, "source": source, "reason": reason, "until": until_param}
        before, after = self._hold_change("hold_put", params)
        return after and not before

    def queue_hold_drop(self, queue: str, source: HoldSource) -> bool:
        """Remove one source's hold; True when that resumed the queue (no hold is left)."""
        before, after = self._hold_change("hold_drop", {"queue": queue, "source": source})
        return before and not after

    def queue_hold_list(self, queue: str | None = None) -> list[QueueHold]:
        c = self._database.codec
        return [
            QueueHold(
                queue=r["queue"],
                source=r["source"],
                reason=r["reason"],
                since=c.instant(r["since"]),
                until=c.time(r["until"]),
            )
            for r in self._database.query("hold_list", {"queue": queue})
        ]


def _joined(states: tuple[str, ...] | None) -> str | None:
    return None if states is None else ",".join(states)
