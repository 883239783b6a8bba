"""`rota jobs ls|show|retry|cancel`: inspect and act on jobs."""

from __future__ import annotations

from datetime import UTC, datetime

import click
from rich.markup import escape
from rich.table import Table

from rota.cli.common import app_options, console, json_option, load_app, print_json, run_guarded
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
@click.option("--state", "states", multiple=True, type=click.Choice(STATES))
@click.option("--queue")
@click.option("--task")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--before-id", type=int, help="Page: only jobs with a smaller id.")
@json_option
def ls(
    app_path: str | None,
    database_url: str | None,
    states: tuple[str, ...],
    queue: str | None,
    task: str | None,
    limit: int,
    before_id: int | None,
    as_json: bool,
) -> None:
    """List jobs, newest first."""
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
    table = Table("id", "task", "queue", "state", "attempt", "run at (UTC)", "last error")
    for job in found:
        last = job.history[-1] if job.history else None
        error = f"{last.error_type}: {last.message}" if last and last.error_type else ""
        table.add_row(
            str(job.id),
            escape(job.task),
            escape(job.queue),
            job.state.value,
            f"{job.attempt}/{job.max_attempts}",
            _when(job.run_at),
            escape(error[:60]),
        )
    console.print(table)


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
    console.print(
        f"[bold]job {job.id}[/bold]  {escape(job.task)}  queue={escape(job.queue)}  "
        f"state=[bold]{job.state.value}[/bold]  attempt {job.attempt}/{job.max_attempts}",
        highlight=False,
    )
    # Stored values are printed as text: brackets in them are not rich markup.
    args = MASKED_ARGS if job.args_encrypted else job.args
    console.print(f"args: {args}", highlight=False, markup=False)
    if job.progress is not None:
        console.print(
            f"progress: {job.progress:.0%} {job.progress_message or ''} "
            f"(at {_when(job.progress_at)})",
            highlight=False,
            markup=False,
        )
    console.print(
        f"created {_when(job.created_at)}  run at {_when(job.run_at)}  "
        f"finished {_when(job.finished_at)}  key={job.key or '-'}",
        highlight=False,
        markup=False,
    )
    if job.result is not None:
        console.print(f"result: {job.result}", highlight=False, markup=False)
    for a in job.history:
        console.print(
            f"  #{a.attempt} {a.outcome.value:<9} {_when(a.started_at)} -> "
            f"{_when(a.finished_at)} worker={a.worker or '-'} "
            f"{a.error_type or ''} {a.message or ''}",
            highlight=False,
            markup=False,
        )
        if a.traceback:
            console.print(a.traceback.rstrip(), style="dim", highlight=False, markup=False)


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
