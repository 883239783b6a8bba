"""Partition chaos (#21): three workers on PostgreSQL, one of them behind a TCP proxy
(tests/proxy.py) that is cut for longer than the lease while its jobs run, then healed.

    python -m bench.chaos --fault partition                    # black hole, sockets open
    python -m bench.chaos --fault partition --variant reset    # connections reset, refused
    python -m bench.chaos --fault partition --variant leader   # the cut-off worker leads

It reports the time the cut-off worker took to notice and to stop its jobs (LeaseLost),
jobs it started while cut off, effects applied after a lease had run out by tasks that
honour cancellation, lost jobs, jobs whose effect was applied twice, its slots working
after the heal and the time until all of them were, and (leader variant) whether two
workers led at once. It exits 1 when a figure is off.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import psycopg

import rota
from tests.proxy import TcpProxy

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
SLOTS = 4
CUT_OFF = "cut-off"


@dataclass
class Figures:
    variant: str
    lease: float
    heartbeat: float
    cut_seconds: float
    notice_s: float | None = None  # cut -> "claims paused"
    lease_lost_s: float | None = None  # cut -> "LeaseLost"
    started_while_cut_off: int = 0
    effects_after_lease_expiry: int = 0
    lost: int = 0
    duplicate_effects: int = 0
    slots_after_heal: int = 0
    recovery_s: float | None = None  # heal -> every slot of the cut-off worker running
    leaders_overlap_s: float = 0.0
    cut_off_led_at_cut: bool | None = None
    jobs: int = 0
    notes: list[str] = field(default_factory=list)


class WorkerProcess:
    """A `rota worker` process whose log lines are stamped on arrival (monotonic)."""

    def __init__(self, name: str, url: str, out: Path, events_dir: Path, args: Any) -> None:
        self.name = name
        self.lines: list[tuple[float, str]] = []
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
        env.update(ROTA_DATABASE_URL=url, CHAOS_EVENTS=str(events_dir), PYTHONUNBUFFERED="1")
        argv = [
            sys.executable,
            "-m",
            "rota",
            "worker",
            "--app",
            "bench.chaos_partition_app:app",
            "--queues",
            f"default={SLOTS}",
            "--lease",
            str(args.lease),
            "--heartbeat",
            str(args.heartbeat),
            "--leader-ttl",
            str(args.leader_ttl),
            "--rescue-interval",
            "0.5",
            "--poll-interval",
            "0.5",
            "--grace",
            "2",
            "--worker-id",
            name,
        ]
        self.log = (out / f"{name}.log").open("w")
        self.proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
        )
        assert self.proc.stderr is not None
        threading.Thread(target=self._read, args=(self.proc.stderr,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), line.rstrip()))
            self.log.write(line)
            self.log.flush()

    def first(self, pattern: str, after: float = 0.0) -> float | None:
        for at, line in list(self.lines):
            if at >= after and re.search(pattern, line):
                return at
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def events(directory: Path) -> list[dict[str, Any]]:
    """What the tasks recorded (bench/chaos_partition_app.py), in time order."""
    found: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        found.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return sorted(found, key=lambda e: e["t"])


def recreate(server: str, dbname: str) -> str:
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{dbname}"')
    return urlsplit(server)._replace(path=f"/{dbname}").geturl()


def drop(server: str, dbname: str) -> None:
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    ends = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > ends:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def states(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT state, count(*) FROM rota_jobs GROUP BY state").fetchall()
    return {str(state): int(n) for state, n in rows}


def rescues(url: str) -> dict[tuple[int, int], float]:
    """(job, attempt) -> when the database took that attempt's job back (lease expired)."""
    app = rota.App(url)
    try:
        found: dict[tuple[int, int], float] = {}
        with psycopg.connect(url, autocommit=True) as conn:
            ids = [int(r[0]) for r in conn.execute("SELECT id FROM rota_jobs").fetchall()]
        for job_id in ids:
            full = app.get_job(job_id)
            for attempt in full.history if full else ():
                if attempt.finished_at and "lease expired" in (attempt.message or ""):
                    found[(job_id, attempt.attempt)] = attempt.finished_at.timestamp()
        return found
    finally:
        app.close()


def concurrency(evts: list[dict[str, Any]], worker: str) -> list[tuple[float, int]]:
    """(time, running) after every start and end of `worker`'s attempts."""
    marks: list[tuple[float, int]] = []
    for e in evts:
        if e["worker"] != worker:
            continue
        marks.append((e["t"], 1 if e["kind"] == "start" else -1))
    running = 0
    out = []
    for t, step in sorted(marks):
        running += step
        out.append((t, running))
    return out


def leadership(worker: WorkerProcess) -> list[tuple[float, float]]:
    """Intervals (monotonic) in which `worker` believed it led, from its log."""
    spans: list[tuple[float, float]] = []
    since: float | None = None
    for at, line in list(worker.lines):
        if "gained leadership" in line and since is None:
            since = at
        elif "lost leadership" in line and since is not None:
            spans.append((since, at))
            since = None
    if since is not None:
        spans.append((since, time.monotonic()))
    return spans


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def run(args: argparse.Namespace, url: str, out: Path, figures: Figures) -> None:
    with rota.App(url) as app:
        app.migrate()
    server = urlsplit(url)
    proxy = TcpProxy((server.hostname or "127.0.0.1", server.port or 5432)).start()
    events_dir = out / "events"
    events_dir.mkdir()
    # The tasks' module makes its App from the environment, as the workers do.
    os.environ["ROTA_DATABASE_URL"] = url
    import bench.chaos_partition_app as tasks

    producer = tasks.app
    workers: list[WorkerProcess] = []

    def enqueue(count: int, seconds: float) -> None:
        for i in range(count):
            (tasks.work_async if i % 2 else tasks.work).enqueue(seconds=seconds)
        figures.jobs += count

    try:
        if args.variant == "leader":
            # The cut-off worker starts first and leads when the cut comes.
            workers.append(WorkerProcess(CUT_OFF, proxy.url(url), out, events_dir, args))
            wait_until(lambda: workers[0].first("gained leadership"), 30, "a leader")
        for i in (1, 2):
            workers.append(WorkerProcess(f"direct-{i}", url, out, events_dir, args))
        if args.variant != "leader":
            wait_until(lambda: any(w.first("gained leadership") for w in workers), 30, "leader")
            workers.append(WorkerProcess(CUT_OFF, proxy.url(url), out, events_dir, args))
        cut_off = next(w for w in workers if w.name == CUT_OFF)
        wait_until(lambda: all(w.first("started: queues") for w in workers), 30, "workers")
        # Work for every slot, lasting past the cut: the cut-off worker holds some of it.
        enqueue(3 * SLOTS * 3, args.task_seconds)
        wait_until(
            lambda: sum(e["worker"] == CUT_OFF for e in events(events_dir)) >= SLOTS,
            30,
            "the cut-off worker to run jobs",
        )
        leads = leadership(cut_off)
        figures.cut_off_led_at_cut = bool(leads and leads[-1][1] >= time.monotonic() - 0.1)
        cut_at, cut_wall = time.monotonic(), time.time()
        if args.variant == "reset":
            proxy.refuse()
            proxy.reset()
        else:
            proxy.blackhole()
        enqueue(2 * SLOTS, args.task_seconds)  # offered to everyone while it is cut off
        time.sleep(args.cut)
        heal_wall = time.time()
        proxy.forward()
        # A burst after the heal: how soon does the cut-off worker run on every slot?
        enqueue(3 * SLOTS * 4, 1.0)
        wait_until(
            lambda: states(url).get("completed", 0) >= figures.jobs,
            args.timeout,
            "every job to complete",
        )
        evts = events(events_dir)
        figures.notice_s = _since(cut_off.first(r"claims paused", cut_at), cut_at)
        figures.lease_lost_s = _since(cut_off.first(r"LeaseLost", cut_at), cut_at)
        figures.started_while_cut_off = sum(
            1
            for e in evts
            if e["worker"] == CUT_OFF and e["kind"] == "start" and cut_wall < e["t"] < heal_wall
        )
        taken_back = rescues(url)
        figures.effects_after_lease_expiry = sum(
            1
            for e in evts
            if e["kind"] == "effect"
            and (e["job"], e["attempt"]) in taken_back
            and e["t"] > taken_back[(e["job"], e["attempt"])]
        )
        per_job: dict[int, int] = {}
        for e in evts:
            if e["kind"] == "effect":
                per_job[e["job"]] = per_job.get(e["job"], 0) + 1
        figures.duplicate_effects = sum(1 for n in per_job.values() if n > 1)
        final = states(url)
        figures.lost = figures.jobs - final.get("completed", 0)
        after = [(t, n) for t, n in concurrency(evts, CUT_OFF) if t > heal_wall]
        figures.slots_after_heal = max((n for _, n in after), default=0)
        full = next((t for t, n in after if n >= SLOTS), None)
        figures.recovery_s = None if full is None else round(full - heal_wall, 2)
        spans = {w.name: leadership(w) for w in workers}
        names = list(spans)
        figures.leaders_overlap_s = round(
            sum(overlap(spans[a], spans[b]) for i, a in enumerate(names) for b in names[i + 1 :]),
            3,
        )
    finally:
        for worker in workers:
            worker.stop()
        proxy.stop()
        producer.close()


def _since(at: float | None, start: float) -> float | None:
    return None if at is None else round(at - start, 2)


def passed(figures: Figures) -> list[str]:
    """What is off (empty when the run passed)."""
    off = []
    if figures.notice_s is None or figures.notice_s > figures.heartbeat + 2.0:
        off.append("time to notice")
    if figures.lease_lost_s is None or figures.lease_lost_s >= figures.lease:
        off.append("time to LeaseLost")
    for name in ("started_while_cut_off", "effects_after_lease_expiry", "lost"):
        if getattr(figures, name):
            off.append(name.replace("_", " "))
    if figures.duplicate_effects:
        off.append("duplicate effects")
    if figures.slots_after_heal < SLOTS:
        off.append("slots after heal")
    if figures.recovery_s is None or figures.recovery_s > 5.0:
        off.append("time to recovery")
    if figures.leaders_overlap_s > 0:
        off.append("two leaders at once")
    return off


def report(f: Figures, off: list[str]) -> None:
    def line(name: str, value: object, bad: bool) -> None:
        print(f"  {'✗' if bad else '✓'} {name:<44} {value}")

    print(
        f"partition ({f.variant}): lease {f.lease:g}s, heartbeat {f.heartbeat:g}s, "
        f"cut {f.cut_seconds:g}s, {f.jobs} jobs"
    )
    line("time to notice (s)", f.notice_s, "time to notice" in off)
    line("time to LeaseLost (s)", f.lease_lost_s, "time to LeaseLost" in off)
    line("jobs started while cut off", f.started_while_cut_off, bool(f.started_while_cut_off))
    line("effects after lease expiry", f.effects_after_lease_expiry, "effects" in str(off))
    line("lost jobs", f.lost, bool(f.lost))
    line("fenced duplicates (effects twice)", f.duplicate_effects, bool(f.duplicate_effects))
    line(f"slots working after heal (of {SLOTS})", f.slots_after_heal, f.slots_after_heal < SLOTS)
    line("time to full recovery (s)", f.recovery_s, "time to recovery" in off)
    if f.variant == "leader":
        line("cut-off worker led at the cut", f.cut_off_led_at_cut, not f.cut_off_led_at_cut)
    line("two leaders at once (s)", f.leaders_overlap_s, f.leaders_overlap_s > 0)
    print("PASSED" if not off else f"FAILED: {', '.join(off)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos --fault partition")
    parser.add_argument("--fault", choices=["partition"], default="partition")
    parser.add_argument("--variant", choices=["blackhole", "reset", "leader"], default="blackhole")
    parser.add_argument("--lease", type=float, default=6.0)
    parser.add_argument("--heartbeat", type=float, default=2.0)
    parser.add_argument("--leader-ttl", type=float, default=4.0)
    parser.add_argument("--cut", type=float, default=15.0, help="seconds cut off (> lease)")
    parser.add_argument("--task-seconds", type=float, default=10.0)
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--dbname", default="rota_chaos_partition")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--out", type=Path, default=REPO / "out" / "chaos-partition")
    args = parser.parse_args(argv)
    if args.cut <= args.lease:
        parser.error("--cut must be longer than --lease")
    out: Path = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    figures = Figures(args.variant, args.lease, args.heartbeat, args.cut)
    url = recreate(args.server, args.dbname)
    try:
        run(args, url, out, figures)
    except TimeoutError as exc:
        figures.notes.append(str(exc))
        print(f"error: {exc}")
    finally:
        with contextlib.suppress(psycopg.Error):
            drop(args.server, args.dbname)
    off = passed(figures) + (["timed out"] if figures.notes else [])
    report(figures, off)
    (out / "result.json").write_text(
        json.dumps(
            {"figures": asdict(figures), "off": off, "at": datetime.now().isoformat()}, indent=2
        )
        + "\n"
    )
    return 0 if not off else 1


if __name__ == "__main__":
    sys.exit(main())
