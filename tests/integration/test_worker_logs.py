"""The worker's log (#19): one INFO line per finished job, WARNING with the error for
retries, dead letters and unknown tasks, quiet queues, and the default handler of a
worker started from Python with no logging set up (a real process)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rota
from tests.helpers import fast_settings, run_worker_until


def finished(app: rota.App, *ids: int) -> bool:
    return all((j := app.get_job(i)) is not None and j.state.finished for i in ids)


def job_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "rota.jobs"]


def test_one_line_per_finished_job_and_warnings_with_the_error(
    app: rota.App, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rota")  # before the worker: it asks once

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(max_attempts=2, backoff=rota.Backoff(base=0.01, cap=0.01))
    def charge(order: str) -> None:
        raise ValueError(f"card declined for [bold]{order}[/bold]")

    done = add.enqueue(a=1, b=2)
    failing = charge.enqueue(order="order-1817")
    with rota.App(database_url) as other:  # another deploy's task: this worker lacks it
        other.task(name="nobody.knows", max_attempts=1)(lambda: None)
        unknown = other.enqueue("nobody.knows", {})
    worker = rota.Worker(app, fast_settings())
    asyncio.run(run_worker_until(worker, lambda: finished(app, done.id, failing.id, unknown.id)))

    lines = {(r.levelno, r.getMessage()) for r in job_records(caplog)}
    info = [m for level, m in lines if level == logging.INFO]
    warnings = [m for level, m in lines if level == logging.WARNING]
    (completed,) = [m for m in info if f"#{done.id} " in m]
    assert completed.startswith(f"{add.name} #{done.id} completed in ")
    assert completed.endswith("s (attempt 1)")
    retried = [m for m in warnings if f"#{failing.id} will retry" in m]
    assert len(retried) == 1 and "(attempt 1 of 2)" in retried[0]
    assert retried[0].endswith("ValueError: card declined for [bold]order-1817[/bold]")
    (dead,) = [m for m in warnings if f"#{failing.id} dead-lettered" in m]
    assert "(attempt 2 of 2)" in dead and "card declined" in dead
    (lost,) = [m for m in warnings if f"#{unknown.id} " in m]
    assert "nobody.knows" in lost and "UnknownTaskError" in lost
    # The fields a JSON formatter writes travel on the record.
    (record,) = [r for r in job_records(caplog) if f"#{done.id} " in r.getMessage()]
    assert record.__dict__["outcome"] == "completed" and record.__dict__["duration"] >= 0


def test_quiet_queues_drop_the_info_line_but_not_the_warnings(
    app: rota.App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rota")

    @app.task(queue="hot")
    def tick() -> None:
        pass

    @app.task(queue="hot", max_attempts=1)
    def boom() -> None:
        raise RuntimeError("hot failure")

    @app.task
    def slow() -> None:
        pass

    ids = [tick.enqueue().id, boom.enqueue().id, slow.enqueue().id]
    settings = fast_settings(queues={"hot": 2, "default": 2}, quiet_queues={"hot"})
    asyncio.run(run_worker_until(rota.Worker(app, settings), lambda: finished(app, *ids)))
    messages = [(r.levelno, r.getMessage()) for r in job_records(caplog)]
    assert not [m for level, m in messages if level == logging.INFO and "#" + str(ids[0]) in m]
    assert [m for level, m in messages if level == logging.WARNING and "hot failure" in m]
    assert [m for level, m in messages if level == logging.INFO and f"#{ids[2]} completed" in m]


def test_quiet_queues_is_checked() -> None:
    with pytest.raises(rota.ConfigurationError, match="set of queue names"):
        rota.WorkerSettings(quiet_queues="hot")  # type: ignore[arg-type]
    assert rota.WorkerSettings(quiet_queues={"*"}).quiet_queues == frozenset({"*"})


def test_worker_started_from_python_logs_without_logging_set_up(
    sqlite_url: str, tmp_path: Path
) -> None:
    """docs/workers.md's way of running a worker: no logging.basicConfig anywhere."""
    script = tmp_path / "run_worker.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio
            import rota

            app = rota.App({sqlite_url!r})
            app.migrate()

            @app.task
            def hello(name: str) -> str:
                return "hi " + name

            job = hello.enqueue(name="ada")

            async def main() -> None:
                worker = rota.Worker(app, rota.WorkerSettings(poll_interval=0.1, grace=1))
                run = asyncio.create_task(worker.run())
                while app.get_job(job.id).state is not rota.JobState.COMPLETED:
                    await asyncio.sleep(0.05)
                worker.stop()
                await run

            asyncio.run(main())
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=str(Path.cwd()))
    done = subprocess.run(  # noqa: PLW1510  (the status is asserted, with stderr)
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert " INFO    rota.worker: worker " in done.stderr and " started: queues " in done.stderr
    assert "rota.jobs: __main__.hello #1 completed in " in done.stderr
