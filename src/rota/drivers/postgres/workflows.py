"""Workflow storage on PostgreSQL: every change is applied in one transaction, guarded by
the workflow's version (see rota.workflows.records.Advance)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg

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
    from rota.drivers.postgres.driver import PostgresDriver

_Q = queries.load("postgres")
Cursor = psycopg.Cursor[dict[str, Any]]


class _Stale(Exception):
    """Rolls a change back: another writer moved the workflow on first."""


def _workflow(row: dict[str, Any], *, created: bool = True) -> WorkflowRow:
    return WorkflowRow(
        id=row["id"],
        name=row["name"],
        key=row["key"],
        state=row["state"],
        on_failure=row["on_failure"],
        spec=row["spec"],
        args=row["args"],
        version=row["version"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        error=row["error"],
        created=created,
    )


def _step(row: dict[str, Any]) -> StepRow:
    return StepRow(
        step=row["step"],
        state=row["state"],
        total=row["total"],
        result=row["result"],
        error=row["error"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def _element(row: dict[str, Any]) -> ElementRow:
    error_type, message = row["error_type"], row["error_message"]
    job_error = f"{error_type}: {message}" if error_type and message else message or error_type
    return ElementRow(
        step=row["step"],
        index=row["idx"],
        job_id=row["job_id"],
        state=row["state"],
        result=row["result"],
        error=row["error"],
        job_state=row["job_state"],
        job_result=row["job_result"],
        job_error=job_error,
        attempt=row["attempt"] or 0,
    )


class PostgresWorkflowStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def create(self, new: WorkflowNew, conn: Any = None) -> WorkflowRow:
        params = {
            "name": new.name,
            "key": new.key,
            "on_failure": new.on_failure,
            "spec": new.spec_json,
            "args": new.args_json,
        }
        with self._d._tx(conn) as cur:
            cur.execute(_Q["workflow_insert"], params)
            row = cur.fetchone()
            if row is None:
                cur.execute(_Q["workflow_get_by_key"], {"key": new.key})
                existing = cur.fetchone()
                if existing is None:
                    # The key's holder was inserted by a transaction that has not committed.
                    raise WorkflowError(
                        f"workflow key {new.key!r} is being used by another transaction now; retry"
                    )
                return _workflow(existing, created=False)
            created = _workflow(row)
            cur.executemany(
                _Q["workflow_step_insert"],
                [
                    {"workflow_id": created.id, "step": step, "position": i}
                    for i, step in enumerate(new.steps)
                ],
            )
        return created

    def advance(self, change: Advance, conn: Any = None) -> bool:
        try:
            with self._d._tx(conn) as cur:
                self._apply(cur, change)
        except _Stale:
            if conn is not None:
                # Half of the change may be in the caller's transaction: it must not commit.
                raise WorkflowError(
                    f"workflow {change.workflow_id} changed while this transaction wrote to "
                    "it: roll back and try again"
                ) from None
            return False
        return True

    def _apply(self, cur: Cursor, change: Advance) -> None:
        wid = change.workflow_id
        cur.execute(
            _Q["workflow_bump"],
            {"id": wid, "version": change.version, "state": change.state, "error": change.error},
        )
        if cur.fetchone() is None:
            raise _Stale
        if change.steps:
            cur.executemany(
                _Q["workflow_step_update"],
                [
                    {
                        "workflow_id": wid,
                        "step": u.step,
                        "state": u.state,
                        "total": u.total,
                        "result": u.result_json,
                        "error": u.error,
                    }
                    for u in change.steps
                ],
            )
        if change.elements:
            cur.executemany(
                _Q["workflow_job_update"],
                [
                    {
                        "workflow_id": wid,
                        "step": e.step,
                        "idx": e.index,
                        "state": e.state,
                        "result": e.result_json,
                        "error": e.error,
                    }
                    for e in change.elements
                ],
            )
        if change.inserts:
            jobs = self._d.job_insert_many([i.job for i in change.inserts], conn=cur.connection)
            cur.executemany(
                _Q["workflow_job_insert"],
                [
                    {"workflow_id": wid, "step": i.step, "idx": i.index, "job_id": job.id}
                    for i, job in zip(change.inserts, jobs, strict=True)
                ],
                returning=True,
            )
            linked = 0
            while True:
                linked += len(cur.fetchall())
                if not cur.nextset():
                    break
            if linked != len(change.inserts):
                raise _Stale  # an element exists: its job was inserted before
        for job_id in change.cancel_jobs:
            cur.execute(_Q["workflow_job_cancel"], {"id": job_id})
        for retry in change.retry_jobs:
            cur.execute(_Q["workflow_job_retry"], {"id": retry.job_id, "budget": retry.budget})

    def find(self, ref: int | str, conn: Any = None) -> WorkflowSnapshot | None:
        with self._d._tx(conn) as cur:
            if isinstance(ref, int):
                cur.execute(_Q["workflow_get"], {"id": ref})
            else:
                cur.execute(_Q["workflow_get_by_key"], {"key": ref})
            row = cur.fetchone()
            if row is None:
                return None
            return self._snapshots(cur, [_workflow(row)], elements=True, running_only=False)[0]

    def search(self, where: WorkflowFilter) -> Sequence[WorkflowSnapshot]:
        params = {
            "states": list(where.states),
            "name": where.name,
            "before_id": where.before_id,
            "limit": where.limit,
        }
        with self._d._tx() as cur:
            cur.execute(_Q["workflow_list"], params)
            rows = [_workflow(r) for r in cur.fetchall()]
            return self._snapshots(cur, rows, elements=False, running_only=False)

    def running(self, limit: int, after: int = 0) -> Sequence[WorkflowSnapshot]:
        # REPEATABLE READ: the steps and jobs read agree with the versions read.
        with self._d._conn() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cur.execute(_Q["workflow_list_running"], {"limit": limit, "after": after})
            rows = [_workflow(r) for r in cur.fetchall()]
            return self._snapshots(cur, rows, elements=True, running_only=True)

    def _snapshots(
        self, cur: Cursor, rows: list[WorkflowRow], *, elements: bool, running_only: bool
    ) -> list[WorkflowSnapshot]:
        if not rows:
            return []
        ids = [r.id for r in rows]
        steps: dict[int, dict[str, StepRow]] = {r.id: {} for r in rows}
        cur.execute(_Q["workflow_step_list"], {"ids": ids})
        for row in cur.fetchall():
            steps[row["workflow_id"]][row["step"]] = _step(row)
        found: dict[int, list[ElementRow]] = {r.id: [] for r in rows}
        if elements:
            cur.execute(_Q["workflow_job_list"], {"ids": ids, "running_only": running_only})
            for row in cur.fetchall():
                found[row["workflow_id"]].append(_element(row))
        return [WorkflowSnapshot(r, steps[r.id], tuple(found[r.id])) for r in rows]

    def prune(self, completed_age: float, failed_age: float, limit: int) -> int:
        params = {"completed_age": float(completed_age), "failed_age": float(failed_age)}
        with self._d._tx() as cur:
            cur.execute(_Q["workflow_prune_finished"], {**params, "limit": limit})
            return cur.rowcount

    def tick_of_job(self, job_id: int) -> ScheduleTick | None:
        rows = self._d._rows("workflow_tick_of_job", {"job_id": job_id})
        if not rows:
            return None
        row = rows[0]
        return ScheduleTick(row["schedule"], row["run"], row["kind"], row["scheduled_local"])
