"""Workflow storage, written once over the dialect seam (SQL: drivers/<dialect>/queries/
workflow.sql): every change is applied in one transaction, guarded by the workflow's
version (see rota.workflows.records.Advance). Writes with `conn` join the caller's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rota.drivers.base import Driver
from rota.drivers.database import Row, Session
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


class _Stale(Exception):
    """Rolls a change back: another writer moved the workflow on first."""


class WorkflowStore:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._db = driver.database

    # --- rows -----------------------------------------------------------------------------

    def _workflow(self, row: Row, *, created: bool = True) -> WorkflowRow:
        c = self._db.codec
        return WorkflowRow(
            id=row["id"],
            name=row["name"],
            key=row["key"],
            state=row["state"],
            on_failure=row["on_failure"],
            spec=c.json(row["spec"]),
            args=c.json(row["args"]),
            version=row["version"],
            created_at=c.instant(row["created_at"]),
            finished_at=c.time(row["finished_at"]),
            error=row["error"],
            created=created,
        )

    def _step(self, row: Row) -> StepRow:
        c = self._db.codec
        return StepRow(
            step=row["step"],
            state=row["state"],
            total=row["total"],
            result=c.json(row["result"]),
            error=row["error"],
            started_at=c.time(row["started_at"]),
            finished_at=c.time(row["finished_at"]),
        )

    def _element(self, row: Row) -> ElementRow:
        c = self._db.codec
        error_type, message = row["error_type"], row["error_message"]
        job_error = f"{error_type}: {message}" if error_type and message else message or error_type
        return ElementRow(
            step=row["step"],
            index=row["idx"],
            job_id=row["job_id"],
            state=row["state"],
            result=c.json(row["result"]),
            error=row["error"],
            job_state=row["job_state"],
            job_result=c.json(row["job_result"]),
            job_error=job_error,
            attempt=row["attempt"] or 0,
        )

    # --- writes ---------------------------------------------------------------------------

    def create(self, new: WorkflowNew, conn: object = None) -> WorkflowRow:
        params = {
            "name": new.name,
            "key": new.key,
            "on_failure": new.on_failure,
            "spec": new.spec_json,
            "args": new.args_json,
        }
        with self._db.write(conn) as session:
            row = session.one("workflow_insert", params)
            if row is None:
                existing = session.one("workflow_get_by_key", {"key": new.key})
                if existing is None:
                    # The key's holder was inserted by a transaction that has not committed.
                    raise WorkflowError(
                        f"workflow key {new.key!r} is being used by another transaction now; retry"
                    )
                return self._workflow(existing, created=False)
            created = self._workflow(row)
            session.many(
                "workflow_step_insert",
                [
                    {"workflow_id": created.id, "step": step, "position": i}
                    for i, step in enumerate(new.steps)
                ],
            )
        return created

    def advance(self, change: Advance, conn: object = None) -> bool:
        """Apply one change; False (nothing written) when another writer moved the
        workflow first."""
        try:
            with self._db.write(conn) as session:
                self._apply(session, change)
        except _Stale:
            if conn is not None:
                # Half of the change may be in the caller's transaction: it must not commit.
                raise WorkflowError(
                    f"workflow {change.workflow_id} changed while this transaction wrote to "
                    "it: roll back and try again"
                ) from None
            return False
        return True

    def _apply(self, session: Session[Any], change: Advance) -> None:
        wid = change.workflow_id
        bump = {"id": wid, "version": change.version, "state": change.state, "error": change.error}
        if session.one("workflow_bump", bump) is None:
            raise _Stale
        session.many(
            "workflow_step_update",
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
        session.many(
            "workflow_job_update",
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
            jobs = self._driver.job_insert_many(
                [i.job for i in change.inserts], conn=session.connection
            )
            links = self._db.codec.columns(
                "e",
                ("step", "idx", "job_id"),
                [(i.step, i.index, job.id) for i, job in zip(change.inserts, jobs, strict=True)],
            )
            linked = session.all("workflow_job_insert", {"workflow_id": wid, **links})
            if len(linked) != len(change.inserts):
                raise _Stale  # an element exists: its job was inserted before
        for job_id in change.cancel_jobs:
            session.all("workflow_job_cancel", {"id": job_id})
        for retry in change.retry_jobs:
            session.all("workflow_job_retry", {"id": retry.job_id, "budget": retry.budget})

    def prune(self, completed_age: float, failed_age: float, limit: int) -> int:
        """Delete up to `limit` finished runs past their retention (by end state)."""
        params = {
            "completed_age": float(completed_age),
            "failed_age": float(failed_age),
            "limit": limit,
        }
        with self._db.write() as session:
            return session.count("workflow_prune_finished", params)

    # --- reads ----------------------------------------------------------------------------

    def find(self, ref: int | str, conn: object = None) -> WorkflowSnapshot | None:
        with self._db.read(conn) as session:
            if isinstance(ref, int):
                row = session.one("workflow_get", {"id": ref})
            else:
                row = session.one("workflow_get_by_key", {"key": ref})
            if row is None:
                return None
            found = [self._workflow(row)]
            return self._snapshots(session, found, elements=True, running_only=False)[0]

    def search(self, where: WorkflowFilter) -> Sequence[WorkflowSnapshot]:
        params = {
            "states": self._db.codec.array(list(where.states)),
            "name": where.name,
            "before_id": where.before_id,
            "limit": where.limit,
        }
        with self._db.read() as session:
            rows = [self._workflow(r) for r in session.all("workflow_list", params)]
            return self._snapshots(session, rows, elements=False, running_only=False)

    def running(self, limit: int, after: int = 0) -> Sequence[WorkflowSnapshot]:
        # One snapshot: the steps and jobs read agree with the versions read.
        with self._db.snapshot() as session:
            params = {"limit": limit, "after": after}
            rows = [self._workflow(r) for r in session.all("workflow_list_running", params)]
            return self._snapshots(session, rows, elements=True, running_only=True)

    def _snapshots(
        self, session: Session[Any], rows: list[WorkflowRow], *, elements: bool, running_only: bool
    ) -> list[WorkflowSnapshot]:
        if not rows:
            return []
        ids = self._db.codec.array([r.id for r in rows])
        steps: dict[int, dict[str, StepRow]] = {r.id: {} for r in rows}
        for row in session.all("workflow_step_list", {"ids": ids}):
            steps[row["workflow_id"]][row["step"]] = self._step(row)
        found: dict[int, list[ElementRow]] = {r.id: [] for r in rows}
        if elements:
            params = {"ids": ids, "running_only": running_only}
            for row in session.all("workflow_job_list", params):
                found[row["workflow_id"]].append(self._element(row))
        return [WorkflowSnapshot(r, steps[r.id], tuple(found[r.id])) for r in rows]

    def tick_of_job(self, job_id: int) -> ScheduleTick | None:
        """The cron run that enqueued `job_id` (None: it was not enqueued by a schedule)."""
        rows = self._db.query("workflow_tick_of_job", {"job_id": job_id})
        if not rows:
            return None
        row = rows[0]
        return ScheduleTick(row["schedule"], row["run"], row["kind"], row["scheduled_local"])
