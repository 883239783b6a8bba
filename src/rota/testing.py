"""Helpers for testing code that uses rota: run jobs inline, drain queues in-process,
and assert what was enqueued. Public API (see docs/testing.md)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rota.app import App
from rota.context import Context
from rota.drivers.base import JobFilter
from rota.errors import RotaError
from rota.job import Job, JobState
from rota.task import Task
from rota.worker.executor import Executor
from rota.worker.fetcher import claim_now

_WAITING = (JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE)


@dataclass
class DrainReport:
    """What a drain ran, by outcome."""

    completed: int = 0
    retried: int = 0
    discarded: int = 0
    cancelled: int = 0
    snoozed: int = 0
    jobs: list[Job] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return self.completed + self.retried + self.discarded + self.cancelled + self.snoozed


def drain(
    app: App,
    queues: list[str] | None = None,
    *,
    with_scheduled: bool = False,
    max_jobs: int = 10_000,
    worker_id: str = "rota.testing",
) -> DrainReport:
    """Run every available job of `queues` (default: all queues of the app's tasks)
    in this process, until none is left. With `with_scheduled`, scheduled jobs and
    retries waiting for their backoff run too, so a retry chain drains to its end."""
    names = queues or sorted({t.policy.queue for t in app.tasks.values()})
    report = DrainReport()
    with concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="rota-drain") as pool:
        executor = Executor(app, pool)
        while report.ran < max_jobs:
            if with_scheduled:
                app.driver.job_stage_due(max_jobs, horizon=1e9)
            batch: list[Job] = []
            for queue in names:
                batch += claim_now(app, queue, max_jobs - report.ran, worker_id, 600)
            if not batch:
                break
            for job in batch:
                ctx = Context(job, worker_id=worker_id, driver=app.driver)
                execution = asyncio.run(executor.run(job, ctx))
                if execution.completion is not None:
                    app.driver.job_complete_many([execution.completion])
                    state = execution.completion.state
                elif execution.completed:
                    state = JobState.COMPLETED  # completed with the task's own transaction
                else:
                    continue  # the lease was lost: another worker owns the job now
                if state is JobState.COMPLETED:
                    report.completed += 1
                elif state is JobState.DISCARDED:
                    report.discarded += 1
                elif state is JobState.CANCELLED:
                    report.cancelled += 1
                elif execution.completion is not None and execution.completion.refund_attempt:
                    report.snoozed += 1
                else:
                    report.retried += 1
                final = app.driver.job_get(job.id)
                if final is not None:
                    report.jobs.append(final)
    return report


@contextlib.contextmanager
def inline(app: App) -> Iterator[None]:
    """Within the block, enqueue stores the job and runs it at once in this process;
    errors raised by the task propagate to the caller, which is what a test wants."""

    def run_now(jobs: list[Job], conn: Any) -> None:
        if conn is not None:
            raise RotaError(
                "rota.testing.inline cannot run a job enqueued with conn=: it is not "
                "committed yet. Commit, then run it with rota.testing.drain(app)."
            )
        for job in jobs:
            if not job.created or job.state is not JobState.AVAILABLE:
                continue
            claimed = app.driver.job_claim(job.id, "rota.testing.inline", 600)
            if claimed is not None:
                _run_inline(app, claimed)

    previous = app._inline_runner
    app._inline_runner = run_now
    try:
        yield
    finally:
        app._inline_runner = previous


def _run_inline(app: App, job: Job) -> None:
    ctx = Context(job, worker_id="rota.testing.inline", driver=app.driver)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        execution = asyncio.run(Executor(app, pool).run(job, ctx))
    if execution.completion is not None:
        app.driver.job_complete_many([execution.completion])
    if execution.error is not None:
        raise execution.error


def enqueued(
    app: App,
    task: Task[Any, Any] | str,
    args: dict[str, Any] | None = None,
    *,
    queue: str | None = None,
) -> list[Job]:
    """Waiting jobs of `task` whose arguments include every item of `args`."""
    name = task if isinstance(task, str) else task.name
    jobs = app.driver.job_list(JobFilter(states=_WAITING, task=name, queue=queue, limit=10_000))
    wanted = args or {}
    return [j for j in jobs if all(j.args.get(k) == v for k, v in wanted.items())]


def assert_enqueued(
    app: App,
    task: Task[Any, Any] | str,
    args: dict[str, Any] | None = None,
    *,
    queue: str | None = None,
) -> Job:
    """Assert a waiting job of `task` with (at least) `args` exists, and return it."""
    found = enqueued(app, task, args, queue=queue)
    if not found:
        name = task if isinstance(task, str) else task.name
        raise AssertionError(
            f"no waiting {name} job with args {args or {}} "
            f"(waiting: {[j.args for j in enqueued(app, task)]})"
        )
    return found[0]


def refute_enqueued(
    app: App,
    task: Task[Any, Any] | str,
    args: dict[str, Any] | None = None,
    *,
    queue: str | None = None,
) -> None:
    found = enqueued(app, task, args, queue=queue)
    if found:
        raise AssertionError(f"expected no such job, found {[j.id for j in found]}")


__all__ = [
    "DrainReport",
    "RotaError",
    "assert_enqueued",
    "drain",
    "enqueued",
    "inline",
    "refute_enqueued",
]
