"""Dead letters (app.dlq): discarded jobs with their attempt history, retry of one job,
governed replay of a bounded selection (dry run first; audited) and dismissal. Listing
needs DLQ_READ; replay needs REPLAY (a dry run only DLQ_READ); retry and dismiss OPERATE."""

from __future__ import annotations

from typing import Any

from rota.auth import Permission
from rota.job import JobState
from rota.web import visibility
from rota.web.api import Api, Call
from rota.web.models import (
    DeadLetterQuery,
    DismissBody,
    DismissOut,
    HistoryQuery,
    JobOut,
    JobPath,
    ReplayBody,
    ReplayOut,
    ReplayRecordOut,
)
from rota.web.problems import Problem

_SELECTION = ("task", "queue", "error_type", "text", "since", "until")


def register(api: Api) -> None:
    api.tags["dead-letters"] = "Discarded jobs: list, retry, governed replay, dismiss."

    @api.route(
        "GET",
        "/api/dead-letters",
        permission=Permission.DLQ_READ,
        summary="List dead letters",
        tag="dead-letters",
        query=DeadLetterQuery,
        response=JobOut,
        many=True,
    )
    def list_dead_letters(call: Call) -> list[JobOut]:
        """Discarded jobs, newest first, each with its attempt history. Filters: task,
        queue, error type, text of the last error, when it was discarded."""
        q: DeadLetterQuery = call.query
        selection: dict[str, Any] = {k: getattr(q, k) for k in _SELECTION}
        if q.id is not None:
            selection["ids"] = [q.id]
        jobs = call.app.dlq.list(
            selection, limit=q.limit, before_id=q.before_id, principal=call.principal
        )
        return [visibility.job_out(j, call.principal) for j in jobs]

    @api.route(
        "POST",
        "/api/dead-letters/{job_id}/retry",
        permission=Permission.OPERATE,
        summary="Retry a dead letter",
        tag="dead-letters",
        path_model=JobPath,
        response=JobOut,
        errors=(404, 409),
    )
    def retry_dead_letter(call: Call) -> JobOut:
        """Put one discarded job back in its queue now, with one more attempt (as
        `rota jobs retry`). For many at once, use a governed replay."""
        job = call.app.get_job(call.path.job_id)
        if job is None or job.state is not JobState.DISCARDED:
            raise Problem(404, f"job {call.path.job_id} is not a dead letter", kind="not-found")
        return visibility.job_out(call.app.retry_job(job.id), call.principal)

    @api.route(
        "POST",
        "/api/dead-letters/replay",
        permission=Permission.DLQ_READ,
        summary="Replay dead letters (governed)",
        tag="dead-letters",
        body=ReplayBody,
        response=ReplayOut,
    )
    def replay_dead_letters(call: Call) -> ReplayOut:
        """Replay a bounded selection with a reason, optionally paced (`rate` jobs per
        second). `dry_run: true` counts what would be replayed and changes nothing (needs
        dlq_read); a real replay needs the replay permission and is kept in the audit log.
        Replayed jobs are no longer dead letters, so repeating a replay adds nothing."""
        b: ReplayBody = call.body
        selection: dict[str, Any] = {k: getattr(b, k) for k in _SELECTION}
        if b.ids is not None:
            selection["ids"] = b.ids
        if b.all:
            selection["all"] = True
        report = call.app.dlq.replay(
            selection,
            reason=b.reason,
            rate=b.rate,
            dry_run=b.dry_run,
            limit=b.limit,
            attempts=b.attempts,
            principal=call.principal,
        )
        return ReplayOut.model_validate(report.to_json())

    @api.route(
        "POST",
        "/api/dead-letters/dismiss",
        permission=Permission.OPERATE,
        summary="Dismiss dead letters",
        tag="dead-letters",
        body=DismissBody,
        response=DismissOut,
    )
    def dismiss_dead_letters(call: Call) -> DismissOut:
        """Give up on dead letters without running them: they become cancelled, with who
        and why kept in their meta."""
        b: DismissBody = call.body
        done = call.app.dlq.dismiss(b.ids, reason=b.reason, principal=call.principal)
        return DismissOut(dismissed=list(done))

    @api.route(
        "GET",
        "/api/dead-letters/replays",
        permission=Permission.DLQ_READ,
        summary="Replay audit log",
        tag="dead-letters",
        query=HistoryQuery,
        response=ReplayRecordOut,
        many=True,
    )
    def list_replays(call: Call) -> list[ReplayRecordOut]:
        """Past replays, newest first: who, when, why, the selection and the job ids."""
        records = call.app.dlq.replays(limit=call.query.limit, principal=call.principal)
        return [ReplayRecordOut.model_validate(r.to_json()) for r in records]
