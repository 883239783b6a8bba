"""Jobs: search, one job with its steps, enqueue, retry and cancel."""

from __future__ import annotations

from dataclasses import replace

from rota.auth import Permission
from rota.errors import JobNotFoundError
from rota.job import Job
from rota.web import visibility
from rota.web.api import Api, Call
from rota.web.models import EnqueueBody, JobOut, JobPath, JobQuery
from rota.web.problems import Problem
from rota.web.records import JobSearch
from rota.web.store import WebStore


def _search(call: Call, where: JobSearch) -> list[Job]:
    if where.q is not None and not visibility.sees_payload(call.principal):
        # Without dlq_read, `q` must not match text in the arguments: the result would
        # tell a viewer what a job's arguments contain, one guess at a time. It still
        # finds a job by its id, its idempotency key or its task.
        where = replace(where, args=False)
    found: list[Job] = WebStore(call.app.driver).job_search(where)
    return found


def register(api: Api) -> None:
    api.tags["jobs"] = "Search, inspect, enqueue, retry and cancel jobs."

    @api.route(
        "GET",
        "/api/jobs",
        permission=Permission.READ,
        summary="Search jobs",
        tag="jobs",
        query=JobQuery,
        response=JobOut,
        many=True,
    )
    def search_jobs(call: Call) -> list[JobOut]:
        """Jobs newest first. `q` matches an id, an idempotency key, a task name or text
        in the arguments; the other parameters narrow the result."""
        q: JobQuery = call.query
        if q.text is not None and not visibility.sees_payload(call.principal):
            raise Problem(
                403,
                f"{call.principal.name} (role {call.principal.role}) lacks the 'dlq_read' "
                "permission: searching the arguments needs it",
                kind="forbidden",
            )
        where = JobSearch(
            q=q.q,
            id=q.id,
            key=q.key,
            task=q.task,
            queue=q.queue,
            tenant=q.tenant,
            states=tuple(str(s) for s in q.state),
            text=q.text,
            before_id=q.before_id,
            limit=q.limit,
        )
        return [visibility.job_out(j, call.principal) for j in _search(call, where)]

    @api.route(
        "GET",
        "/api/jobs/{job_id}",
        permission=Permission.READ,
        summary="Show a job",
        tag="jobs",
        path_model=JobPath,
        response=JobOut,
        errors=(404,),
    )
    def get_job(call: Call) -> JobOut:
        """One job with its attempt history (errors and tracebacks), its checkpoint and
        the results of its durable steps (those need dlq_read)."""
        job = call.app.get_job(call.path.job_id)
        if job is None:
            raise JobNotFoundError(f"no job with id {call.path.job_id}")
        steps = call.app.driver.step_list(job.id)
        return visibility.job_out(job, call.principal, steps=steps)

    @api.route(
        "POST",
        "/api/jobs",
        permission=Permission.ENQUEUE,
        summary="Enqueue a job",
        tag="jobs",
        body=EnqueueBody,
        response=JobOut,
        status=201,
    )
    def enqueue_job(call: Call) -> JobOut:
        """Enqueue a job of a task this server's app knows (start the dashboard with
        `--app`), validating the arguments against the task's signature."""
        b: EnqueueBody = call.body
        options = {
            k: v
            for k, v in {
                "queue": b.queue,
                "priority": b.priority,
                "delay": b.delay,
                "at": b.at,
                "key": b.key,
                "max_attempts": b.max_attempts,
            }.items()
            if v is not None
        }
        return visibility.job_out(call.app.enqueue(b.task, b.args, **options), call.principal)

    @api.route(
        "POST",
        "/api/jobs/{job_id}/retry",
        permission=Permission.OPERATE,
        summary="Retry a job",
        tag="jobs",
        path_model=JobPath,
        response=JobOut,
        errors=(404, 409),
    )
    def retry_job(call: Call) -> JobOut:
        """Run a finished, discarded or waiting job again now."""
        return visibility.job_out(call.app.retry_job(call.path.job_id), call.principal)

    @api.route(
        "POST",
        "/api/jobs/{job_id}/cancel",
        permission=Permission.OPERATE,
        summary="Cancel a job",
        tag="jobs",
        path_model=JobPath,
        response=JobOut,
        errors=(404, 409),
    )
    def cancel_job(call: Call) -> JobOut:
        """Cancel a waiting job, or ask a running one to stop."""
        return visibility.job_out(call.app.cancel_job(call.path.job_id), call.principal)
