"""The scaling signals on both dialects: queue_backlog (runnable = available, or retryable
and due; running; the oldest wait), queue_durations, the named KEDA queries run as they
are, and job_claim taking back a job whose backoff has passed (`rota run`)."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
import pytest

import rota
from rota.drivers import queries
from rota.job import JobState
from rota.worker.fetcher import claim_now
from tests.drivers.test_conformance import done, row


def run_named(database_url: str, name: str, params: dict[str, Any]) -> Any:
    """Run one named query exactly as stored, on a connection of its own."""
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            return conn.execute(queries.load("sqlite")[name], params).fetchone()[0]
    with psycopg.connect(database_url) as conn:
        found = conn.execute(queries.load("postgres")[name], params).fetchone()
        assert found is not None
        return found[0]


def populate(app: rota.App) -> None:
    """Queue q: 3 available, 1 retryable and due, 1 snoozed (scheduled) and due, 1
    retryable later, 1 scheduled later, 2 running, 1 completed and 1 discarded: 5 runnable.
    Queue other: 1 available."""
    d = app.driver
    d.job_insert_many([row() for _ in range(10)])
    d.job_insert_many([row(queue="other"), row(delay=3600)])
    running = claim_now(app, "q", 7, "w", 60)
    retry_now, snoozed, retry_later, completed, discarded = running[:5]
    d.job_complete_many(
        [
            done(retry_now, JobState.RETRYABLE, delay=0.0),
            done(snoozed, JobState.SCHEDULED, delay=0.0, refund_attempt=True),
            done(retry_later, JobState.RETRYABLE, delay=3600.0),
            done(completed),
            done(discarded, JobState.DISCARDED),
        ]
    )


def test_backlog_counts_runnable_running_and_the_oldest_wait(app: rota.App) -> None:
    populate(app)
    report = app.driver.queue_backlog("q")
    assert (report.queue, report.backlog, report.running) == ("q", 5, 2)
    assert report.demand == 7
    assert 0 <= report.oldest_age_s < 60
    other = app.driver.queue_backlog("other")
    assert (other.backlog, other.running) == (1, 0)
    empty = app.driver.queue_backlog("nothing-here")
    assert (empty.backlog, empty.running, empty.oldest_age_s) == (0, 0, 0.0)


def test_named_keda_queries_match_the_report(app: rota.App, database_url: str) -> None:
    populate(app)
    assert run_named(database_url, "queue_keda_backlog", {"queue": "q"}) == 5
    assert run_named(database_url, "queue_keda_demand", {"queue": "q"}) == 7
    assert run_named(database_url, "queue_keda_demand", {"queue": "other"}) == 1


def test_a_paused_queue_has_no_backlog_but_keeps_its_running_jobs(app: rota.App) -> None:
    populate(app)
    app.pause_queue("q")
    report = app.driver.queue_backlog("q")
    assert (report.backlog, report.running) == (0, 2)
    app.resume_queue("q")
    assert app.driver.queue_backlog("q").backlog == 5


def test_oldest_age_is_the_wait_of_the_oldest_runnable_job(app: rota.App) -> None:
    d = app.driver
    oldest = d.job_insert_many([row()])[0]
    d.job_insert_many([row()])
    before = (d.db_now() - oldest.run_at).total_seconds()
    age = d.queue_backlog("q").oldest_age_s
    after = (d.db_now() - oldest.run_at).total_seconds()
    # By the database's clock (PostgreSQL's now() is the transaction's start).
    assert before - 0.001 <= age <= after + 0.001


def test_durations_of_recently_completed_jobs(app: rota.App) -> None:
    d = app.driver
    none = d.queue_durations("q", 900)
    assert (none.samples, none.mean_s) == (0, None)
    populate(app)
    report = d.queue_durations("q", 900)
    assert report.samples == 1  # the discarded and retried attempts do not count
    assert report.mean_s is not None and 0 <= report.mean_s < 60
    assert d.queue_durations("other", 900).samples == 0


def test_job_claim_takes_back_a_waiting_job_once_it_is_due(app: rota.App) -> None:
    d = app.driver
    job = d.job_insert_many([row()])[0]
    first = d.job_claim(job.id, "runner", 60)
    assert first is not None and first.attempt == 1
    assert d.job_claim(job.id, "runner", 60) is None  # running: not claimable
    d.job_complete_many([done(first, JobState.RETRYABLE, delay=3600.0)])
    assert d.job_claim(job.id, "runner", 60) is None  # its backoff has not passed
    later = d.job_insert_many([row(delay=3600)])[0]
    assert d.job_claim(later.id, "runner", 60) is None  # scheduled for later
    again = d.job_insert_many([row()])[0]
    claimed = d.job_claim(again.id, "runner", 60)
    assert claimed is not None
    d.job_complete_many([done(claimed, JobState.RETRYABLE, delay=0.0)])
    retried = d.job_claim(again.id, "runner", 60)
    assert retried is not None and retried.attempt == 2 and retried.state is JobState.RUNNING
    assert retried.lease_token != claimed.lease_token


@pytest.mark.parametrize("state", [JobState.COMPLETED, JobState.DISCARDED, JobState.CANCELLED])
def test_job_claim_never_takes_a_finished_job(app: rota.App, state: JobState) -> None:
    d = app.driver
    job = d.job_insert_many([row()])[0]
    claimed = d.job_claim(job.id, "runner", 60)
    assert claimed is not None
    d.job_complete_many([done(claimed, state)])
    assert d.job_claim(job.id, "runner", 60) is None
