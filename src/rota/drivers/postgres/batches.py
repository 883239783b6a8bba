"""Batch storage on PostgreSQL: batches, their indexes and the jobs they started."""

from __future__ import annotations

import json
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
    import psycopg

    from rota.drivers.postgres.driver import PostgresDriver

_Q = queries.load("postgres")


class _Stale(Exception):
    """Rolls a pass back: the batch changed since the controller read it."""


def _record(row: dict[str, Any], *, created: bool = True) -> BatchRecord:
    return BatchRecord(
        id=row["id"],
        name=row["name"],
        task=row["task"],
        queue=row["queue"],
        priority=row["priority"],
        args_json=row["args_text"],
        spec=json.loads(row["spec_text"]),
        parallelism=row["parallelism"],
        suspended=row["suspended"],
        version=row["version"],
        succeeded=row["succeeded"],
        failed=row["failed"],
        ignored=row["ignored"],
        fails_since_success=row["fails_since_success"],
        created_at=row["created_at"],
        last_failure_at=row["last_failure_at"],
        interim=row["interim"],
        interim_reason=row["interim_reason"],
        interim_message=row["interim_message"],
        condition=row["condition"],
        reason=row["reason"],
        message=row["message"],
        start_time=row["start_time"],
        completion_time=row["completion_time"],
        finished_at=row["finished_at"],
        on_finish=row["on_finish"],
        on_finish_queue=row["on_finish_queue"],
        on_finish_priority=row["on_finish_priority"],
        on_finish_max_attempts=row["on_finish_max_attempts"],
        callback_job_id=row["callback_job_id"],
        active=int(row["active"]),
        created=created,
    )


def _item(row: dict[str, Any]) -> BatchItemRecord:
    state = row["job_state"]
    return BatchItemRecord(
        index=row["idx"],
        state=row["state"],
        failures=row["failures"],
        last_failure_at=row["last_failure_at"],
        job_id=row["job_id"],
        args_json=row["args"],
        job_state=None if state is None else JobState(state),
        cancel_requested=bool(row["cancel_requested"]),
        job_finished_at=row["job_finished_at"],
        error_type=row["error_type"],
        error_message=row["error_message"],
        condition=row["condition"],
        reason=row["reason"],
    )


class PostgresBatchStore:
    def __init__(self, driver: PostgresDriver) -> None:
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
        with self._d._tx(conn) as cur:
            cur.execute(_Q["batch_insert"], params)
            inserted = cur.fetchone()
            if inserted is None:
                cur.execute(_Q["batch_get_by_name"], {"name": row.name})
                existing = cur.fetchone()
                assert existing is not None
                return _record(existing, created=False)
            args = list(row.item_args) if row.item_args is not None else [None] * row.completions
            cur.execute(_Q["batch_item_insert_many"], {"batch_id": inserted["id"], "args": args})
            cur.execute(_Q["batch_get"], {"id": inserted["id"]})
            created = cur.fetchone()
            assert created is not None
            return _record(created)

    def get(self, ref: int | str, conn: Any = None) -> BatchRecord | None:
        with self._d._tx(conn, single=conn is None) as cur:
            if isinstance(ref, int):
                cur.execute(_Q["batch_get"], {"id": ref})
            else:
                cur.execute(_Q["batch_get_by_name"], {"name": ref})
            row = cur.fetchone()
        return None if row is None else _record(row)

    def items(self, batch_id: int, conn: Any = None) -> list[BatchItemRecord]:
        with self._d._tx(conn, single=conn is None) as cur:
            cur.execute(_Q["batch_items"], {"id": batch_id})
            return [_item(r) for r in cur.fetchall()]

    def all(self, where: BatchFilter) -> list[BatchRecord]:
        params = {"open_only": where.open_only, "task": where.task, "limit": where.limit}
        return [_record(r) for r in self._d._rows("batch_list", params)]

    def open_ids(self) -> list[int]:
        return [r["id"] for r in self._d._rows("batch_open_ids")]

    def job_ids(self, batch_id: int) -> list[int]:
        return [r["job_id"] for r in self._d._rows("batch_job_ids", {"id": batch_id})]

    def apply(self, change: BatchApply, conn: Any = None) -> bool:
        try:
            with self._d._tx(conn) as cur:
                self._apply(cur, change)
        except _Stale:
            return False
        return True

    def _apply(self, cur: psycopg.Cursor[dict[str, Any]], change: BatchApply) -> None:
        params = dict(change.status, id=change.batch_id, version=change.version)
        params["finished"] = change.finished
        cur.execute(_Q["batch_update_status"], params)
        if cur.fetchone() is None:
            raise _Stale
        if change.items:
            cur.executemany(
                _Q["batch_item_update"],
                [
                    {
                        "batch_id": change.batch_id,
                        "idx": c.index,
                        "state": c.state,
                        "failures": c.failures,
                        "last_failure_at": c.last_failure_at,
                        "job_id": c.job_id,
                    }
                    for c in change.items
                ],
            )
        if change.cancel:
            cur.execute(_Q["batch_jobs_cancel"], {"ids": list(change.cancel)})
        if change.start:
            jobs = self._d.job_insert_many([row for _, row in change.start], conn=cur.connection)
            links = [
                {"job_id": job.id, "batch_id": change.batch_id, "idx": idx}
                for (idx, _), job in zip(change.start, jobs, strict=True)
            ]
            cur.executemany(_Q["batch_job_link"], links)
            cur.executemany(_Q["batch_item_start"], links)
        if change.callback is not None:
            (job,) = self._d.job_insert_many([change.callback], conn=cur.connection)
            cur.execute(_Q["batch_callback_set"], {"id": change.batch_id, "job_id": job.id})

    def set_parallelism(self, batch_id: int, parallelism: int) -> bool:
        params = {"id": batch_id, "parallelism": parallelism}
        return bool(self._d._rows("batch_set_parallelism", params))

    def set_suspended(self, batch_id: int, suspended: bool) -> bool:
        params = {"id": batch_id, "suspended": suspended}
        return bool(self._d._rows("batch_set_suspended", params))

    def request_cancel(self, batch_id: int, message: str) -> bool:
        params = {"id": batch_id, "message": message}
        return bool(self._d._rows("batch_request_cancel", params))

    def prune_expired(self, limit: int) -> int:
        with self._d._tx() as cur:
            cur.execute(_Q["batch_expired"], {"limit": limit})
            ids = [r["id"] for r in cur.fetchall()]
            if not ids:
                return 0
            cur.execute(_Q["batch_prune_jobs"], {"ids": ids})
            cur.execute(_Q["batch_delete"], {"ids": ids})
            return len(ids)
