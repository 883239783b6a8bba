"""A batch processed by two real `rota worker` processes on both dialects: parallelism holds
across processes (sampled), both take part, and a worker SIGKILLed mid-batch loses an
attempt that an ignore rule on DisruptionTarget excuses (SEMANTICS §2.12 case 10)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import rota
from rota.batches import FailureRule
from rota.job import JobState
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
    "--leader-ttl",
    "1",
    "--batch-interval",
    "0.1",
    "--stage-interval",
    "0.1",
]


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    env = dict(os.environ)
    env.pop("ROTA_APP", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(APPS), env.get("PYTHONPATH", "")) if p)
    env["ROTA_DATABASE_URL"] = database_url
    procs = []
    for n in range(2):
        with (tmp_path / f"worker-{n}.log").open("wb") as log:
            argv = [
                sys.executable,
                "-m",
                "rota",
                "worker",
                "--app",
                "batch_app:app",
                "--queues",
                "default=2",
                "--worker-id",
                f"w{n}",
                *FAST,
            ]
            procs.append(
                subprocess.Popen(
                    argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_two_processes_share_a_batch_and_a_killed_worker_is_excused(
    app: rota.App, workers: list[subprocess.Popen[bytes]]
) -> None:
    # Each worker runs at most 2 jobs and the batch 4: both must take part. The test
    # process only creates and watches; it registers the same task name.
    @app.task(name="batch_app.chunk")
    def chunk(ctx: rota.Context, pause: float) -> None: ...

    status = app.batch(
        chunk,
        completions=16,
        indexed=True,
        parallelism=4,
        args={"pause": 0.3},
        backoff_limit=0,  # any counted failure would fail the batch
        failure_rules=[FailureRule("ignore", conditions=["DisruptionTarget"])],
    )
    peak = 0
    killed = False
    deadline = time.monotonic() + 60
    while not app.batches.get(status.id).finished:
        assert time.monotonic() < deadline, app.batches.get(status.id)
        jobs = app.batches.jobs(status.id)
        running = [j for j in jobs if j.state is JobState.RUNNING]
        peak = max(peak, len(running))
        if not killed and sum(1 for j in jobs if j.state is JobState.COMPLETED) >= 4:
            victims = [j for j in running if j.worker == "w0"]
            if victims:
                os.killpg(workers[0].pid, signal.SIGKILL)
                killed = True
        time.sleep(0.05)
    final = app.batches.get(status.id)
    assert (final.condition, final.reason) == ("Complete", "CompletionsReached"), final
    assert final.completed_indexes == "0-15" and final.failed == 0
    assert killed and final.ignored >= 1
    jobs = app.batches.jobs(status.id)
    # Lost by the kill: rescued as gone (#17), or on its lease if it was not yet seen so.
    lost_types = {"WorkerGone", "LeaseExpired"}
    lost = [j for j in jobs if j.history and j.history[-1].error_type in lost_types]
    assert len(lost) == final.ignored
    done = [j for j in jobs if j.state is JobState.COMPLETED]
    assert {j.history[-1].worker for j in jobs} == {"w0", "w1"}  # both took part
    assert {j.result["worker"] for j in done} <= {"w0", "w1"}
    assert sorted(j.result["index"] for j in done) == list(range(16))
    assert peak <= 4
    wait_for(lambda: workers[1].poll() is None)  # the survivor still runs
