"""The counts, the throughput and the workers the dashboard reads are kept by triggers on
rota_jobs (#23, migration 0019): they match a count over rota_jobs after every kind of
change, on both dialects, whether or not the leader has folded them yet."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest

import rota
from rota.drivers.base import COMPLETED_ENTRY, Claim, Completion, JobInsert
from rota.job import JobState
from rota.maintenance.counts import CountFolder
from rota.testing import drain
from rota.web.store import WebStore
from rota.worker.fetcher import claim_now


def _kept(app: rota.App) -> dict[tuple[str, str], int]:
    return {(q.name, s): n for q in app.driver.queue_list() for s, n in q.counts.items() if n}


def _truth(app: rota.App) -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for job in app.list_jobs(limit=10_000):
        slot = (job.queue, str(job.state))
        found[slot] = found.get(slot, 0) + 1
    return found


def test_kept_counts_follow_every_change(database_url: str) -> None:
    app = rota.App(database_url)

    @app.task(queue="mail")
    def send(n: int) -> None:
        if n % 5 == 0:
            raise rota.Discard("bad address")

    @app.task(queue="bills")
    def bill(n: int) -> None:
        return None

    app.migrate()
    try:
        send.enqueue_many([{"n": i} for i in range(20)])
        later = [bill.enqueue(n=i, delay=3600) for i in range(5)]
        bill.enqueue_many([{"n": i} for i in range(10)])
        assert _kept(app) == _truth(app)
        drain(app)
        assert _kept(app) == _truth(app)
        assert _truth(app)[("mail", "discarded")] == 4
        app.cancel_job(later[0].id)
        dead = next(j for j in app.list_jobs(limit=100) if j.state == rota.JobState.DISCARDED)
        app.retry_job(dead.id)
        CountFolder(app.driver).run_once()
        assert _kept(app) == _truth(app)
        assert app.driver.job_prune("completed", 0.0, 1000) == 26
        assert _kept(app) == _truth(app)

        web = WebStore(app.driver)
        flow: dict[str, int] = {}
        for point in web.queue_series(3600.0, 60.0):
            flow[point.kind] = flow.get(point.kind, 0) + point.count
        # 35 enqueued, 26 completed, 4 discarded and 1 cancelled, whatever was pruned since.
        assert flow == {"enqueued": 35, "completed": 26, "discarded": 4, "cancelled": 1}
        assert [w.worker for w in web.worker_list(600.0)] == ["rota.testing"]
        report = CountFolder(app.driver).run_once()
        assert report.pruned >= 0 and _kept(app) == _truth(app)
    finally:
        app.close()


def test_the_recount_after_a_copy_agrees_with_the_triggers(database_url: str) -> None:
    """`copy_recount` (the end of `rota db copy`) derives the counts and the throughput
    from the jobs themselves: on a database whose triggers counted every change, it
    changes nothing that the dashboard shows."""
    app = rota.App(database_url)

    @app.task(queue="mail")
    def send(n: int) -> None:
        if n % 4 == 0:
            raise rota.Discard("bad address")

    app.migrate()
    try:
        send.enqueue_many([{"n": i} for i in range(12)])
        send.enqueue(n=99, delay=3600)
        drain(app)
        web = WebStore(app.driver)

        def shown() -> tuple[dict[tuple[str, str], int], dict[str, int]]:
            flow: dict[str, int] = {}
            for point in web.queue_series(3600.0, 60.0):
                flow[point.kind] = flow.get(point.kind, 0) + point.count
            return _kept(app), flow

        before = shown()
        assert before == (_truth(app), {"enqueued": 13, "completed": 9, "discarded": 3})
        with app.driver.database.write() as session:
            session.all("copy_recount")
        assert shown() == before
    finally:
        app.close()


def test_oldest_age_is_the_oldest_waiting_job_of_each_queue_whatever_its_priority(
    database_url: str,
) -> None:
    """queue_list's oldest age (the dashboard, rota_queue_oldest_job_age_seconds) is that
    of each queue's longest-waiting job across every priority; jobs that wait to run
    later or that ran do not count."""
    app = rota.App(database_url)

    @app.task(queue="mail")
    def send(n: int) -> None:
        return None

    app.migrate()
    try:
        now = app.driver.db_now()
        hour = timedelta(hours=1)
        # The oldest of "mail" has a high priority number (it runs last); "bills" has one at
        # each end of the priority range, the oldest at the low end; "later" waits ahead.
        send.enqueue(n=1, priority=5, at=now - 3 * hour)
        send.enqueue(n=2, priority=-5, at=now - 1 * hour)
        send.enqueue(n=3, priority=0, at=now - 2 * hour)
        send.enqueue(n=4, queue="bills", priority=-100, at=now - 5 * hour)
        send.enqueue(n=5, queue="bills", priority=100, at=now - 4 * hour)
        send.enqueue(n=6, queue="later", at=now + hour)
        oldest = {q.name: q.oldest_available_age for q in app.driver.queue_list()}
        assert 3 * 3600 <= (oldest["mail"] or 0) < 3 * 3600 + 60
        assert 5 * 3600 <= (oldest["bills"] or 0) < 5 * 3600 + 60
        assert oldest.get("later") is None
        drain(app, queues=["mail"])  # a queue with nothing waiting has no age
        assert {q.name: q.oldest_available_age for q in app.driver.queue_list()}["mail"] is None
    finally:
        app.close()


@pytest.mark.parametrize("mode", ["plain", "gated", "limited", "fair", "none"])
def test_completions_of_every_kind_in_one_batch_are_counted_once(
    database_url: str, mode: str
) -> None:
    """A batch of completions (carried by a claim, or written on their own: `none`) mixes
    the kinds SQLite writes apart (migration 0020): plain completions, sent as lease
    tokens by id and counted by the statement; a completion with a result or its own
    history entry (ctx.transaction()), counted the same way; failures, counted by the
    trigger; a completion whose lease was lost, refused and not counted; and the same
    completion twice, counted once."""
    app = rota.App(database_url)
    app.migrate()
    d = app.driver
    try:
        gate = {"partition_key": "p"} if mode == "gated" else {}
        rows = [
            JobInsert(task="t", queue="q", args_json="{}", priority=0, max_attempts=1)
            for _ in range(7)
        ]
        d.job_insert_many(rows)
        d.job_insert_many([JobInsert("t", "q", "{}", 0, 1, **gate)])  # type: ignore[arg-type]
        jobs = claim_now(app, "q", 8, "w1", 30)
        assert len(jobs) == 8
        a, b, c, e, f, g, h, gated = jobs

        def ended(
            job: rota.Job, state: JobState, entry: str = COMPLETED_ENTRY, **kw: Any
        ) -> Completion:
            return Completion(job.id, job.lease_token or "", state, entry, **kw)

        carried = [
            ended(a, JobState.COMPLETED),
            ended(b, JobState.COMPLETED),
            ended(c, JobState.COMPLETED, result_json='{"ticket": "T-1"}'),
            ended(
                e, JobState.COMPLETED, '{"outcome": "completed", "message": "ctx.transaction()"}'
            ),
            ended(f, JobState.DISCARDED, '{"outcome": "discarded", "message": "bad"}'),
            ended(g, JobState.AVAILABLE, '{"outcome": "failed"}', delay=0.0, refund_attempt=True),
            Completion(h.id, uuid.uuid4().hex, JobState.COMPLETED, COMPLETED_ENTRY),  # lost
            ended(gated, JobState.COMPLETED),
            # The same attempts twice in one batch: written once, counted once.
            ended(a, JobState.COMPLETED),
            ended(c, JobState.COMPLETED, result_json='{"ticket": "T-1"}'),
        ]
        if mode == "none":
            accepted = d.job_complete_many(carried)
        else:
            query = app.claim_queries()[mode]
            accepted = d.job_fetch(Claim("q", 0, "w1", 30, query, completions=carried)).accepted
        assert accepted == {j.id for j in jobs} - {h.id}
        states = {j.id: d.job_get(j.id).state for j in jobs}  # type: ignore[union-attr]
        assert [states[j.id] for j in (a, b, c, e, gated)] == [JobState.COMPLETED] * 5
        assert (states[f.id], states[g.id], states[h.id]) == (
            JobState.DISCARDED,
            JobState.AVAILABLE,
            JobState.RUNNING,
        )
        assert d.job_get(c.id).result == {"ticket": "T-1"}  # type: ignore[union-attr]
        assert _kept(app) == _truth(app)
        assert _kept(app)[("q", "completed")] == 5
        # Sent again (a retried write after a lost connection): refused, nothing counted twice.
        assert d.job_complete_many(carried) == set()
        assert _kept(app) == _truth(app)
    finally:
        app.close()


# job_complete_many as rota ran it before migration 0020 (the text of commit 923e8ec): one
# update for every completion, plain ones included, counted by the per-row trigger then.
OLDER_COMPLETE = """
UPDATE rota_jobs
SET state = c.state,
    run_at = CASE WHEN c.delay IS NULL THEN rota_jobs.run_at
                  ELSE (julianday('now') - 2440587.5) * 86400.0 + c.delay END,
    finished_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled')
                       THEN (julianday('now') - 2440587.5) * 86400.0 END,
    result = c.result,
    max_attempts = rota_jobs.max_attempts + c.refund,
    history = CASE WHEN c.entry IS NULL THEN rota_jobs.history
                   ELSE json_insert(rota_jobs.history, '$[#]', json_patch(c.entry, json_object(
                       'attempt', rota_jobs.attempt, 'worker', rota_jobs.worker,
                       'started_at', rota_jobs.attempted_at,
                       'finished_at', (julianday('now') - 2440587.5) * 86400.0))) END,
    lease_token = NULL,
    lease_expires_at = NULL
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token,
             json_extract(value, '$.state') AS state, json_extract(value, '$.delay') AS delay,
             json_extract(value, '$.result') AS result, json_extract(value, '$.entry') AS entry,
             json_extract(value, '$.refund') AS refund
      FROM json_each(:c)) AS c
WHERE rota_jobs.id = c.id AND rota_jobs.lease_token = c.token
RETURNING 'done' AS kind, rota_jobs.id, rota_jobs.state, rota_jobs.queue
"""


def test_an_older_workers_completions_stay_counted_after_the_migration(tmp_path: Any) -> None:
    """On SQLite a worker still running an older rota after `rota migrate` (it checked the
    schema when it started) completes jobs with its own statement: the trigger on writes
    of `result` counts them, plain completions included."""
    app = rota.App(f"sqlite:///{tmp_path / 'upgrade.db'}")
    app.migrate()
    d = app.driver
    try:
        d.job_insert_many(
            [JobInsert(task="t", queue="q", args_json="{}", priority=0, max_attempts=1)] * 4
        )
        a, b, c, e = claim_now(app, "q", 4, "w1", 30)
        batch = [
            {
                "id": a.id,
                "token": a.lease_token,
                "state": "completed",
                "delay": None,
                "result": None,
                "entry": None,
                "refund": 0,
            },
            {
                "id": b.id,
                "token": b.lease_token,
                "state": "completed",
                "delay": None,
                "result": '{"ticket": "T-2"}',
                "entry": None,
                "refund": 0,
            },
            {
                "id": c.id,
                "token": c.lease_token,
                "state": "discarded",
                "delay": None,
                "result": None,
                "entry": '{"outcome": "discarded"}',
                "refund": 0,
            },
            {
                "id": e.id,
                "token": "not-its-token",
                "state": "completed",
                "delay": None,
                "result": None,
                "entry": None,
                "refund": 0,
            },
        ]
        with d.database.transaction() as conn:
            written = conn.execute(OLDER_COMPLETE, {"c": json.dumps(batch)}).fetchall()
        assert sorted(row[1] for row in written) == sorted([a.id, b.id, c.id])
        assert _kept(app) == _truth(app)
        assert _kept(app)[("q", "completed")] == 2
    finally:
        app.close()


def _one_running(database_url: str) -> tuple[rota.App, rota.Job]:
    """A migrated app with one job of queue "q", claimed by worker w1."""
    app = rota.App(database_url)
    app.migrate()
    app.driver.job_insert_many(
        [JobInsert(task="t", queue="q", args_json="{}", priority=0, max_attempts=3)]
    )
    (job,) = claim_now(app, "q", 1, "w1", 30)
    return app, job


@pytest.mark.parametrize("stale_first", [True, False], ids=["stale-first", "stale-last"])
def test_a_stale_and_the_current_completion_of_one_job_in_one_batch(
    database_url: str, stale_first: bool
) -> None:
    """An attempt's completion held back (its write failed) can meet the next attempt's in
    one batch: the fence takes the one whose lease token the job holds, in either order,
    and the job is counted once."""
    app, job = _one_running(database_url)
    d = app.driver
    try:
        current = Completion(job.id, job.lease_token or "", JobState.COMPLETED, COMPLETED_ENTRY)
        stale = Completion(job.id, uuid.uuid4().hex, JobState.COMPLETED, COMPLETED_ENTRY)
        batch = [stale, current] if stale_first else [current, stale]
        assert d.job_complete_many(batch) == {job.id}
        assert d.job_get(job.id).state is JobState.COMPLETED  # type: ignore[union-attr]
        assert _kept(app) == _truth(app) == {("q", "completed"): 1}
    finally:
        app.close()


def test_a_retried_job_that_returns_nothing_loses_its_earlier_result(database_url: str) -> None:
    """A completed job retried keeps its result while it waits; when its next run returns
    nothing (a plain completion), the result is gone, as on every completion that carries
    none, and the job is counted once."""
    app, job = _one_running(database_url)
    d = app.driver
    try:
        first = Completion(
            job.id,
            job.lease_token or "",
            JobState.COMPLETED,
            COMPLETED_ENTRY,
            result_json='{"a": 1}',
        )
        assert d.job_complete_many([first]) == {job.id}
        app.retry_job(job.id)
        (again,) = claim_now(app, "q", 1, "w1", 30)
        plain = Completion(again.id, again.lease_token or "", JobState.COMPLETED, COMPLETED_ENTRY)
        assert d.job_complete_many([plain]) == {job.id}
        final = d.job_get(job.id)
        assert final is not None and final.state is JobState.COMPLETED and final.result is None
        assert _kept(app) == _truth(app) == {("q", "completed"): 1}
    finally:
        app.close()
