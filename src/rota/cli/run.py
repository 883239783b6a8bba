"""`rota run TASK`: enqueue one job and run it here to its end, with rota's retries; the
exit status says how it ended (for a Kubernetes CronJob, a script, a one-off fix)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

import click

from rota.cli.common import app_options, err_console, fail, json_option, load_app, print_json
from rota.drivers.base import Completion
from rota.errors import RotaError
from rota.job import Job, JobState
from rota.worker.oneshot import OneShot

EXIT_COMPLETED = 0
EXIT_DISCARDED = 1  # attempts used up, a permanent error or Discard: the dead letters
EXIT_CANCELLED = 3
EXIT_INTERRUPTED = 4  # stopped by a signal; the job went back to its queue


def _exit_code(job: Job) -> int:
    return {
        JobState.COMPLETED: EXIT_COMPLETED,
        JobState.DISCARDED: EXIT_DISCARDED,
        JobState.CANCELLED: EXIT_CANCELLED,
    }.get(job.state, EXIT_INTERRUPTED)


def _report(job: Job, completion: Completion | None) -> None:
    """One line per attempt on stderr (stdout keeps the result)."""
    if completion is None:
        err_console.print(f"attempt {job.attempt}: lease lost, another worker owns the job")
        return
    entry: dict[str, Any] = json.loads(completion.entry_json)
    what = f"attempt {job.attempt}/{job.max_attempts} {entry['outcome']}"
    if entry.get("error_type"):
        what += f" ({entry['error_type']}: {entry.get('message', '')})"
    elif entry.get("message"):
        what += f" ({entry['message']})"
    if completion.state in (JobState.RETRYABLE, JobState.SCHEDULED) and completion.delay:
        what += f"; again in {completion.delay:.2f}s"
    err_console.print(what, highlight=False, markup=False)


@click.command()
@app_options
@click.argument("task_name")
@click.option(
    "--args", "args_json", help="All arguments as a JSON object, e.g. '{\"order_id\": 7}'."
)
@click.option(
    "--key",
    help="Idempotency key: a rerun with the same key resumes that job instead of adding one.",
)
@click.option(
    "--lease",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds the job's lease lasts without a heartbeat.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="On SIGTERM, seconds the attempt may take before the job is given back.",
)
@json_option
def run(
    app_path: str | None,
    database_url: str | None,
    task_name: str,
    args_json: str | None,
    key: str | None,
    lease: float,
    grace: float,
    as_json: bool,
) -> None:
    """Run one job of TASK_NAME in this process until it is completed or dead-lettered.

    The job is stored like any other (history, attempts, `rota jobs show`); failures are
    retried here after the task's backoff. Exit status: 0 completed, 1 discarded,
    3 cancelled, 4 interrupted by a signal (the job went back to its queue)."""
    if not app_path:
        raise click.UsageError("run needs --app (or $ROTA_APP): it executes the task")
    args: dict[str, Any] = {}
    if args_json:
        try:
            parsed = json.loads(args_json)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--args") from None
        if not isinstance(parsed, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--args")
        args = parsed
    app = load_app(app_path, database_url)
    try:
        try:
            app.check_schema()
            job = app.enqueue(task_name, args, key=key)
        except RotaError as exc:
            fail(str(exc))
        verb = "enqueued" if job.created else "resuming"
        err_console.print(
            f"{verb} job {job.id} ({job.task}, queue {job.queue})", highlight=False, markup=False
        )
        runner = OneShot(app, lease=lease, grace=grace, on_attempt=_report)

        async def main() -> Job:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, runner.stop)
            return await runner.run(job.id)

        try:
            final = asyncio.run(main())
        except RotaError as exc:
            fail(str(exc))
    finally:
        app.close()
    if as_json:
        print_json(final.to_json())
    else:
        result = "" if final.result is None else f": {json.dumps(final.result)}"
        click.echo(f"job {final.id} {final.state.value} after {final.attempt} attempt(s){result}")
    sys.exit(_exit_code(final))
