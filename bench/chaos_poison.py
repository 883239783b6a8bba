"""The poison jobs of the chaos run (#17): tasks that fail with a NUL or a lone surrogate in
their message or with an exception whose str() raises, and a plain task hung past its
timeout, next to probe jobs that record every run they finish. The chaos workers load
`bench.chaos_app:app`: the Seatlark shop's app with these tasks added on a queue of their
own, so that a poisoned worker shows in the shop's figures as much as in these."""

from __future__ import annotations

import time
from dataclasses import dataclass

import rota

QUEUE = "poison"
_BACKOFF = rota.Backoff(base=0.2, cap=0.2)
# What each poison job must end with: its state, and the message of every attempt that
# ended on its own (not cut off by a SIGKILL: outcome `lost`).
EXPECTED = {
    "chaos.nul": ("discarded", "bad\\x00byte"),
    "chaos.surrogate": ("discarded", "bad \\ud800 text"),
    "chaos.broken_str": ("discarded", "<str() of BrokenStr failed: RuntimeError>"),
    "chaos.hung": ("discarded", "chaos.hung ran longer than its 1.0s timeout"),
}
PROBE = "chaos.probe"


class BrokenStr(Exception):
    """An exception whose str() raises, as a buggy client library's may."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


def register(app: rota.App) -> None:
    """Add the poison tasks and the probe to `app` (the shop's, in bench/chaos_app.py)."""

    @app.task(name="chaos.nul", queue=QUEUE, max_attempts=2, backoff=_BACKOFF)
    def nul() -> None:
        raise RuntimeError("bad\x00byte")

    @app.task(name="chaos.surrogate", queue=QUEUE, max_attempts=2, backoff=_BACKOFF)
    def surrogate() -> None:
        raise RuntimeError("bad \ud800 text")

    @app.task(name="chaos.broken_str", queue=QUEUE, max_attempts=2, backoff=_BACKOFF)
    def broken_str() -> None:
        raise BrokenStr()

    @app.task(name="chaos.hung", queue=QUEUE, timeout=1.0, max_attempts=1)
    def hung() -> None:
        time.sleep(3600)  # past its timeout and deaf to ctx.cancelled: the thread stays

    @app.task(name=PROBE, queue=QUEUE, max_attempts=20)
    def probe(ctx: rota.Context, n: int) -> int:
        """A healthy job: records that this attempt finished, then succeeds."""
        with app.transaction() as conn:
            conn.execute(
                "INSERT INTO chaos_probe_runs (job_id, attempt, worker) VALUES (%s, %s, %s)",
                (ctx.job.id, ctx.attempt, ctx.worker_id),
            )
        return n


def create_tables(app: rota.App) -> None:
    with app.transaction() as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS chaos_probe_runs (job_id bigint NOT NULL, "
            "attempt int NOT NULL, worker text NOT NULL, PRIMARY KEY (job_id, attempt))"
        )


def enqueue(app: rota.App, each: int = 2, probes: int = 100) -> None:
    """`each` jobs of every poison task, then the probes, so they share the workers'
    claims and completion batches."""
    for name in EXPECTED:
        app.tasks[name].enqueue_many([{}] * each)
    app.tasks[PROBE].enqueue_many([{"n": n} for n in range(probes)])


@dataclass
class PoisonAudit:
    poison_jobs: int = 0
    stuck: int = 0  # poison-queue jobs not finished
    wrong_outcome: int = 0  # a poison job without the outcome it must have
    cut_by_kills: int = 0  # every attempt of it was SIGKILLed: its outcome is untested
    probes: int = 0
    probes_completed: int = 0
    # A probe run again after one of its attempts had finished, on a worker that the
    # chaos did not SIGKILL: an outcome held back (a jammed completer) or lost.
    run_twice_after_success: int = 0

    @property
    def ok(self) -> bool:
        return (
            self.stuck == 0
            and self.wrong_outcome == 0
            and self.run_twice_after_success == 0
            and self.probes_completed == self.probes
        )


def audit(app: rota.App, killed: set[str]) -> PoisonAudit:
    result = PoisonAudit()
    with app.transaction() as conn:
        finished = {
            (row["job_id"], row["attempt"])
            for row in conn.execute("SELECT job_id, attempt FROM chaos_probe_runs")
        }
    jobs: list[rota.Job] = []
    before = None
    while batch := app.list_jobs(limit=10_000, before_id=before):
        jobs += [j for j in batch if j.queue == QUEUE]
        before = min(j.id for j in batch)
    for job in jobs:
        if not job.state.finished:
            result.stuck += 1
        if job.task == PROBE:
            result.probes += 1
            result.probes_completed += job.state is rota.JobState.COMPLETED
            result.run_twice_after_success += _reruns(job, finished, killed)
            continue
        result.poison_jobs += 1
        state, message = EXPECTED[job.task]
        ended = [a.message for a in job.history if a.outcome is not rota.Outcome.LOST]
        if not ended and job.state.value == state:
            result.cut_by_kills += 1
        elif job.state.value != state or any(m != message for m in ended):
            result.wrong_outcome += 1
    return result


def _reruns(job: rota.Job, finished: set[tuple[int, int]], killed: set[str]) -> int:
    for attempt in job.history[:-1]:
        if (job.id, attempt.attempt) in finished and attempt.worker not in killed:
            return 1
    return 0
