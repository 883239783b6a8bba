"""Jobs in bulk over HTTP (app.queues.purge, app.jobs.cancel): a dry run (read) counts what
would be cancelled; the action itself needs the operate permission and leaves an audit
record, listed by GET /api/audit."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from rota.auth import Permission
from rota.ops.bulk import MAX_BULK
from rota.web.api import Api, Call
from rota.web.models import JobId, Name, NamePath, Reason, Strict, Text

State = Literal["scheduled", "available", "retryable", "running"]


def _waiting() -> list[State]:
    return ["scheduled", "available", "retryable"]


class PurgeBody(Strict):
    """Why, and whether to only count (`dry_run`) what would be cancelled."""

    reason: Reason
    dry_run: bool = False
    limit: int = Field(MAX_BULK, ge=1, le=MAX_BULK)


class CancelBody(Strict):
    """A selection (every filter given must match; `all` when none is given), why, and
    whether to only count it (`dry_run`)."""

    queue: Name | None = None
    task: Text | None = None
    tenant: Name | None = None
    ids: list[JobId] | None = Field(None, min_length=1, max_length=10_000)
    states: list[State] = Field(
        default_factory=_waiting,
        min_length=1,
        description="Running jobs are asked to stop.",
    )
    all: bool = Field(False, description="Allow a selection with no filter.")
    reason: Reason
    dry_run: bool = False
    limit: int = Field(10_000, ge=1, le=MAX_BULK)


class BulkOut(BaseModel):
    action: str
    dry_run: bool
    count: int
    matched: int
    per_task: dict[str, int]
    principal: str
    audit_id: int | None
    job_ids: list[int]


class AuditQuery(Strict):
    action: Literal["purge", "cancel"] | None = None
    limit: int = Field(50, ge=1, le=500)


class AuditOut(BaseModel):
    id: int
    created_at: datetime
    principal: str
    action: str
    reason: str
    selection: dict[str, Any]
    count: int
    job_ids: list[int]


def register(api: Api) -> None:
    @api.route(
        "POST",
        "/api/queues/{name}/purge",
        permission=Permission.READ,
        summary="Purge a queue",
        tag="queues",
        path_model=NamePath,
        body=PurgeBody,
        response=BulkOut,
    )
    def purge_queue(call: Call) -> BulkOut:
        """Cancel every waiting job of the queue (running ones finish). `dry_run: true`
        counts them per task and changes nothing; the purge itself needs operate and is
        kept in the audit log."""
        b: PurgeBody = call.body
        report = call.app.queues.purge(
            call.path.name,
            reason=b.reason,
            dry_run=b.dry_run,
            limit=b.limit,
            principal=call.principal,
        )
        return BulkOut.model_validate(report.to_json())

    @api.route(
        "POST",
        "/api/jobs/cancel",
        permission=Permission.READ,
        summary="Cancel jobs in bulk",
        tag="jobs",
        body=CancelBody,
        response=BulkOut,
    )
    def cancel_jobs(call: Call) -> BulkOut:
        """Cancel the oldest `limit` jobs matching every filter given (running ones are
        asked to stop). `dry_run: true` counts them per task and changes nothing; the
        cancel itself needs operate and is kept in the audit log."""
        b: CancelBody = call.body
        report = call.app.jobs.cancel(
            queue=b.queue,
            task=b.task,
            tenant=b.tenant,
            ids=b.ids,
            states=b.states,
            all=b.all,
            reason=b.reason,
            dry_run=b.dry_run,
            limit=b.limit,
            principal=call.principal,
        )
        return BulkOut.model_validate(report.to_json())

    @api.route(
        "GET",
        "/api/audit",
        permission=Permission.READ,
        summary="Audit log of bulk actions",
        tag="jobs",
        query=AuditQuery,
        response=AuditOut,
        many=True,
    )
    def list_audit(call: Call) -> list[AuditOut]:
        """Queue purges and bulk cancels, newest first: who, when, why, the selection
        and the job ids."""
        q: AuditQuery = call.query
        records = call.app.jobs.audit(action=q.action, limit=q.limit, principal=call.principal)
        return [AuditOut.model_validate(r.to_json()) for r in records]
