"""Workflow storage on SQLite: every change is applied in one write transaction, guarded
by the workflow's version (see rota.workflows.records.Advance)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.errors import WorkflowError
from rota.workflows.records import (
    Advance,
    ElementRow,
    ScheduleTick,
    StepRow,
    WorkflowFilter,
    WorkflowNew,
    WorkflowRow,
    WorkflowSnapshot,
)

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


class _Stale(Exception):
    """Rolls a change back: another writer moved the workflow on first."""


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _workflow(row: sqlite3.Row, *, created: bool = True) -> WorkflowRow:
    return WorkflowRow(
        id=row["id"],
        name=row["name"],
        key=row["key"],
        state=row["state"],
        on_failure=row["on_failure"],
        spec=json.loads(row["spec"]),
        args=json.loads(row["args"]),
        version=row["version"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        finished_at=_ts(row["finished_at"]),
        error=row["error"],
        created=created,
    )


def _step(row: sqlite3.Row) -> StepRow:
    return StepRow(
        step=row["step"],
        state=row["state"],
        total=row["total"],
        result=_json(row["result"]),
        error=row["error"],
        started_at=_ts(row["started_at"]),
        finished_at=_ts(row["finished_at"]),
    )


def _element(row: sqlite3.Row) -> ElementRow:
    error_type, message = row["error_type"], row["error_message"]
    job_error = f"{error_type}: {message}" if error_type and message else message or error_type
    return ElementRow(
        step=row["step"],
        index=row["idx"],
        job_id=row["job_id"],
        state=row["state"],
        result=_json(row["result"]),
        error=row["error"],
        job_state=row["job_state"],
        job_result=_json(row["job_result"]),
        job_error=job_error,
        attempt=row["attempt"] or 0,
    )


class SQLiteWorkflowStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    @contextmanager
    def _reading(self, conn: Any) -> Iterator[sqlite3.Connection | sqlite3.Cursor]:
        """The caller's transaction when given (it sees its own writes), else a pooled
        connection for reading."""
        if conn is None:
            with self._d._conn() as own:
                yield own
        else:
            with self._d._write(conn) as cur:
                yield cur

    def create(self, new: WorkflowNew, conn: Any = None) -> WorkflowRow:
        params = {
            "name": new.name,
            "key": new.key,
            "on_failure": new.on_failure,
            "spec": new.spec_json,
            "args": new.args_json,
        }
        with self._d._write(conn) as db:
            row = db.execute(_Q["workflow_insert"], params).fetchone()
            if row is None:
                existing = db.execute(_Q["workflow_get_by_key"], {"key": new.key}).fetchone()
                return _workflow(existing, created=False)
            created = _workflow(row)
            db.executemany(
                _Q["workflow_step_insert"],
                [
                    {"workflow_id": created.id, "step": step, "position": i}
                    for i, step in enumerate(new.steps)
                ],
            )
        return created

    def advance(self, change: Advance, conn: Any = None) -> bool:
        try:
            with self._d._write(conn) as db:
                self._apply(db, change)
        except _Stale:
            if conn is not None:
                # Half of the change may be in the caller's transaction: it must not commit.
                raise WorkflowError(
                    f"workflow {change.workflow_id} changed while this transaction wrote to "
                    "it: roll back and try again"
                ) from None
            return False
        return True

    def _apply(self, db: sqlite3.Cursor, change: Advance) -> None:
        wid = change.workflow_id
        bumped = db.execute(
            _Q["workflow_bump"],
            {"id": wid, "version": change.version, "state": change.state, "error": change.error},
        ).fetchone()
        if bumped is None:
            raise _Stale
        for update in change.steps:
            db.execute(
                _Q["workflow_step_update"],
                {
                    "workflow_id": wid,
                    "step": update.step,
                    "state": update.state,
                    "total": update.total,
                    "result": update.result_json,
                    "error": update.error,
                },
            )
        for element in change.elements:
            db.execute(
                _Q["workflow_job_update"],
                {
                    "workflow_id": wid,
                    "step": element.step,
                    "idx": element.index,
                    "state": element.state,
                    "result": element.result_json,
                    "error": element.error,
                },
            )
        if change.inserts:
            jobs = self._d.job_insert_many([i.job for i in change.inserts], conn=db.connection)
            for insert, job in zip(change.inserts, jobs, strict=True):
                linked = db.execute(
                    _Q["workflow_job_insert"],
                    {
                        "workflow_id": wid,
                        "step": insert.step,
                        "idx": insert.index,
                        "job_id": job.id,
                    },
                ).fetchone()
                if linked is None:
                    raise _Stale  # the element exists: its job was inserted before
        for job_id in change.cancel_jobs:
            db.execute(_Q["workflow_job_cancel"], {"id": job_id}).fetchall()
        for retry in change.retry_jobs:
            db.execute(
                _Q["workflow_job_retry"], {"id": retry.job_id, "budget": retry.budget}
            ).fetchall()

    def find(self, ref: int | str, conn: Any = None) -> WorkflowSnapshot | None:
        with self._reading(conn) as db:
            if isinstance(ref, int):
                row = db.execute(_Q["workflow_get"], {"id": ref}).fetchone()
            else:
                row = db.execute(_Q["workflow_get_by_key"], {"key": ref}).fetchone()
            if row is None:
                return None
            return self._snapshots(db, [_workflow(row)], elements=True, running_only=False)[0]

    def search(self, where: WorkflowFilter) -> Sequence[WorkflowSnapshot]:
        params = {
            "states": json.dumps(list(where.states)) if where.states else None,
            "name": where.name,
            "before_id": where.before_id,
            "limit": where.limit,
        }
        with self._d._conn() as db:
            rows = [_workflow(r) for r in db.execute(_Q["workflow_list"], params)]
            return self._snapshots(db, rows, elements=False, running_only=False)

    def running(self, limit: int, after: int = 0) -> Sequence[WorkflowSnapshot]:
        with self._d._conn() as db:
            # One read transaction: the steps and jobs agree with the versions read.
            db.execute("BEGIN")
            try:
                rows = [
                    _workflow(r)
                    for r in db.execute(
                        _Q["workflow_list_running"], {"limit": limit, "after": after}
                    )
                ]
                return self._snapshots(db, rows, elements=True, running_only=True)
            finally:
                db.execute("COMMIT")

    def _snapshots(
        self,
        db: sqlite3.Connection | sqlite3.Cursor,
        rows: list[WorkflowRow],
        *,
        elements: bool,
        running_only: bool,
    ) -> list[WorkflowSnapshot]:
        if not rows:
            return []
        ids = json.dumps([r.id for r in rows])
        steps: dict[int, dict[str, StepRow]] = {r.id: {} for r in rows}
        for row in db.execute(_Q["workflow_step_list"], {"ids": ids}):
            steps[row["workflow_id"]][row["step"]] = _step(row)
        found: dict[int, list[ElementRow]] = {r.id: [] for r in rows}
        if elements:
            params = {"ids": ids, "running_only": 1 if running_only else 0}
            for row in db.execute(_Q["workflow_job_list"], params):
                found[row["workflow_id"]].append(_element(row))
        return [WorkflowSnapshot(r, steps[r.id], tuple(found[r.id])) for r in rows]

    def prune(self, completed_age: float, failed_age: float, limit: int) -> int:
        params = {"completed_age": completed_age, "failed_age": failed_age, "limit": limit}
        with self._d._write() as db:
            return db.execute(_Q["workflow_prune_finished"], params).rowcount

    def tick_of_job(self, job_id: int) -> ScheduleTick | None:
        rows = self._d._read("workflow_tick_of_job", {"job_id": job_id})
        if not rows:
            return None
        row = rows[0]
        return ScheduleTick(row["schedule"], row["run"], row["kind"], row["scheduled_local"])
