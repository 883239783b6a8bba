"""Sagas survive SIGKILL: worker processes are killed at random points while saga steps
and compensations run. Every saga must still finish as it should (completed, or
compensated when its last step fails), with each step and compensation effect made
exactly once and each transition recorded once."""

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
    "--lease", "1", "--heartbeat", "0.2", "--poll-interval", "0.1", "--rescue-interval", "0.2",
    "--stage-interval", "0.1", "--leader-ttl", "1", "--grace", "1", "--log-level", "info",
]  # fmt: skip
SAGAS, KILLS = 8, 5


def start_worker(database_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, ROTA_DATABASE_URL=database_url)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(APPS), env.get("PYTHONPATH")]))
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "rota", "worker", "--app", "saga_app:app", "--queues",
             "sagas=4", *FAST],
            env=env,
            stdout=out,
            stderr=out,
        )  # fmt: skip


def load_saga_app(database_url: str) -> ModuleType:
    os.environ["ROTA_DATABASE_URL"] = database_url
    sys.path.insert(0, str(APPS))
    try:
        import saga_app

        return importlib.reload(saga_app)
    finally:
        sys.path.remove(str(APPS))
        del os.environ["ROTA_DATABASE_URL"]


def rows(app: rota.App, sql: str) -> list[tuple[object, ...]]:
    with app.transaction() as conn:
        return [
            tuple(r.values()) if isinstance(r, dict) else tuple(r)
            for r in conn.execute(sql).fetchall()
        ]


def test_sigkill_mid_saga_finishes_every_saga_with_each_effect_once(
    database_url: str, tmp_path: Path
) -> None:
    app = rota.App(database_url)
    app.migrate()
    with app.transaction() as conn:
        conn.execute("CREATE TABLE calls (saga TEXT, what TEXT, attempt INTEGER)")
        conn.execute("CREATE TABLE api (key TEXT PRIMARY KEY, saga TEXT, what TEXT)")
        conn.execute("CREATE TABLE ledger (saga TEXT, what TEXT)")
    saga_app = load_saga_app(database_url)
    keys = [f"order-{i}" for i in range(SAGAS)]
    failing = {k for i, k in enumerate(keys) if i % 2}
    for key in keys:
        saga_app.app.sagas.start(saga_app.fulfilment, key=key, data={"fail": key in failing})
    saga_app.app.close()
    log = tmp_path / "workers.log"
    rng = random.Random(os.getpid())

    def all_finished() -> bool:
        return all(s.status.finished for s in app.sagas.list(limit=100))

    for _ in range(KILLS):
        worker = start_worker(database_url, log)
        try:
            wait_for(
                lambda: app.list_jobs(state="running", limit=1) or all_finished(),
                timeout=30,
                interval=0.01,
            )
            time.sleep(rng.uniform(0.0, 0.3))
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)

    started_before = log.read_text().count("started: queues")
    final = start_worker(database_url, log)
    try:
        wait_for(lambda: log.read_text().count("started: queues") > started_before, timeout=30)
        wait_for(all_finished, timeout=90, interval=0.2)
    finally:
        final.send_signal(signal.SIGTERM)
        assert final.wait(timeout=30) == 0, log.read_text()[-3000:]

    sagas = {s.key: s for s in app.sagas.list(limit=100)}
    for key in keys:
        expected = rota.SagaStatus.COMPENSATED if key in failing else rota.SagaStatus.COMPLETED
        assert sagas[key].status is expected, (key, sagas[key].history)
        moves = Counter((h["event"], h.get("step")) for h in sagas[key].history)
        assert all(n == 1 for n in moves.values()), (key, moves)

    effects = Counter((saga, what) for _, saga, what in rows(app, "SELECT * FROM api"))
    expected_effects = Counter()
    for key in keys:
        done = ["reserve", "release"] if key in failing else ["reserve", "ship"]
        expected_effects.update((key, what) for what in done)
    assert effects == expected_effects  # each outside effect once, thanks to its key
    ledger = Counter((saga, what) for saga, what in rows(app, "SELECT * FROM ledger"))
    expected_ledger = Counter((k, "pay") for k in keys) + Counter((k, "refund") for k in failing)
    assert ledger == expected_ledger  # each write in the move's transaction exactly once

    jobs = [j for j in app.list_jobs(limit=1000) if j.task.startswith("saga:")]
    lost = sum(a.outcome is rota.Outcome.LOST for j in jobs for a in j.history)
    calls = Counter((saga, what) for saga, what, _ in rows(app, "SELECT * FROM calls"))
    assert lost > 0, "no kill landed on a running saga job: the test proved nothing"
    # Every effect was called at least once; repeats (calls beyond effects) were absorbed.
    assert all(calls[k] >= 1 for k in effects)
    print(f"lost attempts {lost}, calls {sum(calls.values())}, effects {sum(effects.values())}")
