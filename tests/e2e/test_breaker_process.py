"""A dead downstream behind a real `rota worker` process, on both dialects: the queue with
a circuit breaker stops after a handful of attempts, probes with one trial job per
cool-down, and completes everything once the downstream is back; the same jobs on a queue
without a breaker spend all their retries and end as dead letters."""

from __future__ import annotations

from pathlib import Path

import pytest

import rota
from tests.e2e.test_worker_processes import Spawn, spawn, until  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e
JOBS = 40
ATTEMPTS = 5


def spent(app: rota.App, queue: str) -> int:
    """Attempts the queue's jobs have used (running ones included)."""
    return sum(j.attempt for j in app.list_jobs(queue=queue, limit=1000))


def states(app: rota.App, queue: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in app.list_jobs(queue=queue, limit=1000):
        counts[str(job.state)] = counts.get(str(job.state), 0) + 1
    return counts


def test_a_dead_downstream_does_not_burn_every_jobs_retries(
    app: rota.App,
    database_url: str,
    tmp_path: Path,
    spawn: Spawn,  # noqa: F811
) -> None:
    app.queues.set_breaker("guarded", threshold=0.5, min_attempts=10, window=60, cooldown=1.5)
    rows = [
        rota.drivers.base.JobInsert("brk.call", queue, f'{{"n": {n}}}', 0, ATTEMPTS)
        for queue in ("guarded", "open")
        for n in range(JOBS)
    ]
    app.driver.job_insert_many(rows)
    worker = spawn(database_url, "--app", "breaker_app:app", queues="guarded=2,open=4")

    def breaker() -> rota.ops.hold_model.BreakerRecord:
        found = app.queues.breaker("guarded")
        assert found is not None
        return found

    # The downstream stays dead through the first opening and at least one failed trial.
    until(lambda: breaker().trips >= 2 and breaker().state == "open", worker, timeout=60)
    until(lambda: states(app, "open").get("discarded") == JOBS, worker, timeout=60)
    guarded_while_down = spent(app, "guarded")
    (tmp_path / "downstream-up").touch()
    until(lambda: states(app, "guarded").get("completed") == JOBS, worker, timeout=60)
    final = breaker()
    assert final.state == "closed" and not any(q.paused for q in app.list_queues())
    # Without a breaker every job spent all its attempts; with one, the attempts until the
    # leader's next pass (hold_interval, 0.5 s) plus one trial per cool-down.
    assert spent(app, "open") == JOBS * ATTEMPTS
    assert guarded_while_down < JOBS * ATTEMPTS // 2, guarded_while_down
    assert states(app, "guarded") == {"completed": JOBS}  # no dead letters
    events = [r.get("event") for r in worker.records() if r.get("logger") == "rota.holds"]
    assert events[:2] == ["breaker_opened", "breaker_half_open"]
    assert events[-1] == "breaker_closed" and events.count("breaker_opened") == final.trips
    print(
        f"attempts while the downstream was dead: guarded {guarded_while_down}, "
        f"open {JOBS * ATTEMPTS}; breaker opened {final.trips} times"
    )
