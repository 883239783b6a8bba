"""`rota jobs ls|show|retry|cancel`: inspect and act on jobs."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.cli.table import Column, Listing, json_text, say, wide_option
from rota.job import MASKED_ARGS, Job, JobState

STATES = [s.value for s in JobState]


def _when(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


@click.group()
def jobs() -> None:
    """Inspect and act on jobs."""


@jobs.command("ls")
@app_options
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES),
    help="Only this state; repeatable.",
)
@click.option("--queue", help="Only jobs of this queue.")
@click.option("--task", help="Only jobs of this task (its registered name).")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Most rows."
)
@click.option("--before-id", type=int, help="Page: only jobs with a smaller id.")
@wide_option
@json_option
def ls(
    app_path: str | None,
    database_url: str | None,
    states: tuple[str, ...],
    queue: str | None,
    task: str | None,
    limit: int,
    before_id: int | None,
    wide: bool,
    as_json: bool,
) -> None:
    """List jobs, newest first. Piped, the rows are tab-separated values."""
    app = load_app(app_path, database_url)
    try:
        found: list[Job] = run_guarded(
            lambda: app.list_jobs(
                state=list(states) or None, queue=queue, task=task, limit=limit, before_id=before_id
            )
        )
    finally:
        app.close()
    if as_json:
        print_json([job.to_json() for job in found])
        return
    table = Listing(
        Column("id", justify="right"),
        Column("task", flex=True),
        "queue",
        "state",
        "attempt",
        Column("run at (UTC)", drop=1),
        Column("last error", flex=True, least=24),
    )
    for job in found:
        last = job.history[-1] if job.history else None
        error = f"{last.error_type}: {last.message}" if last and last.error_type else ""
        table.add_row(
            job.id,
            job.task,
            job.queue,
            job.state.value,
            f"{job.attempt}/{job.max_attempts}",
            _when(job.run_at),
            error,
        )
    table.print(wide=wide)


@jobs.command()
@app_options
@click.argument("job_id", type=int)
@json_option
def show(app_path: str | None, database_url: str | None, job_id: int, as_json: bool) -> None:
    """Show one job with its attempt history."""
    app = load_app(app_path, database_url)
    try:
        job = run_guarded(lambda: app.get_job(job_id))
    finally:
        app.close()
    if job is None:
        raise click.ClickException(f"no job with id {job_id}")
    if as_json:
        print_json(job.to_json())
        return
    say(
        (f"job {job.id}", "bold"),
        f"  {job.task}  queue={job.queue}  state=",
        (job.state.value, "bold"),
        f"  attempt {job.attempt}/{job.max_attempts}",
    )
    # Stored values are printed as JSON text: brackets in them are not rich markup.
    say(f"args: {MASKED_ARGS if job.args_encrypted else json_text(job.args)}")
    if job.progress is not None:
        say(
            f"progress: {job.progress:.0%} {job.progress_message or ''} "
            f"(at {_when(job.progress_at)})"
        )
    say(
        f"created {_when(job.created_at)}  run at {_when(job.run_at)}  "
        f"finished {_when(job.finished_at)}  key={job.key or '-'}"
    )
    if job.result is not None:
        say(f"result: {json_text(job.result)}")
    for a in job.history:
        say(
            f"  #{a.attempt} {a.outcome.value:<9} {_when(a.started_at)} -> "
            f"{_when(a.finished_at)} worker={a.worker or '-'} "
            f"{a.error_type or ''} {a.message or ''}"
        )
        if a.traceback:
            # Tracebacks keep their lines; only the characters that hide text are escaped.
            for text in a.traceback.rstrip().split("\n"):
                say((text, "dim"))


@jobs.command()
@app_options
@click.argument("job_id", type=int)
@json_option
def retry(app_path: str | None, database_url: str | None, job_id: int, as_json: bool) -> None:
    """Run a finished, discarded or waiting job again now."""
    app = load_app(app_path, database_url)
    try:
        job = run_guarded(lambda: app.retry_job(job_id))
    finally:
        app.close()
    if as_json:
        print_json(job.to_json())
    else:
        click.echo(f"job {job.id} is {job.state.value} again")


@jobs.command()
@app_options
@click.argument("job_id", type=int)
@json_option
def cancel(app_path: str | None, database_url: str | None, job_id: int, as_json: bool) -> None:
    """Cancel a waiting job, or ask a running one to stop."""
    app = load_app(app_path, database_url)
    try:
        job = run_guarded(lambda: app.cancel_job(job_id))
    finally:
        app.close()
    if as_json:
        print_json(job.to_json())
    elif job.state is JobState.RUNNING:
        click.echo(f"job {job.id} is running: asked it to stop")
    else:
        click.echo(f"job {job.id} cancelled")
