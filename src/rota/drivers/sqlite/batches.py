"""Batch storage on SQLite: batches, their indexes and the jobs they started."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rota.batches.store import (
    BatchApply,
    BatchFilter,
    BatchInsert,
    BatchItemRecord,
    BatchRecord,
)
from rota.drivers import queries
from rota.job import JobState

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


class _Stale(Exception):
    """Rolls a pass back: the batch changed since the controller read it."""


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _record(row: sqlite3.Row, *, created: bool = True) -> BatchRecord:
    return BatchRecord(
        id=row["id"],
        name=row["name"],
        task=row["task"],
        queue=row["queue"],
        priority=row["priority"],
        args_json=row["args_text"],
        spec=json.loads(row["spec_text"]),
        parallelism=row["parallelism"],
        suspended=bool(row["suspended"]),
        version=row["version"],
        succeeded=row["succeeded"],
        failed=row["failed"],
        ignored=row["ignored"],
        fails_since_success=row["fails_since_success"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        last_failure_at=_ts(row["last_failure_at"]),
        interim=row["interim"],
        interim_reason=row["interim_reason"],
        interim_message=row["interim_message"],
        condition=row["condition"],
        reason=row["reason"],
        message=row["message"],
        start_time=_ts(row["start_time"]),
        completion_time=_ts(row["completion_time"]),
        finished_at=_ts(row["finished_at"]),
        on_finish=row["on_finish"],
        on_finish_queue=row["on_finish_queue"],
        on_finish_priority=row["on_finish_priority"],
        on_finish_max_attempts=row["on_finish_max_attempts"],
        callback_job_id=row["callback_job_id"],
        active=int(row["active"]),
        created=created,
    )


def _item(row: sqlite3.Row) -> BatchItemRecord:
    state = row["job_state"]
    return BatchItemRecord(
        index=row["idx"],
        state=row["state"],
        failures=row["failures"],
        last_failure_at=_ts(row["last_failure_at"]),
        job_id=row["job_id"],
        args_json=row["args"],
        job_state=None if state is None else JobState(state),
        cancel_requested=bool(row["cancel_requested"]),
        job_finished_at=_ts(row["job_finished_at"]),
        error_type=row["error_type"],
        error_message=row["error_message"],
        condition=row["condition"],
        reason=row["reason"],
    )


class SQLiteBatchStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def create(self, row: BatchInsert, conn: Any = None) -> BatchRecord:
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
        with self._d._write(conn) as db:
            inserted = db.execute(_Q["batch_insert"], params).fetchone()
            if inserted is None:
                existing = db.execute(_Q["batch_get_by_name"], {"name": row.name}).fetchone()
                return _record(existing, created=False)
            if row.item_args is not None:
                args = "[" + ",".join(row.item_args) + "]"
            else:
                args = json.dumps([None] * row.completions)
            db.execute(_Q["batch_item_insert_many"], {"batch_id": inserted[0], "args": args})
            return _record(db.execute(_Q["batch_get"], {"id": inserted[0]}).fetchone())

    def get(self, ref: int | str, conn: Any = None) -> BatchRecord | None:
        name, params = (
            ("batch_get", {"id": ref})
            if isinstance(ref, int)
            else ("batch_get_by_name", {"name": ref})
        )
        if conn is not None:
            with self._d._write(conn) as db:
                row = db.execute(_Q[name], params).fetchone()
            return None if row is None else _record(row)
        rows = self._d._read(name, params)
        return _record(rows[0]) if rows else None

    def items(self, batch_id: int, conn: Any = None) -> list[BatchItemRecord]:
        if conn is not None:
            with self._d._write(conn) as db:
                return [_item(r) for r in db.execute(_Q["batch_items"], {"id": batch_id})]
        return [_item(r) for r in self._d._read("batch_items", {"id": batch_id})]

    def all(self, where: BatchFilter) -> list[BatchRecord]:
        params = {"open_only": where.open_only, "task": where.task, "limit": where.limit}
        return [_record(r) for r in self._d._read("batch_list", params)]

    def open_ids(self) -> list[int]:
        return [r[0] for r in self._d._read("batch_open_ids")]

    def job_ids(self, batch_id: int) -> list[int]:
        return [r[0] for r in self._d._read("batch_job_ids", {"id": batch_id})]

    def apply(self, change: BatchApply, conn: Any = None) -> bool:
        try:
            with self._d._write(conn) as db:
                self._apply(db, change)
        except _Stale:
            return False
        return True

    def _apply(self, db: sqlite3.Cursor, change: BatchApply) -> None:
        params = dict(change.status, id=change.batch_id, version=change.version)
        params["finished"] = change.finished
        params["last_failure_at"] = _epoch(params.get("last_failure_at"))
        if db.execute(_Q["batch_update_status"], params).fetchone() is None:
            raise _Stale
        for c in change.items:
            db.execute(
                _Q["batch_item_update"],
                {
                    "batch_id": change.batch_id,
                    "idx": c.index,
                    "state": c.state,
                    "failures": c.failures,
                    "last_failure_at": _epoch(c.last_failure_at),
                    "job_id": c.job_id,
                },
            )
        if change.cancel:
            db.execute(_Q["batch_jobs_cancel"], {"ids": json.dumps(list(change.cancel))}).fetchall()
        if change.start:
            jobs = self._d.job_insert_many([row for _, row in change.start], conn=db.connection)
            for (idx, _), job in zip(change.start, jobs, strict=True):
                link = {"job_id": job.id, "batch_id": change.batch_id, "idx": idx}
                db.execute(_Q["batch_job_link"], link)
                db.execute(_Q["batch_item_start"], link)
        if change.callback is not None:
            (job,) = self._d.job_insert_many([change.callback], conn=db.connection)
            db.execute(_Q["batch_callback_set"], {"id": change.batch_id, "job_id": job.id})

    def set_parallelism(self, batch_id: int, parallelism: int) -> bool:
        with self._d._write() as db:
            params = {"id": batch_id, "parallelism": parallelism}
            return db.execute(_Q["batch_set_parallelism"], params).fetchone() is not None

    def set_suspended(self, batch_id: int, suspended: bool) -> bool:
        with self._d._write() as db:
            params = {"id": batch_id, "suspended": suspended}
            return db.execute(_Q["batch_set_suspended"], params).fetchone() is not None

    def request_cancel(self, batch_id: int, message: str) -> bool:
        with self._d._write() as db:
            params = {"id": batch_id, "message": message}
            return db.execute(_Q["batch_request_cancel"], params).fetchone() is not None

    def prune_expired(self, limit: int) -> int:
        with self._d._write() as db:
            ids = [r[0] for r in db.execute(_Q["batch_expired"], {"limit": limit}).fetchall()]
            if not ids:
                return 0
            db.execute(_Q["batch_prune_jobs"], {"ids": json.dumps(ids)})
            db.execute(_Q["batch_delete"], {"ids": json.dumps(ids)})
            return len(ids)
