"""Chaos: workers are killed with SIGKILL at random points while jobs make effects.
Every job must finish, and every effect must happen exactly once per job: through
ctx.transaction(), through durable steps with idempotency keys, and through checkpoints
(a resumed job does not redo the chunks it finished)."""

from __future__ import annotations

import importlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

import rota
from tests.helpers import wait_for

pytestmark = pytest.mark.e2e

APPS = Path(__file__).parent / "apps"
FAST = [
    "--lease",
    "1",
    "--heartbeat",
    "0.2",
    "--poll-interval",
    "0.1",
    "--rescue-interval",
    "0.2",
    "--stage-interval",
    "0.1",
    "--leader-ttl",
    "1",
    "--grace",
    "1",
    "--log-level",
    "info",
]
PAY_JOBS, STEPPED_JOBS, CHUNKED_JOBS, CHUNKS = 20, 8, 4, 15
KILLS = 8


def start_worker(database_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, ROTA_DATABASE_URL=database_url)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(APPS), env.get("PYTHONPATH")]))
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rota",
                "worker",
                "--app",
                "chaos_app:app",
                "--queues",
                "chaos=4",
                *FAST,
            ],
            env=env,
            stdout=out,
            stderr=out,
        )


def load_chaos_app(database_url: str) -> ModuleType:
    """The tasks module, bound to this test's database (it reads the URL at import)."""
    os.environ["ROTA_DATABASE_URL"] = database_url
    sys.path.insert(0, str(APPS))
    try:
        import chaos_app

        return importlib.reload(chaos_app)
    finally:
        sys.path.remove(str(APPS))
        del os.environ["ROTA_DATABASE_URL"]


def rows(app: rota.App, sql: str) -> list[tuple[object, ...]]:
    with app.transaction() as conn:
        return [
            tuple(r.values()) if isinstance(r, dict) else tuple(r)
            for r in conn.execute(sql).fetchall()
        ]


def test_sigkill_at_random_points_gives_exactly_one_effect_per_job(
    database_url: str, tmp_path: Path
) -> None:
    app = rota.App(database_url)
    app.migrate()
    with app.transaction() as conn:
        conn.execute("CREATE TABLE effects (job_id INTEGER, n INTEGER)")
        conn.execute("CREATE TABLE calls (job_id INTEGER, what TEXT, attempt INTEGER)")
        conn.execute("CREATE TABLE api (key TEXT PRIMARY KEY, job_id INTEGER, what TEXT)")
    chaos_app = load_chaos_app(database_url)
    pays = chaos_app.pay.enqueue_many([{"n": i} for i in range(PAY_JOBS)])
    stepped = chaos_app.stepped.enqueue_many([{"n": i} for i in range(STEPPED_JOBS)])
    chunked = chaos_app.chunked.enqueue_many([{"chunks": CHUNKS}] * CHUNKED_JOBS)
    chaos_app.app.close()
    all_ids = [j.id for j in (*pays, *stepped, *chunked)]
    log = tmp_path / "workers.log"
    rng = random.Random(os.getpid())

    def all_finished() -> bool:
        return all((j := app.get_job(i)) is not None and j.state.finished for i in all_ids)

    for _ in range(KILLS):
        worker = start_worker(database_url, log)
        # Kill it at a random moment while it is running jobs.
        wait_for(
            lambda: app.list_jobs(state="running", limit=1) or all_finished(),
            timeout=30,
            interval=0.01,
        )
        time.sleep(rng.uniform(0.0, 0.4))
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)

    started_before = log.read_text().count("started: queues")
    final = start_worker(database_url, log)
    try:
        # Let it start before it may be told to stop (a SIGTERM during imports kills it).
        wait_for(lambda: log.read_text().count("started: queues") > started_before, timeout=30)
        wait_for(all_finished, timeout=90, interval=0.2)
    finally:
        final.send_signal(signal.SIGTERM)
        assert final.wait(timeout=30) == 0, log.read_text()[-3000:]

    jobs = {i: app.get_job(i) for i in all_ids}
    assert all(j is not None and j.state is rota.JobState.COMPLETED for j in jobs.values()), {
        i: (j.state, j.history[-1:]) for i, j in jobs.items() if j and j.state.value != "completed"
    }
    lost = {
        i: sum(a.outcome is rota.Outcome.LOST for a in j.history)
        for i, j in jobs.items()
        if j is not None
    }
    assert sum(lost.values()) > 0, "no kill landed on a running job: the test proved nothing"

    # 1. ctx.transaction(): exactly one effect row per pay job.
    effects = Counter(job_id for job_id, _ in rows(app, "SELECT job_id, n FROM effects"))
    assert {j.id: effects[j.id] for j in pays} == {j.id: 1 for j in pays}

    # 2. Durable steps: one outside effect per (job, step), and no step called again after
    #    the attempt that recorded it.
    api = Counter((job_id, what) for _, job_id, what in rows(app, "SELECT * FROM api"))
    recorded = {
        (job_id, name): attempt
        for job_id, name, attempt in rows(app, "SELECT job_id, name, attempt FROM rota_steps")
    }
    calls = rows(app, "SELECT job_id, what, attempt FROM calls")
    for job in stepped:
        for name in ("reserve", "charge", "ship"):
            assert api[(job.id, name)] == 1
            assert (job.id, name) in recorded
    for job_id, what, attempt in calls:
        if (job_id, what) in recorded:
            assert attempt <= recorded[(job_id, what)], (job_id, what, attempt)

    # 3. Checkpoints: every chunk done once outside, and a chunk is redone only when a kill
    #    landed between its start and its checkpoint (at most once per lost attempt).
    chunk_calls = Counter(job_id for job_id, what, _ in calls if str(what).startswith("chunk-"))
    for job in chunked:
        assert all(api[(job.id, f"chunk-{c}")] == 1 for c in range(CHUNKS))
        assert CHUNKS <= chunk_calls[job.id] <= CHUNKS + lost[job.id]
        assert jobs[job.id].checkpoint == CHUNKS  # type: ignore[union-attr]
    app.close()
