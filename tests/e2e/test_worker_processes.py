"""End to end: real `rota worker` processes and real signals (SIGKILL, SIGTERM) on both dialects."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

import rota
from rota import JobState, Outcome
from tests.e2e.apps.e2e_tasks import RUNS_FILE, register
from tests.helpers import wait_for

pytestmark = pytest.mark.e2e

APPS = Path(__file__).parent / "apps"
APP = "e2e_app:app"
# Small leases and quick polling so a lost worker is noticed within seconds.
FAST = ["--lease", "1", "--heartbeat", "0.2", "--poll-interval", "0.1", "--log-format", "json"]


def process_env(database_url: str) -> dict[str, str]:
    """The environment of a worker subprocess: the helper apps importable, the database set."""
    env = dict(os.environ)
    env.pop("ROTA_APP", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(APPS), env.get("PYTHONPATH", "")) if p)
    env["ROTA_DATABASE_URL"] = database_url
    return env


class WorkerProcess:
    """One `python -m rota worker` subprocess, its stderr kept in a file."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> None:
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.popen = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: teardown reaps the children
            )
        self.pid = self.popen.pid

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def records(self) -> list[dict[str, Any]]:
        """The JSON log records written so far (other lines are skipped)."""
        out = []
        for line in self.logs().splitlines():
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    def count_logged(self, text: str) -> int:
        return sum(text in r.get("message", "") for r in self.records())

    def wait_logged(self, text: str, count: int = 1, timeout: float = 15.0) -> None:
        def seen() -> bool:
            if self.popen.poll() is not None:
                raise AssertionError(
                    f"worker exited ({self.popen.returncode}) before logging {text!r}:\n"
                    + self.logs()
                )
            return self.count_logged(text) >= count

        wait_for(seen, timeout=timeout)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, sig: signal.Signals) -> None:
        self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker {self.pid} still running after {timeout}s:\n{self.logs()}"
            ) from None


Spawn = Callable[..., WorkerProcess]
T = TypeVar("T")


def until(predicate: Callable[[], T], *workers: WorkerProcess, timeout: float) -> T:
    """wait_for(predicate), failing early, with the workers' logs, if one of them exits."""

    def check() -> T:
        for worker in workers:
            if not worker.alive():
                raise AssertionError(
                    f"worker {worker.pid} exited ({worker.popen.returncode}):\n{worker.logs()}"
                )
        return predicate()

    try:
        return wait_for(check, timeout=timeout)
    except AssertionError as exc:
        logs = "\n".join(f"--- worker {w.pid}:\n{w.logs()}" for w in workers)
        raise AssertionError(f"{exc}\n{logs}") from None


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start `rota worker` subprocesses; any left running are killed at teardown."""
    started: list[WorkerProcess] = []

    def start(database_url: str, *options: str, queues: str = "default=4") -> WorkerProcess:
        argv = [sys.executable, "-m", "rota", "worker", "--app", APP, "--queues", queues]
        argv += [*FAST, *options]
        log_path = tmp_path / f"worker-{len(started)}.log"
        proc = WorkerProcess(argv, process_env(database_url), tmp_path, log_path)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.alive():
            os.killpg(proc.pid, signal.SIGKILL)  # the group we created: the worker and its children
            proc.popen.wait(10)


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """Where the tasks record their runs."""
    path = tmp_path / "box"
    path.mkdir()
    return path


def runs(box: Path) -> list[dict[str, Any]]:
    path = box / RUNS_FILE
    if not path.exists():
        return []
    # Only whole lines: the last one may be mid-write.
    return [json.loads(line) for line in path.read_text().split("\n")[:-1] if line]


def starts(box: Path, job_id: int | None = None) -> list[dict[str, Any]]:
    return [
        r for r in runs(box) if r["event"] == "start" and (job_id is None or r["job"] == job_id)
    ]


def ends(box: Path, job_id: int | None = None) -> list[dict[str, Any]]:
    return [r for r in runs(box) if r["event"] == "end" and (job_id is None or r["job"] == job_id)]


def finished(app: rota.App, job_id: int) -> rota.Job | None:
    job = app.get_job(job_id)
    return job if job is not None and job.state.finished else None


def left_running(app: rota.App, job_id: int) -> rota.Job | None:
    job = app.get_job(job_id)
    return job if job is not None and job.state is not JobState.RUNNING else None


def outcomes(job: rota.Job) -> list[Outcome]:
    return [a.outcome for a in job.history]


# --- a worker killed mid-job -----------------------------------------------------------


def test_sigkilled_worker_job_runs_again_at_once_and_completes_once(
    app: rota.App, database_url: str, spawn: Spawn, box: Path, tmp_path: Path
) -> None:
    register(app)
    release = tmp_path / "release"
    job = app.enqueue("hold", {"box": str(box), "release": str(release)})
    # The doomed worker leaves maintenance (the rescuer) to the others, as spare workers do.
    doomed = spawn(database_url, "--worker-id", "doomed", "--no-maintenance")
    until(lambda: starts(box), doomed, timeout=15)

    doomed.send(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL
    held = app.get_job(job.id)
    assert held is not None
    assert held.state is JobState.RUNNING and held.worker == "doomed"

    release.touch()
    survivor = spawn(database_url, "--worker-id", "survivor")
    done = until(lambda: finished(app, job.id), survivor, timeout=20)

    assert done.state is JobState.COMPLETED
    assert done.result == "done"
    assert done.attempt == 2
    lost, completed = done.history
    assert lost.outcome is Outcome.LOST
    # Its process is gone (its presence lock with it): rescued without waiting for the
    # lease (#17), or on the lease, which is as short (1 s) here; with the default lease,
    # tests/e2e/test_presence_processes.py shows the rescue comes long before it.
    assert lost.error_type in {"WorkerGone", "LeaseExpired"}
    assert lost.worker == "doomed"
    assert lost.attempt == 1
    assert completed.outcome is Outcome.COMPLETED
    assert completed.worker == "survivor"
    assert completed.attempt == 2
    assert lost.finished_at is not None and completed.started_at is not None
    assert lost.finished_at <= completed.started_at
    # Ran twice (the first run died), finished exactly once, by the survivor.
    assert [(r["attempt"], r["worker"]) for r in starts(box)] == [(1, "doomed"), (2, "survivor")]
    assert [(r["attempt"], r["worker"]) for r in ends(box)] == [(2, "survivor")]

    survivor.send(signal.SIGTERM)
    assert survivor.wait(15) == 0


def test_the_worker_process_freezes_what_start_up_made(
    app: rota.App, database_url: str, spawn: Spawn
) -> None:
    """`rota worker` freezes the objects of its start-up (the app, the modules it imported):
    the collector's full passes during a drain walk only what jobs make."""
    register(app)
    job = app.enqueue("frozen")
    worker = spawn(database_url)
    done = until(lambda: finished(app, job.id), worker, timeout=20)
    assert done.state is JobState.COMPLETED
    assert done.result > 10_000  # rota, click, psycopg, pydantic...: tens of thousands
    worker.send(signal.SIGTERM)
    assert worker.wait(15) == 0


@pytest.mark.parametrize(("flags", "threshold"), [((), 10_000), (("--gc-threshold", "0"), 700)])
def test_the_worker_process_collects_after_its_gc_threshold(
    app: rota.App, database_url: str, spawn: Spawn, flags: tuple[str, ...], threshold: int
) -> None:
    """The collector's first threshold is raised in `rota worker` (jobs in flight keep
    thousands of objects alive); `--gc-threshold 0` keeps Python's own."""
    register(app)
    job = app.enqueue("gc_threshold")
    worker = spawn(database_url, *flags)
    done = until(lambda: finished(app, job.id), worker, timeout=20)
    assert done.state is JobState.COMPLETED
    assert done.result == threshold
    worker.send(signal.SIGTERM)
    assert worker.wait(15) == 0


# --- SIGTERM: drain ---------------------------------------------------------------------


def test_sigterm_lets_the_running_job_finish_within_the_grace_and_exits_0(
    app: rota.App, database_url: str, spawn: Spawn, box: Path
) -> None:
    register(app)
    job = app.enqueue("nap", {"box": str(box), "seconds": 1.5})
    worker = spawn(database_url, "--grace", "5", "--worker-id", "drainer")
    until(lambda: starts(box), worker, timeout=15)

    signalled_at = time.monotonic_ns()
    worker.send(signal.SIGTERM)
    worker.wait_logged("waiting up to")  # it has stopped fetching and is draining
    late = app.enqueue("nap", {"box": str(box), "seconds": 0})
    assert worker.wait(15) == 0

    # The outcome was written before the process exited.
    done = app.get_job(job.id)
    assert done is not None and done.state is JobState.COMPLETED
    assert done.result == 1.5
    assert outcomes(done) == [Outcome.COMPLETED]
    (end,) = ends(box, job.id)
    assert end["t"] > signalled_at  # the job really was mid-run when the signal came
    # A draining worker takes no new jobs.
    waiting = app.get_job(late.id)
    assert waiting is not None and waiting.state is JobState.AVAILABLE
    assert starts(box, late.id) == []


@pytest.mark.parametrize(
    "task",
    [
        "hold",  # ignores cancellation: its thread cannot be stopped
        "hold_async",  # cancelled at an await
        "stop_on_cancel",  # sees ctx.cancelled and gives up with an error
        "stop_on_cancel_async",  # its cancellation surfaces as an error of its own
    ],
)
def test_sigterm_returns_a_job_longer_than_the_grace_to_the_queue(
    app: rota.App, database_url: str, spawn: Spawn, box: Path, tmp_path: Path, task: str
) -> None:
    """Past the grace the job goes back to the queue as `shutdown`, without spending an
    attempt, however the task reacts to being stopped."""
    register(app)
    release = tmp_path / "release"
    job = app.enqueue(task, {"box": str(box), "release": str(release)})
    first = spawn(database_url, "--grace", "0.5", "--worker-id", "first")
    until(lambda: starts(box), first, timeout=15)

    first.send(signal.SIGTERM)
    # Returned when the grace is over, even while a stuck thread delays the exit.
    returned = wait_for(lambda: left_running(app, job.id), timeout=5)
    assert returned.state is JobState.AVAILABLE, returned.history
    assert first.wait(15) == 0
    assert outcomes(returned) == [Outcome.SHUTDOWN]
    assert returned.history[0].worker == "first"
    # Not the job's fault: the attempt is given back.
    assert returned.max_attempts - returned.attempt == job.max_attempts
    assert ends(box) == []

    release.touch()
    second = spawn(database_url, "--worker-id", "second")
    done = until(lambda: finished(app, job.id), second, timeout=15)
    assert done.state is JobState.COMPLETED
    assert outcomes(done) == [Outcome.SHUTDOWN, Outcome.COMPLETED]
    assert done.history[1].worker == "second"
    assert [r["worker"] for r in starts(box)] == ["first", "second"]
    assert [r["worker"] for r in ends(box)] == ["second"]

    second.send(signal.SIGTERM)
    assert second.wait(15) == 0


def test_a_second_signal_returns_running_jobs_at_once(
    app: rota.App, database_url: str, spawn: Spawn, box: Path, tmp_path: Path
) -> None:
    """Ctrl-C drains; a second Ctrl-C (or SIGTERM) does not wait out the grace."""
    register(app)
    job = app.enqueue("hold_async", {"box": str(box), "release": str(tmp_path / "release")})
    worker = spawn(database_url, "--grace", "60")
    until(lambda: starts(box), worker, timeout=15)

    worker.send(signal.SIGINT)
    worker.wait_logged("waiting up to")
    worker.send(signal.SIGTERM)
    assert worker.wait(15) == 0

    returned = app.get_job(job.id)
    assert returned is not None
    assert returned.state is JobState.AVAILABLE
    assert outcomes(returned) == [Outcome.SHUTDOWN]


@pytest.mark.parametrize(
    ("target", "sig"),
    [
        ("group", signal.SIGINT),  # Ctrl-C in a terminal: the whole process group at once
        ("each", signal.SIGINT),  # the same, with the children's copies handled first
        ("each", signal.SIGTERM),  # systemd's default KillMode signals every process
        ("supervisor", signal.SIGTERM),  # Kubernetes: PID 1 only
    ],
)
def test_one_signal_drains_every_process_however_it_arrives(
    app: rota.App,
    database_url: str,
    spawn: Spawn,
    box: Path,
    tmp_path: Path,
    target: str,
    sig: signal.Signals,
) -> None:
    """With --processes, a signal that reaches the children directly and through the
    supervisor is still one drain: running jobs finish within the grace (#17, case 11)."""
    register(app)
    release = tmp_path / "release"
    jobs = [app.enqueue("hold", {"box": str(box), "release": str(release)}) for _ in range(2)]
    # A lease longer than FAST's 1 s: this is about the signal, and a loaded machine that
    # stalls a heartbeat for a second would fence a held job (lost, then run again).
    pair = spawn(
        database_url,
        *("--processes", "2", "--grace", "30", "--lease", "10", "--heartbeat", "1"),
        queues="default=1",
    )
    until(lambda: len({r["pid"] for r in starts(box)}) == 2, pair, timeout=30)

    if target == "group":
        os.killpg(pair.pid, sig)
    elif target == "each":
        for pid in {r["pid"] for r in starts(box)}:
            os.kill(pid, sig)
        pair.wait_logged("waiting up to", count=2)
        pair.send(sig)
    else:
        pair.send(sig)
    # The supervisor's request reached both children, and both are draining.
    pair.wait_logged("drain requested", count=2)
    pair.wait_logged("waiting up to", count=2)
    release.touch()
    assert pair.wait(30) == 0
    assert pair.count_logged("stopping now") == 0, pair.logs()
    for job in jobs:
        done = app.get_job(job.id)
        assert done is not None and done.state is JobState.COMPLETED, done
        assert outcomes(done) == [Outcome.COMPLETED]


def test_a_process_whose_slots_are_all_hung_is_replaced(
    app: rota.App, database_url: str, spawn: Spawn, box: Path
) -> None:
    """Under --processes, a process whose every slot is held by a plain task hung past its
    timeout (its thread cannot be stopped) exits once its jobs are returned, and the
    supervisor starts a fresh one, as Celery's hard time limit replaces its child
    (#17, case 8)."""
    register(app)
    hung = [app.enqueue("hang", {"box": str(box)}) for _ in range(2)]
    pair = spawn(database_url, "--processes", "2", queues="default=1")
    until(lambda: len({r["pid"] for r in starts(box)}) == 2, pair, timeout=30)
    for job in hung:  # each timed out once and is dead-lettered, never run again
        done = until(lambda job=job: finished(app, job.id), pair, timeout=15)
        assert done.state is JobState.DISCARDED
        assert done.history[-1].error_type == "rota.errors.TaskTimeoutError"
    pair.wait_logged("all 1 slots are hung", count=2)
    pair.wait_logged("started: queues", count=4, timeout=30)  # two fresh processes
    later = app.enqueue("nap", {"box": str(box), "seconds": 0})
    done = until(lambda: finished(app, later.id), pair, timeout=30)
    assert done.state is JobState.COMPLETED
    assert done.history[-1].worker not in {
        j.history[-1].worker for j in app.list_jobs() if j.id != later.id
    }
    assert len(starts(box, hung[0].id)) == 1 and len(starts(box, hung[1].id)) == 1
    pair.send(signal.SIGTERM)
    assert pair.wait(30) == 0


# --- many workers, one run per attempt ---------------------------------------------------


def test_competing_worker_processes_run_each_job_exactly_once(
    app: rota.App, database_url: str, spawn: Spawn, box: Path
) -> None:
    register(app)
    pair = spawn(database_url, "--processes", "2")
    single = spawn(database_url)
    pair.wait_logged("started: queues", count=2)
    single.wait_logged("started: queues")

    jobs = app.tasks["nap"].enqueue_many([{"box": str(box), "seconds": 0.01}] * 200)
    ids = {job.id for job in jobs}
    assert len(ids) == 200

    def all_completed() -> bool:
        (report,) = [q for q in app.list_queues() if q.name == "default"]
        return report.counts.get("completed", 0) == 200

    until(all_completed, pair, single, timeout=60)
    pair.send(signal.SIGTERM)
    single.send(signal.SIGTERM)
    assert pair.wait(20) == 0
    assert single.wait(20) == 0

    stored = app.list_jobs(limit=1000)
    assert {job.id for job in stored} == ids
    for job in stored:
        assert job.state is JobState.COMPLETED, job
        assert job.attempt == 1
        assert outcomes(job) == [Outcome.COMPLETED]

    started, ended = starts(box), ends(box)
    assert Counter(r["job"] for r in started) == dict.fromkeys(ids, 1)
    assert Counter(r["job"] for r in ended) == dict.fromkeys(ids, 1)
    # No two processes ever held the same job at the same time.
    spans: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    end_of = {(r["job"], r["attempt"], r["pid"]): r["t"] for r in ended}
    for r in started:
        spans[r["job"]].append((r["t"], end_of[(r["job"], r["attempt"], r["pid"])], r["pid"]))
    for job_id, intervals in spans.items():
        intervals.sort()
        for (_, end_a, pid_a), (start_b, _, pid_b) in itertools.pairwise(intervals):
            assert end_a <= start_b, f"job {job_id} ran in {pid_a} and {pid_b} at once"
    # The work really was shared: three processes competed for it.
    assert len({r["pid"] for r in started}) >= 2


def claims(app: rota.App) -> list[int]:
    """How many jobs each claim took: the jobs one claim statement took share its
    `attempted_at` (its transaction's clock)."""
    return sorted(Counter(job.attempted_at for job in app.list_jobs(limit=1000)).values())


def test_one_claim_fills_every_free_slot_by_default(
    app: rota.App, database_url: str, spawn: Spawn, box: Path
) -> None:
    register(app)
    # Waiting before the worker starts: its first claim may take them all.
    app.tasks["nap"].enqueue_many([{"box": str(box), "seconds": 0}] * 150)
    worker = spawn(database_url, queues="default=150")

    def all_completed() -> bool:
        return len(app.list_jobs(state="completed", limit=1000)) == 150

    until(all_completed, worker, timeout=60)
    # More than the old cap of 100 in one round trip: the claim is bounded by the slots.
    assert claims(app) == [150]
    assert worker.count_logged("(claims of up to 1000 jobs)") == 1


def test_fetch_batch_bounds_each_claim_in_every_process(
    app: rota.App, database_url: str, spawn: Spawn, box: Path
) -> None:
    register(app)
    app.tasks["nap"].enqueue_many([{"box": str(box), "seconds": 0}] * 40)
    pair = spawn(database_url, "--fetch-batch", "5", "--processes", "2", queues="default=12")

    def all_completed() -> bool:
        return len(app.list_jobs(state="completed", limit=1000)) == 40

    until(all_completed, pair, timeout=60)
    # Both children were given the batch (the supervisor passes it on).
    pair.wait_logged("(claims of up to 5 jobs)", count=2)
    if app.driver.dialect == "postgres":
        # Each claim's transaction has its own microsecond clock there; SQLite's clock
        # has milliseconds, where two quick claims of one process may share a stamp.
        assert max(claims(app)) == 5


def test_a_fetch_batch_out_of_range_is_refused(database_url: str, tmp_path: Path) -> None:
    for bad in ("0", "10001", "many"):
        done = rota_cli(database_url, tmp_path, "worker", "--app", APP, "--fetch-batch", bad)
        assert done.returncode == 2, done.stderr
        assert "--fetch-batch" in done.stderr


# --- schema ------------------------------------------------------------------------------


def latest_schema_version(database_url: str) -> int:
    with rota.App(database_url) as app:
        return app.driver.latest_schema_version


def rota_cli(database_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rota", *args],
        env=process_env(database_url),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_migrate_check_worker_refusal_and_idempotent_migrate(
    database_url: str, tmp_path: Path
) -> None:
    check = rota_cli(database_url, tmp_path, "migrate", "--check")
    assert check.returncode != 0
    assert "rota migrate" in check.stderr

    for processes in ("1", "2"):
        refused = rota_cli(
            database_url, tmp_path, "worker", "--app", APP, "--processes", processes, *FAST
        )
        assert refused.returncode == 3, refused.stderr
        assert "rota migrate" in refused.stderr

    latest = latest_schema_version(database_url)
    first = rota_cli(database_url, tmp_path, "migrate", "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert (report["applied"], report["version"]) == (list(range(1, latest + 1)), latest)
    again = rota_cli(database_url, tmp_path, "migrate", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["applied"], report["version"]) == ([], latest)

    current = rota_cli(database_url, tmp_path, "migrate", "--check", "--json")
    assert current.returncode == 0, current.stderr
    assert json.loads(current.stdout)["current"] is True


def test_concurrent_migrates_apply_each_migration_once(database_url: str, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "rota", "migrate", "--json"]
    env = process_env(database_url)
    procs = [
        subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    results = [proc.communicate(timeout=60) for proc in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    applied = sorted(v for out, _ in results for v in json.loads(out)["applied"])
    assert applied == list(range(1, latest_schema_version(database_url) + 1))


# --- the database is down ------------------------------------------------------------------


def test_worker_keeps_retrying_while_the_database_is_down_and_exits_0_on_sigterm(
    spawn: Spawn,
) -> None:
    # Nothing listens on port 1: every connection is refused.
    worker = spawn("postgresql://postgres@127.0.0.1:1/test", "--worker-id", "patient")
    worker.wait_logged("database unavailable", timeout=30)
    assert worker.alive()
    retries = [r for r in worker.records() if "database unavailable" in r.get("message", "")]
    assert all(r["level"] == "warning" for r in retries)
    assert "127.0.0.1:1" in retries[0]["message"]

    worker.send(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert "Traceback" not in worker.logs()


def test_sigkilled_leader_is_replaced_and_its_job_rescued(
    app: rota.App, database_url: str, spawn: Spawn, box: Path, tmp_path: Path
) -> None:
    """The only worker, so the maintenance leader, dies: the next worker rescues the job
    (at once: the leader's presence is gone, #17) and takes over the leadership once the
    dead leader's row expires."""
    register(app)
    release = tmp_path / "release"
    job = app.enqueue("hold", {"box": str(box), "release": str(release)})
    quick = ["--leader-ttl", "2", "--rescue-interval", "0.2"]
    leader = spawn(database_url, "--worker-id", "leader", *quick)
    leader.wait_logged("gained leadership")
    until(lambda: starts(box), leader, timeout=15)
    leader.send(signal.SIGKILL)
    assert leader.wait(10) == -signal.SIGKILL

    release.touch()
    heir = spawn(database_url, "--worker-id", "heir", *quick)
    # Up to the leader ttl (2 s) plus the lease (1 s) and a rescue interval.
    started = time.monotonic()
    done = until(lambda: finished(app, job.id), heir, timeout=40)
    assert time.monotonic() - started < 15
    assert outcomes(done) == [Outcome.LOST, Outcome.COMPLETED]
    heir.wait_logged("gained leadership")
    heir.send(signal.SIGTERM)
    assert heir.wait(15) == 0
