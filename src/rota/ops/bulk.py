"""`app.jobs.cancel(...)` and `app.queues.purge(...)`: cancel a filtered selection of jobs
at once, with a dry run that counts what would be taken, a required reason, a permission
check and an audit record (table rota_audit) written in the same transaction."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rota.auth import Permission, Principal
from rota.drivers.database import Row
from rota.errors import ArgumentsError
from rota.job import JobState
from rota.labels import check_queue_name
from rota.ops.principal import resolve

if TYPE_CHECKING:
    from rota.app import App

WAITING = (JobState.SCHEDULED, JobState.AVAILABLE, JobState.RETRYABLE)
CANCELLABLE = (*WAITING, JobState.RUNNING)
MAX_BULK = 100_000
MAX_REASON = 1_000


@dataclass(frozen=True)
class BulkReport:
    """What a bulk cancel or a purge did (or, with dry_run, would do)."""

    action: str  # "cancel" | "purge"
    dry_run: bool
    count: int  # jobs taken (dry run: that would be taken)
    per_task: dict[str, int]
    matched: int  # jobs matching the selection, beyond the limit too
    principal: str
    audit_id: int | None = None  # the audit record; None for a dry run
    job_ids: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "dry_run": self.dry_run,
            "count": self.count,
            "per_task": self.per_task,
            "matched": self.matched,
            "principal": self.principal,
            "audit_id": self.audit_id,
            "job_ids": list(self.job_ids),
        }


@dataclass(frozen=True)
class AuditRecord:
    """One operator action: who, when, what and why."""

    id: int
    created_at: datetime
    principal: str
    action: str
    reason: str
    selection: dict[str, Any]
    count: int
    job_ids: tuple[int, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at.isoformat(),
            "principal": self.principal,
            "action": self.action,
            "reason": self.reason,
            "selection": self.selection,
            "count": self.count,
            "job_ids": list(self.job_ids),
        }


class JobControls:
    """`app.jobs`: bulk cancel and the audit of operator actions."""

    def __init__(self, app: App) -> None:
        self._app = app

    def cancel(
        self,
        *,
        reason: str,
        queue: str | None = None,
        task: str | None = None,
        tenant: str | None = None,
        ids: Iterable[int] | None = None,
        states: Iterable[JobState | str] = WAITING,
        all: bool = False,
        dry_run: bool = False,
        limit: int = 10_000,
        principal: Principal | None = None,
        token: str | None = None,
    ) -> BulkReport:
        """Cancel the oldest `limit` jobs matching every filter given: waiting ones at
        once, running ones (with `states` including "running") are asked to stop. A
        selection with no filter needs `all=True`. `dry_run=True` counts per task and
        changes nothing. Needs the `operate` permission (`token=` or `principal=`)."""
        selection: dict[str, Any] = {
            "queue": queue,
            "task": task,
            "tenant": tenant,
            "ids": None if ids is None else _ids(ids),
            "states": _states(states),
        }
        if queue is not None:
            check_queue_name(queue, ArgumentsError)
        if not all and queue is None and task is None and tenant is None and ids is None:
            raise ArgumentsError(
                "refusing to cancel every job: narrow the selection (queue, task, tenant, "
                "ids) or pass all=True"
            )
        return self._run("cancel", selection, reason, dry_run, limit, principal, token)

    def purge(
        self,
        queue: str,
        *,
        reason: str,
        dry_run: bool = False,
        limit: int = MAX_BULK,
        principal: Principal | None = None,
        token: str | None = None,
    ) -> BulkReport:
        """Cancel every waiting job of `queue` (scheduled, available, retryable); running
        jobs finish. The cancelled rows stay readable until the pruner's retention."""
        check_queue_name(queue, ArgumentsError)
        selection = {
            "queue": queue,
            "task": None,
            "tenant": None,
            "ids": None,
            "states": [str(s) for s in WAITING],
        }
        return self._run("purge", selection, reason, dry_run, limit, principal, token)

    def audit(
        self,
        *,
        action: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
        principal: Principal | None = None,
        token: str | None = None,
    ) -> builtins.list[AuditRecord]:
        """The audit records of purges and bulk cancels, newest first."""
        _check_limit(limit, 10_000)
        resolve(self._app, principal, token, Permission.READ)
        db = self._app.driver.database
        rows = db.query("audit_list", {"action": action, "limit": limit, "before_id": before_id})
        return [_record(row, self._app) for row in rows]

    def _run(
        self,
        action: str,
        selection: dict[str, Any],
        reason: str,
        dry_run: bool,
        limit: int,
        principal: Principal | None,
        token: str | None,
    ) -> BulkReport:
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise ArgumentsError(
                f"a {action} needs a reason (a non-empty string of at most {MAX_REASON} chars)"
            )
        _check_limit(limit, MAX_BULK)
        actor = resolve(
            self._app, principal, token, Permission.READ if dry_run else Permission.OPERATE
        )
        db = self._app.driver.database
        c = db.codec
        params = {
            **selection,
            "states": c.array(selection["states"]),
            "ids": None if selection["ids"] is None else c.array(selection["ids"]),
            "limit": limit,
        }
        if dry_run:
            with db.snapshot() as session:
                counts = {r["task"]: int(r["n"]) for r in session.all("job_bulk_count", params)}
                matched = int(session.value("job_bulk_matched", params) or 0)
            return BulkReport(action, True, sum(counts.values()), counts, matched, actor.describe())
        with db.write() as session:
            matched = int(session.value("job_bulk_matched", params) or 0)
            taken = sorted(
                (int(r["id"]), str(r["task"])) for r in session.all("job_bulk_cancel", params)
            )
            job_ids = [job_id for job_id, _ in taken]
            record = session.one(
                "audit_insert",
                {
                    "principal": actor.describe(),
                    "action": action,
                    "reason": reason.strip(),
                    "selection": json.dumps(selection, separators=(",", ":")),
                    "count": len(taken),
                    "job_ids": json.dumps(job_ids),
                },
            )
            assert record is not None
        per_task: dict[str, int] = {}
        for _, name in taken:
            per_task[name] = per_task.get(name, 0) + 1
        return BulkReport(
            action,
            False,
            len(taken),
            dict(sorted(per_task.items())),
            matched,
            actor.describe(),
            audit_id=int(record["id"]),
            job_ids=tuple(job_ids),
        )


def _record(row: Row, app: App) -> AuditRecord:
    c = app.driver.database.codec
    return AuditRecord(
        id=int(row["id"]),
        created_at=c.instant(row["created_at"]),
        principal=row["principal"],
        action=row["action"],
        reason=row["reason"],
        selection=c.json(row["selection"]) or {},
        count=int(row["count"]),
        job_ids=tuple(c.json(row["job_ids"]) or ()),
    )


def _states(states: Iterable[JobState | str]) -> list[str]:
    if isinstance(states, str):
        states = [states]
    chosen: list[str] = []
    for state in states:
        try:
            value = JobState(state)
        except ValueError:
            value = None
        if value not in CANCELLABLE:
            known = ", ".join(str(s) for s in CANCELLABLE)
            raise ArgumentsError(f"cannot cancel jobs in state {state!r}; states: {known}")
        chosen.append(str(value))
    if not chosen:
        raise ArgumentsError("states must name at least one state")
    return sorted(set(chosen))


def _ids(ids: Iterable[int]) -> list[int]:
    if isinstance(ids, str | bytes):
        raise ArgumentsError("ids must be a list of job ids")
    values = list(ids)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in values):
        raise ArgumentsError("ids must be integers")
    if not values:
        raise ArgumentsError("ids must name at least one job")
    return values


def _check_limit(limit: object, high: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= high:
        raise ArgumentsError(f"limit must be an integer from 1 to {high}, not {limit!r}")
