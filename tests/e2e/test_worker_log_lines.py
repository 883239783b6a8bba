"""A real `rota worker --log-format json` process logs one object per finished job (#19)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import rota
from tests.e2e.apps.e2e_tasks import register
from tests.e2e.test_worker_processes import Spawn, spawn, until

pytestmark = pytest.mark.e2e
__all__ = ["spawn"]  # the fixture, used by name


def test_json_line_per_job_and_quiet_queue(
    app: rota.App, database_url: str, spawn: Spawn, tmp_path: Path
) -> None:
    register(app)
    loud = app.enqueue("greet", {"name": "ada"})
    worker = spawn(database_url, queues="mail=2")
    until(lambda: worker.count_logged(f"#{loud.id} completed"), worker, timeout=20)
    (line,) = [r for r in worker.records() if r.get("job_id") == loud.id]
    assert line["level"] == "info" and line["logger"] == "rota.jobs"
    assert line["task"] == "greet" and line["outcome"] == "completed"
    assert line["attempt"] == 1 and line["queue"] == "mail"
    assert isinstance(line["duration"], float)

    quiet = spawn(database_url, "--quiet-queue", "mail", queues="mail=2")
    until(lambda: quiet.count_logged("started: queues"), quiet, timeout=20)
    worker.send(signal.SIGTERM)
    assert worker.wait(15) == 0
    hushed = app.enqueue("greet", {"name": "bob"})
    until(lambda: (j := app.get_job(hushed.id)) is not None and j.state.finished, quiet, timeout=20)
    assert not [r for r in quiet.records() if r.get("job_id") == hushed.id]
