"""A completed attempt with nothing more to say is not stored in the job's history (its
entry's bytes were the drain's largest write), yet every reader sees the history as before:
the Job, a retry of the completed job, the breaker's counts, a batch's and a workflow's
last error. On both dialects."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import rota
from rota.batches.store import BatchStore
from rota.drivers.base import COMPLETED_ENTRY, Completion, JobInsert
from rota.job import Attempt, Job, JobState, Outcome
from rota.ops.breakers import FAILED_OUTCOMES
from rota.ops.hold_store import HoldStore
from rota.worker.fetcher import claim_now
from rota.workflows.store import WorkflowStore

FAILED = json.dumps({"outcome": "failed", "error_type": "ValueError", "message": "bad"})


def stored_history(app: rota.App, job_id: int) -> list[dict[str, Any]]:
    """The history column as written, without any reader's help."""
    with app.transaction() as conn:
        row = conn.execute(f"SELECT history FROM rota_jobs WHERE id = {int(job_id)}").fetchone()
    value = row["history"]
    return value if isinstance(value, list) else json.loads(value)


def get(app: rota.App, job_id: int) -> Job:
    job = app.driver.job_get(job_id)
    assert job is not None
    return job


def same_attempt(a: Attempt, b: Attempt) -> bool:
    """Equal, times to within 10 µs: SQLite's JSON keeps 15 digits of an epoch time."""
    close = all(
        x is not None and y is not None and abs(x - y) <= timedelta(microseconds=10)
        for x, y in ((a.started_at, b.started_at), (a.finished_at, b.finished_at))
    )
    return close and dataclasses.replace(a, started_at=None, finished_at=None) == (
        dataclasses.replace(b, started_at=None, finished_at=None)
    )


def fail_then_claim(app: rota.App, job: Job, worker: str = "w") -> Job:
    token = job.lease_token or ""
    failed = Completion(job.id, token, JobState.AVAILABLE, FAILED, delay=0.0)
    assert app.driver.job_complete_many([failed]) == {job.id}
    (again,) = claim_now(app, job.queue, 1, worker, 30)
    return again


def complete(app: rota.App, job: Job, entry: str = COMPLETED_ENTRY) -> None:
    done = Completion(job.id, job.lease_token or "", JobState.COMPLETED, entry)
    assert app.driver.job_complete_many([done]) == {job.id}


def test_a_plain_completion_stores_no_entry_and_reads_as_its_attempt(app: rota.App) -> None:
    app.driver.job_insert_many([JobInsert("t", "q", "{}", 0, 3)])
    (job,) = claim_now(app, "q", 1, "w-1", 30)
    complete(app, job)
    assert stored_history(app, job.id) == []
    final = get(app, job.id)
    (attempt,) = final.history
    assert (attempt.attempt, attempt.worker, attempt.outcome) == (1, "w-1", Outcome.COMPLETED)
    assert attempt.started_at == final.attempted_at and attempt.finished_at == final.finished_at
    assert attempt.started_at is not None and attempt.finished_at is not None
    assert (attempt.error_type, attempt.message, attempt.traceback) == (None, None, None)


def test_after_a_failure_the_history_reads_the_failure_then_the_success(app: rota.App) -> None:
    app.driver.job_insert_many([JobInsert("t", "q", "{}", 0, 3)])
    (job,) = claim_now(app, "q", 1, "w-1", 30)
    job = fail_then_claim(app, job, "w-2")
    complete(app, job)
    assert [e["outcome"] for e in stored_history(app, job.id)] == ["failed"]
    history = get(app, job.id).history
    assert [(a.attempt, a.worker, a.outcome) for a in history] == [
        (1, "w-1", Outcome.FAILED),
        (2, "w-2", Outcome.COMPLETED),
    ]
    assert history[0].error_type == "ValueError" and history[1].error_type is None


def test_a_completion_with_more_to_say_is_stored_once(app: rota.App) -> None:
    # ctx.transaction() completes with a message: the entry is written and read once.
    app.driver.job_insert_many([JobInsert("t", "q", "{}", 0, 3)])
    (job,) = claim_now(app, "q", 1, "w", 30)
    complete(app, job, json.dumps({"outcome": "completed", "message": "ctx.transaction()"}))
    assert len(stored_history(app, job.id)) == 1
    (attempt,) = get(app, job.id).history
    assert attempt.outcome is Outcome.COMPLETED and attempt.message == "ctx.transaction()"


def test_retrying_a_completed_job_stores_its_implied_attempt_first(app: rota.App) -> None:
    app.driver.job_insert_many([JobInsert("t", "q", "{}", 0, 3)])
    (job,) = claim_now(app, "q", 1, "w-1", 30)
    complete(app, job)
    (first,) = get(app, job.id).history
    back = app.driver.job_retry(job.id)
    assert back.state is JobState.AVAILABLE and len(back.history) == 1
    assert same_attempt(back.history[0], first)
    assert [e["outcome"] for e in stored_history(app, job.id)] == ["completed"]
    (again,) = claim_now(app, "q", 1, "w-2", 30)
    complete(app, again)
    history = get(app, job.id).history
    assert same_attempt(history[0], first)  # as it read before the retry
    assert [(a.attempt, a.worker) for a in history] == [(1, "w-1"), (2, "w-2")]
    assert all(a.outcome is Outcome.COMPLETED for a in history)


def test_the_breaker_counts_implied_attempts(app: rota.App) -> None:
    since = datetime.now(UTC) - timedelta(minutes=1)
    app.driver.job_insert_many([JobInsert("t", "q", "{}", 0, 3) for _ in range(3)])
    plain, retried, dead = claim_now(app, "q", 3, "w", 30)
    complete(app, plain)  # one attempt, implied
    complete(app, fail_then_claim(app, retried))  # a failure, then an implied success
    dead_entry = json.dumps({"outcome": "discarded", "error_type": "ValueError"})
    done = Completion(dead.id, dead.lease_token or "", JobState.DISCARDED, dead_entry)
    assert app.driver.job_complete_many([done]) == {dead.id}
    assert HoldStore(app.driver).breaker_attempts("q", since, FAILED_OUTCOMES) == (4, 2)
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert HoldStore(app.driver).breaker_attempts("q", later, FAILED_OUTCOMES) == (0, 0)


def test_a_batch_item_completed_after_a_failure_shows_no_error(app: rota.App) -> None:
    @app.task(name="noop")
    def noop() -> None:
        pass

    status = app.batch(noop, completions=1, parallelism=1)
    (job,) = claim_now(app, "default", 1, "w", 30)
    job = fail_then_claim(app, job)
    store = BatchStore(app.driver)
    (item,) = store.items(status.id)
    assert (item.job_state, item.error_type, item.error_message) == ("running", "ValueError", "bad")
    complete(app, job)
    (item,) = store.items(status.id)
    assert (item.job_state, item.error_type, item.error_message) == ("completed", None, None)


def test_a_workflow_job_completed_after_a_failure_shows_no_error(app: rota.App) -> None:
    @app.task(name="step")
    def step() -> None:
        pass

    wf = rota.Workflow("one-step")
    wf.step(step)
    run = app.workflows.start(wf)
    (job,) = claim_now(app, "default", 1, "w", 30)
    job = fail_then_claim(app, job)

    def element() -> Any:
        (snapshot,) = [s for s in WorkflowStore(app.driver).running(10) if s.workflow.id == run.id]
        (found,) = snapshot.elements
        return found

    assert element().job_error == "ValueError: bad"
    complete(app, job)
    assert (element().job_state, element().job_error) == ("completed", None)
