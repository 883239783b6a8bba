"""End to end (#17): real `rota worker` processes with the default lease (30 s). A worker
killed with SIGKILL has its jobs running again elsewhere well before its lease would have
run out; a SIGSTOPped one (alive, its session open) keeps them until its lease ends; a
worker whose presence session is cut registers again and keeps its jobs."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import rota
from rota import JobState, Outcome
from rota.drivers.base import Completion
from tests.e2e.apps.e2e_tasks import register
from tests.e2e.test_worker_processes import (
    APP,
    WorkerProcess,
    ends,
    process_env,
    starts,
    until,
)

pytestmark = pytest.mark.e2e

DEFAULT_LEASE = rota.WorkerSettings().lease
Launch = Callable[..., WorkerProcess]


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """Where the tasks record their runs."""
    path = tmp_path / "box"
    path.mkdir()
    return path


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launch]:
    """Start workers with the default settings (only the log format differs)."""
    started: list[WorkerProcess] = []

    def start(database_url: str, *options: str) -> WorkerProcess:
        argv = [sys.executable, "-m", "rota", "worker", "--app", APP, "--queues", "default=4"]
        argv += ["--log-format", "json", *options]
        proc = WorkerProcess(
            argv, process_env(database_url), tmp_path, tmp_path / f"worker-{len(started)}.log"
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.alive():
            proc.send(signal.SIGCONT)  # a stopped process cannot die until continued
            proc.send(signal.SIGKILL)
            proc.popen.wait(10)


def present(app: rota.App, worker: str) -> bool:
    return any(r.worker == worker and r.lost_at is None for r in app.driver.presence.records())


def test_sigkilled_workers_jobs_run_again_well_before_their_lease(
    app: rota.App, database_url: str, launch: Launch, box: Path, tmp_path: Path
) -> None:
    start = launch
    register(app)
    release = tmp_path / "release"
    doomed: WorkerProcess = start(database_url, "--worker-id", "doomed")
    jobs = [app.enqueue("hold", {"box": str(box), "release": str(release)}) for _ in range(3)]
    until(lambda: len(starts(box)) == 3, doomed, timeout=20)
    survivor: WorkerProcess = start(database_url, "--worker-id", "survivor")
    until(lambda: present(app, "survivor"), survivor, timeout=20)
    held = {j.id: app.get_job(j.id) for j in jobs}
    leases = {i: j.lease_expires_at for i, j in held.items() if j is not None}
    assert all(j is not None and j.worker == "doomed" for j in held.values())

    doomed.send(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL
    # Each job runs again on the survivor; waiting less than one lease (30 s): on a lease
    # alone they would not have come back in time.
    until(
        lambda: (
            sorted(r["job"] for r in starts(box) if r["attempt"] == 2) == sorted(j.id for j in jobs)
        ),
        survivor,
        timeout=DEFAULT_LEASE * 2 / 3,
    )
    for job in jobs:
        current = app.get_job(job.id)
        assert current is not None and current.attempt == 2 and current.worker == "survivor"
        lost = current.history[0]
        assert (lost.outcome, lost.error_type, lost.worker) == (
            Outcome.LOST,
            "WorkerGone",
            "doomed",
        )
        # Rescued while the dead attempt's lease still had long to run (database clock).
        assert lost.finished_at is not None and lost.finished_at < leases[job.id]
        # A late write of the dead attempt is refused: fencing still holds.
        stale = held[job.id]
        assert stale is not None and stale.lease_token is not None
        entry = '{"outcome": "completed"}'
        late = Completion(job.id, stale.lease_token, JobState.COMPLETED, entry)
        assert app.driver.job_complete_many([late]) == set()

    release.touch()
    until(lambda: all(_finished(app, j.id) for j in jobs), survivor, timeout=20)
    for job in jobs:
        done = app.get_job(job.id)
        assert done is not None and done.state is JobState.COMPLETED and done.attempt == 2
    assert sorted(r["worker"] for r in ends(box)) == ["survivor"] * 3
    survivor.send(signal.SIGTERM)
    assert survivor.wait(40) == 0


def test_sigstopped_worker_keeps_its_jobs_until_its_lease_ends(
    app: rota.App, database_url: str, launch: Launch, box: Path, tmp_path: Path
) -> None:
    """Paused, not dead: its process and database session live, so only its lease (short
    here, to keep the test short) can give its job to another worker."""
    start = launch
    register(app)
    release = tmp_path / "release"
    paused: WorkerProcess = start(database_url, "--worker-id", "paused", "--lease", "3")
    job = app.enqueue("hold", {"box": str(box), "release": str(release)})
    until(lambda: starts(box), paused, timeout=20)
    survivor: WorkerProcess = start(database_url, "--worker-id", "survivor")
    until(lambda: present(app, "survivor"), survivor, timeout=20)

    paused.send(signal.SIGSTOP)
    current = app.get_job(job.id)
    assert current is not None and current.lease_expires_at is not None
    lease_end = current.lease_expires_at  # at least this: a renewal under way only extends it
    until(lambda: [r for r in starts(box) if r["attempt"] == 2], survivor, timeout=30)
    rescued = app.get_job(job.id)
    assert rescued is not None
    lost = rescued.history[0]
    # Not rescued as gone (the survivor swept it every second and found it present), but
    # by the lease rescuer, after the lease ended.
    assert (lost.error_type, lost.worker) == ("LeaseExpired", "paused")
    assert lost.finished_at is not None and lost.finished_at >= lease_end

    release.touch()
    paused.send(signal.SIGCONT)  # back: its completion is refused, the survivor's stands
    until(lambda: _finished(app, job.id), survivor, timeout=20)
    done = app.get_job(job.id)
    assert done is not None and done.state is JobState.COMPLETED and done.worker == "survivor"
    assert [a.outcome for a in done.history] == [Outcome.LOST, Outcome.COMPLETED]


@pytest.mark.postgres
def test_worker_whose_presence_session_is_cut_registers_again_and_keeps_its_jobs(
    pg_url: str, launch: Launch, box: Path, tmp_path: Path
) -> None:
    start = launch
    app = rota.App(pg_url)
    app.migrate()
    register(app)
    release = tmp_path / "release"
    try:
        worker: WorkerProcess = start(pg_url, "--worker-id", "cut")
        job = app.enqueue("hold", {"box": str(box), "release": str(release)})
        until(lambda: starts(box), worker, timeout=20)
        (before,) = app.driver.presence.records()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (before.session,))
        worker.wait_logged("lost its presence session")
        worker.wait_logged("registered again; claiming again")
        (after,) = app.driver.presence.records()
        assert after.held and after.lost_at is None and after.session != before.session
        release.touch()
        until(lambda: _finished(app, job.id), worker, timeout=20)
        done = app.get_job(job.id)
        # The job was not taken from the living worker: one attempt, completed by it.
        assert done is not None and done.state is JobState.COMPLETED and done.attempt == 1
        worker.send(signal.SIGTERM)
        assert worker.wait(40) == 0
    finally:
        app.close()


def _finished(app: rota.App, job_id: int) -> bool:
    job = app.get_job(job_id)
    return job is not None and job.state.finished
