"""Jobs: search, one job with its steps, enqueue, retry and cancel."""

from __future__ import annotations

from rota.auth import Permission
from rota.errors import JobNotFoundError
from rota.web.api import Api, Call
from rota.web.models import EnqueueBody, JobOut, JobPath, JobQuery
from rota.web.records import JobSearch
from rota.web.store import WebStore


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
        where = JobSearch(
            q=q.q,
            id=q.id,
            key=q.key,
            task=q.task,
            queue=q.queue,
            states=tuple(str(s) for s in q.state),
            text=q.text,
            before_id=q.before_id,
            limit=q.limit,
        )
        return [JobOut.of(j) for j in WebStore(call.app.driver).job_search(where)]

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
        the results of its durable steps."""
        job = call.app.get_job(call.path.job_id)
        if job is None:
            raise JobNotFoundError(f"no job with id {call.path.job_id}")
        return JobOut.of(job, steps=call.app.driver.step_list(job.id))

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
        return JobOut.of(call.app.enqueue(b.task, b.args, **options))

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
        return JobOut.of(call.app.retry_job(call.path.job_id))

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
        return JobOut.of(call.app.cancel_job(call.path.job_id))
