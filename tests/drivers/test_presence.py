"""Presence storage on both dialects (#17): a worker's presence lock ends with its process,
and the sweep rescues its running jobs at once, fenced like a lease rescue. The holders
are real child processes, killed with a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import psycopg
import pytest

import rota
from rota.drivers.base import Completion, JobInsert, RescueReport
from rota.drivers.presence import PresenceTakenError
from rota.job import JobState
from rota.worker.fetcher import claim_now
from tests.helpers import wait_for

HOLDER = textwrap.dedent(
    """
    import sys, time
    import rota
    app = rota.App(sys.argv[1])
    hold = app.driver.presence.hold(sys.argv[2])
    print("held", flush=True)
    time.sleep(600)
    """
)


class Holder:
    """A child process holding one worker id's presence, as a worker does."""

    def __init__(self, url: str, worker: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, url, worker],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={k: v for k, v in os.environ.items() if k != "ROTA_DATABASE_URL"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        assert line.strip() == "held", line + self.proc.stdout.read().decode()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(10) == -signal.SIGKILL
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def holders(database_url: str) -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        if holder.proc.poll() is None:
            holder.kill()


def hold_in_child(holders: list[Holder], url: str, worker: str) -> Holder:
    holder = Holder(url, worker)
    holders.append(holder)
    return holder


def claim_as(app: rota.App, worker: str) -> rota.Job:
    app.driver.job_insert_many(
        [JobInsert(task="t", queue="q", args_json="{}", priority=0, max_attempts=3)]
    )
    (job,) = claim_now(app, "q", 1, worker, 300)  # a lease far longer than the test
    return job


def completion(job: rota.Job) -> Completion:
    entry = json.dumps({"outcome": "completed"})
    return Completion(job.id, job.lease_token or "", JobState.COMPLETED, entry)


def test_a_killed_workers_jobs_are_rescued_at_once_and_its_late_write_refused(
    app: rota.App, database_url: str, holders: list[Holder]
) -> None:
    presence = app.driver.presence
    holder = hold_in_child(holders, database_url, "w1")
    job = claim_as(app, "w1")
    # Alive: swept again and again, never rescued, whatever the grace.
    for _ in range(3):
        assert presence.sweep(grace=0, settle=0) == RescueReport()
    (record,) = presence.records()
    assert (record.worker, record.pid, record.lost_at) == ("w1", holder.proc.pid, None)
    assert record.held is (True if app.driver.dialect == "postgres" else None)

    holder.kill()
    # The server ends the session as the kernel closes the socket: a moment, not a lease.
    wait_for(lambda: presence.sweep(grace=0, settle=0).rescued == 1, timeout=10)
    rescued = app.driver.job_get(job.id)
    assert rescued is not None and rescued.state is JobState.AVAILABLE
    assert rescued.lease_token is None
    lost = rescued.history[-1]
    assert (lost.outcome.value, lost.error_type, lost.worker) == ("lost", "WorkerGone", "w1")
    assert lost.message is not None and "is gone" in lost.message
    # The dead attempt's completion is refused (fencing), and the next attempt is clean.
    assert app.driver.job_complete_many([completion(job)]) == set()
    (again,) = claim_now(app, "q", 1, "w2", 300)
    assert again.id == job.id and again.attempt == 2
    assert app.driver.job_complete_many([completion(job)]) == set()
    assert app.driver.job_complete_many([completion(again)]) == {job.id}
    assert presence.records() == []  # forgotten once nothing of it runs


def test_the_grace_holds_a_rescue_back_until_it_has_passed(
    app: rota.App, database_url: str, holders: list[Holder]
) -> None:
    presence = app.driver.presence
    holder = hold_in_child(holders, database_url, "w1")
    job = claim_as(app, "w1")
    holder.kill()
    wait_for(lambda: mark_lost(app), timeout=10)
    # Gone for less than the grace: marked, not rescued.
    assert presence.sweep(grace=3600) == RescueReport()
    if app.driver.dialect == "postgres":
        # Nor while the server counts as just started: every worker is registering again.
        assert presence.sweep(grace=0, settle=10**9) == RescueReport()
    current = app.driver.job_get(job.id)
    assert current is not None and current.state is JobState.RUNNING
    assert presence.sweep(grace=0, settle=0).rescued == 1


def mark_lost(app: rota.App) -> bool:
    """Sweep with a long grace (marks the gone, rescues nothing); True once one is marked."""
    app.driver.presence.sweep(grace=3600)
    return any(r.lost_at is not None for r in app.driver.presence.records())


def test_two_live_workers_cannot_share_a_worker_id(
    app: rota.App, database_url: str, holders: list[Holder]
) -> None:
    holder = hold_in_child(holders, database_url, "w1")
    with pytest.raises(PresenceTakenError, match="--worker-id"):
        app.driver.presence.hold("w1")
    (record,) = app.driver.presence.records()
    assert record.pid == holder.proc.pid  # the live holder's row is left as it was
    other = app.driver.presence.hold("w2")
    try:
        assert {r.worker for r in app.driver.presence.records()} == {"w1", "w2"}
    finally:
        other.close()


def test_a_worker_restarted_under_its_id_takes_over_at_once(
    app: rota.App, database_url: str, holders: list[Holder]
) -> None:
    holder = hold_in_child(holders, database_url, "w1")
    holder.kill()
    # Its lock is free as soon as the server has ended the dead session.
    hold = wait_for(lambda: _try_hold(app, "w1"), timeout=10)
    try:
        (record,) = app.driver.presence.records()
        assert record.pid == os.getpid() and record.lost_at is None
        assert app.driver.presence.sweep(grace=0, settle=0) == RescueReport()
    finally:
        hold.close()


def _try_hold(app: rota.App, worker: str) -> object:
    try:
        return app.driver.presence.hold(worker)
    except PresenceTakenError:
        return None


@pytest.mark.postgres
def test_a_session_cut_under_a_live_worker_registers_again_and_clears_its_mark(
    pg_url: str,
) -> None:
    app = rota.App(pg_url)
    app.migrate()
    try:
        hold = app.driver.presence.hold("w1")
        (record,) = app.driver.presence.records()
        assert record.session is not None and hold.alive()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (record.session,))
        wait_for(lambda: not hold.alive(), timeout=10)
        wait_for(lambda: mark_lost(app), timeout=10)
        hold.close()
        again = app.driver.presence.hold("w1")  # what the worker does once it notices
        try:
            (record2,) = app.driver.presence.records()
            assert record2.lost_at is None and record2.held is True
            assert record2.session != record.session
            assert record2.started_at == record.started_at  # the same process, registered again
            assert app.driver.presence.sweep(grace=0, settle=0) == RescueReport()
        finally:
            again.close()
    finally:
        app.close()


@pytest.mark.postgres
def test_the_presence_session_takes_server_options_beside_the_urls_own(pg_url: str) -> None:
    """How soon the server notices a silent worker is set on its presence session; the
    URL's own options (here the test's search_path) still apply."""
    app = rota.App(pg_url)
    app.migrate()
    try:
        hold = app.driver.presence.hold("w1", "-c tcp_keepalives_idle=7")
        try:
            (record,) = app.driver.presence.records()  # registered in the test's schema
            assert record.worker == "w1" and record.held is True
            conn = hold._conn  # type: ignore[attr-defined]
            assert conn.execute("SHOW tcp_keepalives_idle").fetchone()["tcp_keepalives_idle"] == "7"
        finally:
            hold.close()
    finally:
        app.close()
