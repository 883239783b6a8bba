"""Batch storage: the parameters and rows (frozen dataclasses) and the BatchStore,
written once over the dialect seam."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rota.drivers.base import Driver, JobInsert
from rota.drivers.database import Row, Session
from rota.job import JobState


@dataclass(frozen=True)
class BatchInsert:
    """A new batch: its job template, spec (JSON) and items (one args JSON per index when
    the batch was made from items; None: every index runs with `args_json`)."""

    name: str | None
    task: str
    queue: str
    priority: int
    args_json: str
    spec_json: str
    parallelism: int
    suspended: bool
    completions: int
    item_args: Sequence[str] | None = None
    on_finish: str | None = None
    on_finish_queue: str | None = None
    on_finish_priority: int = 0
    on_finish_max_attempts: int = 20


@dataclass(frozen=True)
class BatchRecord:
    """A stored batch: definition and status."""

    id: int
    name: str | None
    task: str
    queue: str
    priority: int
    args_json: str
    spec: dict[str, Any]
    parallelism: int
    suspended: bool
    version: int
    succeeded: int
    failed: int
    ignored: int
    fails_since_success: int
    created_at: datetime
    last_failure_at: datetime | None = None
    interim: str | None = None
    interim_reason: str | None = None
    interim_message: str | None = None
    condition: str | None = None
    reason: str | None = None
    message: str | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    finished_at: datetime | None = None
    on_finish: str | None = None
    on_finish_queue: str | None = None
    on_finish_priority: int = 0
    on_finish_max_attempts: int = 20
    callback_job_id: int | None = None
    active: int = 0  # indexes with a live attempt
    created: bool = True  # False when a batch of that name existed already


@dataclass(frozen=True)
class BatchItemRecord:
    """One index and, while it is active, its job as last seen."""

    index: int
    state: str
    failures: int
    last_failure_at: datetime | None
    job_id: int | None
    args_json: str | None = None
    job_state: JobState | None = None
    cancel_requested: bool = False
    job_finished_at: datetime | None = None
    error_type: str | None = None
    error_message: str | None = None
    condition: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ItemChange:
    index: int
    state: str
    failures: int
    last_failure_at: datetime | None
    job_id: int | None


@dataclass(frozen=True)
class BatchApply:
    """One controller pass written at once, fenced by the batch's version: if anything
    changed the batch since it was read (a second controller, suspend, cancel), nothing
    is written and the next pass decides again."""

    batch_id: int
    version: int
    status: dict[str, Any]  # succeeded, failed, ignored, fails_since_success, ...
    items: Sequence[ItemChange] = ()
    start: Sequence[tuple[int, JobInsert]] = ()
    cancel: Sequence[int] = ()
    finished: bool = False
    callback: JobInsert | None = None


@dataclass(frozen=True)
class BatchFilter:
    open_only: bool = False
    limit: int = 50
    task: str | None = None


class _Stale(Exception):
    """Rolls a pass back: the batch changed since the controller read it."""


class BatchStore:
    """Batches, their items and the jobs they started, written once over the dialect seam
    (SQL: drivers/<dialect>/queries/batch.sql). `conn` joins the caller's transaction."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._db = driver.database

    def _record(self, row: Row, *, created: bool = True) -> BatchRecord:
        c = self._db.codec
        return BatchRecord(
            id=row["id"],
            name=row["name"],
            task=row["task"],
            queue=row["queue"],
            priority=row["priority"],
            args_json=row["args_text"],
            spec=json.loads(row["spec_text"]),
            parallelism=row["parallelism"],
            suspended=c.flag(row["suspended"]),
            version=row["version"],
            succeeded=row["succeeded"],
            failed=row["failed"],
            ignored=row["ignored"],
            fails_since_success=row["fails_since_success"],
            created_at=c.instant(row["created_at"]),
            last_failure_at=c.time(row["last_failure_at"]),
            interim=row["interim"],
            interim_reason=row["interim_reason"],
            interim_message=row["interim_message"],
            condition=row["condition"],
            reason=row["reason"],
            message=row["message"],
            start_time=c.time(row["start_time"]),
            completion_time=c.time(row["completion_time"]),
            finished_at=c.time(row["finished_at"]),
            on_finish=row["on_finish"],
            on_finish_queue=row["on_finish_queue"],
            on_finish_priority=row["on_finish_priority"],
            on_finish_max_attempts=row["on_finish_max_attempts"],
            callback_job_id=row["callback_job_id"],
            active=int(row["active"]),
            created=created,
        )

    def _item(self, row: Row) -> BatchItemRecord:
        c = self._db.codec
        state = row["job_state"]
        args = row["args"]
        return BatchItemRecord(
            index=row["idx"],
            state=row["state"],
            failures=row["failures"],
            last_failure_at=c.time(row["last_failure_at"]),
            job_id=row["job_id"],
            args_json=args if args is None or isinstance(args, str) else json.dumps(args),
            job_state=None if state is None else JobState(state),
            cancel_requested=c.flag(row["cancel_requested"]),
            job_finished_at=c.time(row["job_finished_at"]),
            error_type=row["error_type"],
            error_message=row["error_message"],
            condition=row["condition"],
            reason=row["reason"],
        )

    def create(self, row: BatchInsert, conn: object = None) -> BatchRecord:
        params = {
            "name": row.name,
            "task": row.task,
            "queue": row.queue,
            "priority": row.priority,
            "args": row.args_json,
            "spec": row.spec_json,
            "parallelism": row.parallelism,
            "suspended": row.suspended,
            "on_finish": row.on_finish,
            "on_finish_queue": row.on_finish_queue,
            "on_finish_priority": row.on_finish_priority,
            "on_finish_max_attempts": row.on_finish_max_attempts,
        }
        with self._db.write(conn) as session:
            inserted = session.one("batch_insert", params)
            if inserted is None:
                existing = session.one("batch_get_by_name", {"name": row.name})
                assert existing is not None
                return self._record(existing, created=False)
            items = list(row.item_args) if row.item_args is not None else [None] * row.completions
            args = self._db.codec.array(items)
            session.count("batch_item_insert_many", {"batch_id": inserted["id"], "args": args})
            created = session.one("batch_get", {"id": inserted["id"]})
            assert created is not None
            return self._record(created)

    def get(self, ref: int | str, conn: object = None) -> BatchRecord | None:
        name, params = (
            ("batch_get", {"id": ref})
            if isinstance(ref, int)
            else ("batch_get_by_name", {"name": ref})
        )
        rows = self._db.query(name, params, conn)
        return self._record(rows[0]) if rows else None

    def items(self, batch_id: int, conn: object = None) -> list[BatchItemRecord]:
        return [self._item(r) for r in self._db.query("batch_items", {"id": batch_id}, conn)]

    def all(self, where: BatchFilter) -> list[BatchRecord]:
        params = {"open_only": where.open_only, "task": where.task, "limit": where.limit}
        return [self._record(r) for r in self._db.query("batch_list", params)]

    def open_ids(self) -> list[int]:
        return [r["id"] for r in self._db.query("batch_open_ids")]

    def job_ids(self, batch_id: int) -> list[int]:
        return [r["job_id"] for r in self._db.query("batch_job_ids", {"id": batch_id})]

    def apply(self, change: BatchApply, conn: object = None) -> bool:
        """Write one controller pass; False (and nothing written) when the batch moved on
        since it was read."""
        try:
            with self._db.write(conn) as session:
                self._apply(session, change)
        except _Stale:
            return False
        return True

    def _apply(self, session: Session[Any], change: BatchApply) -> None:
        c = self._db.codec
        params = dict(change.status, id=change.batch_id, version=change.version)
        params["finished"] = change.finished
        params["last_failure_at"] = c.time_param(params.get("last_failure_at"))
        if session.one("batch_update_status", params) is None:
            raise _Stale
        session.many(
            "batch_item_update",
            [
                {
                    "batch_id": change.batch_id,
                    "idx": item.index,
                    "state": item.state,
                    "failures": item.failures,
                    "last_failure_at": c.time_param(item.last_failure_at),
                    "job_id": item.job_id,
                }
                for item in change.items
            ],
        )
        if change.cancel:
            session.all("batch_jobs_cancel", {"ids": c.array(list(change.cancel))})
        if change.start:
            jobs = self._driver.job_insert_many(
                [row for _, row in change.start], conn=session.connection
            )
            links = [
                {"job_id": job.id, "batch_id": change.batch_id, "idx": idx}
                for (idx, _), job in zip(change.start, jobs, strict=True)
            ]
            session.many("batch_job_link", links)
            session.many("batch_item_start", links)
        if change.callback is not None:
            (job,) = self._driver.job_insert_many([change.callback], conn=session.connection)
            session.count("batch_callback_set", {"id": change.batch_id, "job_id": job.id})

    def set_parallelism(self, batch_id: int, parallelism: int) -> bool:
        params = {"id": batch_id, "parallelism": parallelism}
        return bool(self._db.execute("batch_set_parallelism", params))

    def set_suspended(self, batch_id: int, suspended: bool) -> bool:
        params = {"id": batch_id, "suspended": suspended}
        return bool(self._db.execute("batch_set_suspended", params))

    def request_cancel(self, batch_id: int, message: str) -> bool:
        params = {"id": batch_id, "message": message}
        return bool(self._db.execute("batch_request_cancel", params))

    def prune_expired(self, limit: int) -> int:
        """Delete up to `limit` finished batches past their TTL, with their jobs. A read
        looks first: most passes find none, and a write transaction (on SQLite, the write
        lock) for nothing would hold up every other writer."""
        if not self._db.query("batch_expired", {"limit": 1}):
            return 0
        with self._db.write() as session:
            ids = [r["id"] for r in session.all("batch_expired", {"limit": limit})]
            if not ids:
                return 0
            array = self._db.codec.array(ids)
            session.count("batch_prune_jobs", {"ids": array})
            session.count("batch_delete", {"ids": array})
            return len(ids)
