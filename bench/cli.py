"""rota's worker as users run it, `rota worker --app ... --queues bench=C`, in its own
process: the drain of a prefilled queue, and the idle cost (memory, CPU) of a worker with
nothing to do. Only the CLI, the public API and plain SQL on rota's tables are used."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rota
import rota.app
from bench import tasks
from bench.db import BenchError, Database, pg_connect, sqlite_connect, vacuum_stand_in
from bench.tasks import QUEUE

ROOT = Path(__file__).resolve().parent.parent
# PYTHONPATH of a child process: this checkout's rota and bench, whatever the virtualenv
# has installed.
CHECKOUT_PATH = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
PLAIN_APP = "bench.cli_app:app"
FEATURES_APP = "bench.cli_features:app"
# How often the end of a drain is looked for. Each look is one indexed EXISTS query on its
# own connection (about 0.1-0.3 ms of database time, well under 1% of a core at this
# rate); it does not set the measured time, which is read from the jobs' own timestamps,
# so looking more often would only stop the worker sooner.
POLL = 0.025
READY_TIMEOUT = 20.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class WorkerCommand:
    concurrency: int
    processes: int = 1
    app: str = PLAIN_APP
    queue: str = QUEUE

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "rota",
            "worker",
            "--app",
            self.app,
            "--queues",
            f"{self.queue}={self.concurrency}",
            "--processes",
            str(self.processes),
            # info: the "worker ... started" line tells us it is ready; --quiet-queue:
            # nothing per job (a log line per job would be measured too)
            "--log-level",
            "info",
            "--quiet-queue",
            self.queue,
        ]

    def describe(self) -> str:
        text = f"rota worker --queues {self.queue}={self.concurrency}"
        return text + (f" --processes {self.processes}" if self.processes > 1 else "")


# One look per state, each from its partial index. The waiting states are spelled as the
# index spells them: SQLite uses a partial index only for a WHERE that holds its predicate
# as written, and since migration 0021 that is an OR chain; with `IN (...)` each look
# scanned the table (beside 200,000 finished jobs, 40 scans a second from this process
# alone, on a 2-core machine: a quarter of the drain it measured).
PENDING = (
    "SELECT EXISTS (SELECT 1 FROM rota_jobs WHERE state = 'available' AND queue = ?) "
    "OR EXISTS (SELECT 1 FROM rota_jobs WHERE state = 'running' AND queue = ?) "
    "OR EXISTS (SELECT 1 FROM rota_jobs "
    "WHERE (state = 'scheduled' OR state = 'retryable') AND queue = ?)"
)


class Watch:
    """One plain connection to the benchmark database, for looking, never for work."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._pg = pg_connect(db.url) if db.dialect == "postgres" else None
        self._lite = sqlite_connect(db.sqlite_path) if db.dialect == "sqlite" else None

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
        if self._lite is not None:
            self._lite.close()

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        if self._pg is not None:
            row = self._pg.execute(sql.replace("?", "%s"), params).fetchone()
        else:
            assert self._lite is not None
            row = self._lite.execute(sql, params).fetchone()
        assert row is not None
        return tuple(row)

    def pending(self, queue: str = QUEUE) -> bool:
        """Whether jobs of `queue` are still waiting or running: one look per state, each
        from its partial index. One EXISTS over the four states has no index of its own,
        and the planner answered it with a scan from the start of the table, expecting a
        match soon: beside 10M finished jobs each look read the whole 4 GB heap (about
        2 s), one look after another for as long as the drain it measured ran."""
        return bool(self.one(PENDING, (queue, queue, queue))[0])

    def first_waiting(self, queue: str = QUEUE) -> int:
        """The lowest id of the jobs waiting in `queue` (0: none), from the claim index."""
        sql = "SELECT coalesce(min(id), 0) FROM rota_jobs WHERE queue = ? AND state = 'available'"
        return int(self.one(sql, (queue,))[0])

    def window(self, queue: str = QUEUE, first_id: int = 0) -> tuple[float, int, int]:
        """(seconds from the first claim to the last completion, on the database's clock;
        completed jobs; all jobs) of `queue`, reading ids from `first_id` on: by primary
        key, not a walk over a large history of other queues."""
        if self.db.dialect == "postgres":
            sql = (
                "SELECT extract(epoch FROM max(finished_at) - min(attempted_at))::float8, "
                "count(*) FILTER (WHERE state = 'completed'), count(*) "
                "FROM rota_jobs WHERE id >= ? AND queue = ?"
            )
        else:
            sql = (
                "SELECT max(finished_at) - min(attempted_at), "
                "coalesce(sum(state = 'completed'), 0), count(*) FROM rota_jobs "
                "WHERE id >= ? AND queue = ?"
            )
        elapsed, completed, total = self.one(sql, (first_id, queue))
        return float(elapsed or 0.0), int(completed), int(total)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo.extend(_children(p))
    return pids


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) used so far by `pid` and its children."""
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICKS


def tree_rss_mb(pid: int) -> float:
    total = 0
    for p in _tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(found.group(1)) if found else 0
    return total / 1024


class Running:
    """A `rota worker` process; `ready` is set once every process logged its start."""

    def __init__(
        self, command: WorkerCommand, db: Database, env: dict[str, str] | None = None
    ) -> None:
        env = dict(os.environ, ROTA_DATABASE_URL=db.url, PYTHONPATH=CHECKOUT_PATH, **(env or {}))
        env.pop("ROTA_DATABASE_URL_FILE", None)
        self.command = command
        self.proc = subprocess.Popen(
            command.argv(),
            cwd=str(ROOT),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.ready = threading.Event()
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        started = 0
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line.rstrip())
            del self.log[:-200]
            if re.search(r"worker \S+ started", line):
                started += 1
                if started >= self.command.processes:
                    self.ready.set()

    def wait_ready(self) -> None:
        """Until every process logged its start. Should that line ever change, a worker
        that is still alive after READY_TIMEOUT is taken as ready: the drain's time comes
        from the jobs' timestamps, so only the CPU count would include its start-up."""
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready.wait(0.05):
            if self.proc.poll() is not None:
                raise BenchError(f"rota worker exited ({self.proc.returncode}):\n{self.tail()}")
            if time.monotonic() > deadline:
                return

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise BenchError(f"rota worker exited ({self.proc.returncode}):\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log[-20:])

    def stop(self) -> None:
        """SIGTERM (a drain: nothing is running by now), then SIGKILL if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # this one process (the supervisor kills its children)
                self.proc.wait()
        self._reader.join(5)


@contextmanager
def running(
    command: WorkerCommand, db: Database, env: dict[str, str] | None = None
) -> Iterator[Running]:
    worker = Running(command, db, env)
    try:
        yield worker
    finally:
        worker.stop()


def drain(db: Database, jobs: int, command: WorkerCommand, timeout: float) -> dict[str, Any]:
    """Drain `jobs` prefilled jobs of the `bench` queue with a `rota worker` process.

    The queue is paused while the worker starts (imports, connections, leader election are
    not the drain), then resumed. The time is read from the jobs: the first `attempted_at`
    to the last `finished_at`, both written by the database. CPU per job counts the worker
    processes' CPU from the resume to the moment the end is seen.
    """
    with rota.App(db.url) as control:
        control.queues.pause(QUEUE)
        watch = Watch(db)
        try:
            first_id = watch.first_waiting()
            with running(command, db) as worker:
                worker.wait_ready()
                cpu = tree_cpu(worker.proc.pid)
                started = time.perf_counter()
                control.queues.resume(QUEUE)
                deadline = started + timeout
                while watch.pending():
                    worker.check_alive()
                    if time.perf_counter() > deadline:
                        raise BenchError(f"{command.describe()}: not drained in {timeout:.0f}s")
                    time.sleep(POLL)
                wall = time.perf_counter() - started
                cpu = tree_cpu(worker.proc.pid) - cpu
            elapsed, completed, total = watch.window(first_id=first_id)
        finally:
            watch.close()
    if completed != jobs or total != jobs:
        raise BenchError(f"{command.describe()}: {completed} of {total} jobs completed, not {jobs}")
    return {"elapsed": elapsed, "wall": wall, "cpu": cpu, "completed": completed}


def idle(db: Database, command: WorkerCommand, seconds: float) -> dict[str, float]:
    """RSS (MB) and CPU (% of one core over `seconds`) of a worker with nothing to do,
    measured after it has been up and idle for 2 seconds."""
    with running(command, db) as worker:
        worker.wait_ready()
        time.sleep(2.0)
        worker.check_alive()
        cpu = tree_cpu(worker.proc.pid)
        started = time.perf_counter()
        time.sleep(seconds)
        worker.check_alive()
        cpu = tree_cpu(worker.proc.pid) - cpu
        span = time.perf_counter() - started
        rss = tree_rss_mb(worker.proc.pid)
    return {"idle_rss_mb": rss, "idle_cpu_pct": 100 * cpu / span}


STEADY_BACKLOG = 2_000  # the producer tops the queue up to this many waiting or running jobs
STEADY_BATCH = 1_000
STEADY_WARMUP = 3.0


def steady(db: Database, command: WorkerCommand, seconds: float) -> float:
    """Completions per second of a `rota worker` while a producer keeps the queue's
    backlog small (enqueue_many of STEADY_BATCH whenever fewer than STEADY_BACKLOG jobs
    wait or run), counted after a warm-up: what a steadily fed worker does, against the
    drain of a burst enqueued beforehand. The backlog is read from rota's kept counts
    (`queue_list`), never by counting rows beside a large history."""
    with tasks.make_app(db.url) as app, running(command, db) as worker:
        worker.wait_ready()
        task = app.get_task(tasks.NOOP_ASYNC)
        started = time.monotonic()
        first: tuple[int, float] | None = None
        while time.monotonic() - started < STEADY_WARMUP + seconds:
            worker.check_alive()
            done, backlog = done_and_backlog(app)
            if first is None and time.monotonic() - started >= STEADY_WARMUP:
                first = (done, time.monotonic())
            if backlog < STEADY_BACKLOG:
                task.enqueue_many([{"n": i} for i in range(STEADY_BATCH)])
            else:
                time.sleep(0.005)
        done, _ = done_and_backlog(app)
        if first is None:
            raise BenchError("steady run too short")
        return (done - first[0]) / (time.monotonic() - first[1])


def done_and_backlog(app: rota.app.App, queue: str = QUEUE) -> tuple[int, int]:
    """Jobs of `queue` finished (completed or dead-lettered), and waiting or running, from
    rota's kept counts (cheap beside any history, unlike counting rows)."""
    for report in app.driver.queue_list():
        if report.name == queue:
            c = report.counts
            done = c.get("completed", 0) + c.get("discarded", 0)
            return done, c.get("available", 0) + c.get("running", 0)
    return 0, 0


def live(
    db: Database,
    jobs: int,
    queue: str,
    backlog: int = 5_000,
    task_name: str = tasks.NOOP_ASYNC,
    processes: int = 1,
) -> None:
    """Run `jobs` jobs of `task_name` (a no-op; `tasks.FAIL_ONCE` for dead letters) on
    `queue` through a `rota worker`, fed steadily (at most `backlog` waiting), to the end:
    a history made the way a deployment makes it, each job inserted, claimed and finished
    in transactions of its own while (auto)vacuum runs, instead of rows written finished
    with SQL. `processes` worker processes of 100 slots each share the work. Where the
    server's autovacuum is off, a VACUUM every minute stands in."""
    batch = 1_000
    with (
        vacuum_stand_in(db),
        tasks.make_app(db.url) as app,
        running(WorkerCommand(100, processes=processes, queue=queue), db) as worker,
    ):
        worker.wait_ready()
        task = app.get_task(task_name)
        sent = 0
        while True:
            worker.check_alive()
            done, waiting = done_and_backlog(app, queue)
            if done >= jobs:
                return
            if sent < jobs and waiting < backlog:
                count = min(batch, jobs - sent)
                task.enqueue_many([{"n": i} for i in range(count)], queue=queue)
                sent += count
            else:
                time.sleep(0.01)


def latency(
    db: Database,
    samples: int,
    command: WorkerCommand,
    *,
    warmup: int = 10,
    spacing: tuple[float, float] = (0.01, 0.02),
) -> dict[str, list[float]]:
    """Enqueue-to-start against an idle `rota worker`: enqueue `samples` jobs one at a time
    (each after the previous one started, then a random 10-20 ms pause) and return seconds
    from the enqueue() call to the task start, and from enqueue() returning (the commit)
    to the start. The task reports its start over a Unix datagram socket; both sides read
    CLOCK_MONOTONIC, one clock for every process on Linux."""
    folder = Path(tempfile.mkdtemp(prefix="rota-bench-stamps-"))
    path = str(folder / "stamps")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    from_call: list[float] = []
    from_commit: list[float] = []
    try:
        with running(command, db, {tasks.STAMPS_ENV: path}) as worker:
            worker.wait_ready()
            with tasks.make_app(db.url) as app:
                task = app.get_task(tasks.STAMP)
                app.check_schema()
                for seq in range(warmup + samples):
                    called = time.monotonic()
                    task.enqueue(seq=seq)
                    returned = time.monotonic()
                    # Polling would pick a job up within poll_interval (1s): 10s is stuck.
                    sock.settimeout(10.0)
                    try:
                        got, started = sock.recv(256).decode().split()
                    except TimeoutError:
                        worker.check_alive()
                        raise BenchError(f"latency: job {seq} did not start within 10s") from None
                    if int(got) != seq:
                        raise BenchError(f"latency: expected the start of job {seq}, got {got}")
                    if seq >= warmup:
                        from_call.append(float(started) - called)
                        from_commit.append(float(started) - returned)
                    time.sleep(random.uniform(*spacing))
    finally:
        sock.close()
        shutil.rmtree(folder, ignore_errors=True)
    return {"from_call": from_call, "from_commit": from_commit}
