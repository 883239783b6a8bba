"""Rescue time after kill -9 (#17), the last phase of the chaos run: workers with the
default settings (30 s lease, presence swept every second) hold long jobs; one holding
jobs is SIGKILLed, and the time from the kill until each of its jobs runs again on
another worker is measured, then a replacement starts and the next one is killed."""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import rota
from examples.seatlark import harness
from examples.seatlark.harness import HarnessError, Process
from rota.drivers.base import JobFilter

QUEUE = "rescue"
TASK = "chaos.rescue_hold"
SLOTS = 4  # per worker
TIMEOUT = 90.0  # seconds a killed worker's jobs may take to come back (three leases)


def register(app: rota.App) -> None:
    @app.task(name=TASK, queue=QUEUE, max_attempts=1000)
    async def rescue_hold(seconds: float) -> None:
        await asyncio.sleep(seconds)  # running at every kill, whenever it comes


@dataclass
class RescueTimes:
    """Seconds from a SIGKILL until each job its worker held was running again."""

    kills: int = 0
    jobs: int = 0
    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    rescued_as: dict[str, int] = field(default_factory=dict)  # WorkerGone or LeaseExpired
    samples: list[float] = field(default_factory=list)

    def summarise(self) -> None:
        ordered = sorted(self.samples)
        self.jobs = len(ordered)
        if ordered:
            self.p50, self.p99, self.max = (
                _rank(ordered, 0.50),
                _rank(ordered, 0.99),
                ordered[-1],
            )


def _rank(ordered: list[float], share: float) -> float:
    """Nearest-rank percentile (with few samples the p99 is the slowest one)."""
    return round(ordered[max(0, math.ceil(share * len(ordered)) - 1)], 3)


def _start(url: str, out: Path, name: str) -> Process:
    # Default settings but the queue and the grace (the jobs sleep for an hour; the
    # final SIGTERM should not wait for them).
    argv = ["-m", "rota", "worker", "--app", "bench.chaos_app:app", "--queues"]
    argv += [f"{QUEUE}={SLOTS}", "--worker-id", name, "--grace", "1", "--log-level", "warning"]
    return harness._spawn(name, argv, {"ROTA_DATABASE_URL": url}, out)


def measure(url: str, out: Path, kills: int, rng: random.Random, workers: int = 3) -> RescueTimes:
    times = RescueTimes()
    if kills <= 0:
        return times
    app = rota.App(url)
    register(app)
    crew: list[Process] = []
    started = 0

    def spawn() -> None:
        nonlocal started
        started += 1
        crew.append(_start(url, out, f"rescue-worker-{started}"))

    def present() -> set[str]:
        return {r.worker for r in app.driver.presence.records() if r.lost_at is None}

    def running() -> dict[int, tuple[str, int]]:
        where = JobFilter(states=(rota.JobState.RUNNING,), task=TASK, limit=1000)
        return {j.id: (j.worker or "", j.attempt) for j in app.driver.job_list(where)}

    try:
        for _ in range(workers):
            spawn()
        # Room on the survivors for every job of the one killed: they come back at once.
        total = (workers - 1) * SLOTS
        for _ in range(total):
            app.enqueue(TASK, {"seconds": 3600.0})
        for _ in range(kills):
            names = {p.name for p in crew}
            harness.wait_until(
                lambda names=names: names <= present() and len(running()) == total,  # type: ignore[misc]
                "every worker present and every job running",
                60,
            )
            held = running()
            holders = sorted({w for w, _ in held.values()} & names)
            chosen = rng.choice(holders)
            victim = next(p for p in crew if p.name == chosen)
            theirs = {i: a for i, (w, a) in held.items() if w == victim.name}
            killed_at = time.monotonic()
            victim.kill()
            crew.remove(victim)
            back: dict[int, float] = {}
            deadline = killed_at + TIMEOUT
            while len(back) < len(theirs):
                if time.monotonic() > deadline:
                    raise HarnessError(
                        f"{len(theirs) - len(back)} job(s) of {victim.name} did not run again "
                        f"within {TIMEOUT:.0f} s of its SIGKILL"
                    )
                now_running = running()
                for job_id, attempt in theirs.items():
                    again = now_running.get(job_id)
                    if job_id not in back and again is not None and again[1] > attempt:
                        back[job_id] = time.monotonic() - killed_at
                time.sleep(0.01)
            times.kills += 1
            times.samples.extend(back.values())
            for job_id in theirs:
                job = app.get_job(job_id)
                kind = job.history[-1].error_type if job and job.history else None
                times.rescued_as[str(kind)] = times.rescued_as.get(str(kind), 0) + 1
            spawn()
    finally:
        for process in crew:
            if process.alive:
                process.stop(timeout=10)
        app.close()
    times.summarise()
    return times


def main() -> None:
    """The rescue phase alone, on any database (the chaos run covers PostgreSQL):

    python -m bench.chaos_rescue --url sqlite:////tmp/rescue/rota.db --kills 15
    """
    import argparse
    import json
    from dataclasses import asdict

    parser = argparse.ArgumentParser(prog="python -m bench.chaos_rescue", description=main.__doc__)
    parser.add_argument("--url", required=True, help="a database it may migrate and fill")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--out", type=Path, default=harness.REPO / "out" / "rescue")
    parser.add_argument("--seed", type=int, default=10)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    app = rota.App(args.url)
    app.migrate()
    app.close()
    times = measure(args.url, args.out.resolve(), args.kills, random.Random(args.seed))
    figures = {k: v for k, v in asdict(times).items() if k != "samples"}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
