"""`rota batches ls|show|suspend|resume|cancel|scale`: batch status (counts, completed and failed
indexes, condition, times) and control, by id or name."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from rota.batches.status import BatchStatus
from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.cli.table import Column, Listing, say, wide_option
from rota.job import Job
from rota.standard import App


def _with_app(app_path: str | None, database_url: str | None, action: Callable[[App], Any]) -> Any:
    app = load_app(app_path, database_url)
    try:
        return run_guarded(lambda: action(app))
    finally:
        app.close()


def _time(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _condition(status: BatchStatus) -> str:
    """Plain text (a cell of a listing is never markup)."""
    if status.condition is not None:
        return f"{status.condition} {status.reason}"
    if status.interim is not None:
        return f"{status.interim} {status.reason}"
    return "suspended" if status.suspended else "running"


def _job_json(job: Job) -> dict[str, Any]:
    last = job.history[-1] if job.history else None
    return {
        "id": job.id,
        "index": job.meta.get("batch", {}).get("index"),
        "state": str(job.state),
        "worker": job.worker,
        "error_type": None if last is None else last.error_type,
        "message": None if last is None else last.message,
        "finished_at": None if job.finished_at is None else job.finished_at.isoformat(),
    }


@click.group()
def batches() -> None:
    """Inspect and steer batches (Kubernetes Job semantics)."""


@batches.command("ls")
@app_options
@click.option("--open", "open_only", is_flag=True, help="Only batches not finished yet.")
@click.option("--task", help="Only batches of this task.")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Most rows."
)
@wide_option
@json_option
def ls(
    app_path: str | None,
    database_url: str | None,
    open_only: bool,
    task: str | None,
    limit: int,
    wide: bool,
    as_json: bool,
) -> None:
    """Batches, newest first."""
    found: list[BatchStatus] = _with_app(
        app_path,
        database_url,
        lambda app: app.batches.list(open_only=open_only, task=task, limit=limit),
    )
    if as_json:
        print_json([s.to_json() for s in found])
        return
    table = Listing(
        Column("id", justify="right"),
        Column("name", flex=True, drop=1),
        Column("task", flex=True),
        "completions",
        Column("active", drop=2),
        Column("succeeded", drop=3),
        "failed",
        Column("condition", flex=True),
        Column("started (UTC)", drop=4),
    )
    for status in found:
        table.add_row(
            status.id,
            status.name or "-",
            status.task,
            f"{status.succeeded}/{status.completions}",
            str(status.active),
            str(status.succeeded),
            str(status.failed),
            _condition(status),
            _time(status.start_time),
        )
    table.print(wide=wide)


@batches.command()
@app_options
@click.argument("batch")
@wide_option
@json_option
def show(
    app_path: str | None, database_url: str | None, batch: str, wide: bool, as_json: bool
) -> None:
    """One BATCH (id or name): its status, indexes and jobs."""

    def read(app: App) -> tuple[BatchStatus, list[Job]]:
        return app.batches.get(batch), app.batches.jobs(batch)

    status, jobs = _with_app(app_path, database_url, read)
    if as_json:
        print_json({**status.to_json(), "jobs": [_job_json(j) for j in jobs]})
        return
    mode = "Indexed" if status.indexed else "NonIndexed"
    say(
        (f"batch {status.id}", "bold"),
        f" {status.name or ''}  task={status.task} "
        f"queue={status.queue} {mode} completions={status.completions} "
        f"parallelism={status.parallelism}",
    )
    say(f"condition: {_condition(status)}")
    if status.message:
        say(f"message: {status.message}")
    say(
        f"active {status.active}  succeeded {status.succeeded}  failed {status.failed}  "
        f"ignored {status.ignored}"
    )
    say(
        f"completed indexes: {status.completed_indexes or '-'}  "
        f"failed indexes: {status.failed_indexes or '-'}"
    )
    say(
        f"created {_time(status.created_at)}  started {_time(status.start_time)}  "
        f"finished {_time(status.finished_at)}"
    )
    table = Listing(
        Column("job", justify="right"),
        "index",
        "state",
        Column("error", flex=True, least=24),
        Column("finished (UTC)", drop=1),
    )
    for job in jobs:
        row = _job_json(job)
        error = f"{row['error_type']}: {row['message']}" if row["error_type"] else ""
        table.add_row(job.id, row["index"], row["state"], error, _time(job.finished_at))
    table.print(wide=wide)


def _act(
    app_path: str | None,
    database_url: str | None,
    batch: str,
    verb: str,
    as_json: bool,
    *args: Any,
) -> None:
    def act(app: App) -> BatchStatus:
        action: Callable[..., BatchStatus] = getattr(app.batches, verb)
        return action(batch, *args)

    status: BatchStatus = _with_app(app_path, database_url, act)
    if as_json:
        print_json(status.to_json())
    else:
        done = {
            "suspend": "suspended",
            "resume": "resumed",
            "cancel": "cancelled",
            "scale": f"scaled to parallelism {status.parallelism}",
        }[verb]
        click.echo(f"batch {status.id} {done}: {status.state}")


@batches.command()
@app_options
@click.argument("batch")
@json_option
def suspend(app_path: str | None, database_url: str | None, batch: str, as_json: bool) -> None:
    """Start no new jobs and cancel the running ones (they count neither way)."""
    _act(app_path, database_url, batch, "suspend", as_json)


@batches.command()
@app_options
@click.argument("batch")
@json_option
def resume(app_path: str | None, database_url: str | None, batch: str, as_json: bool) -> None:
    """Start jobs again; the active deadline counts from now."""
    _act(app_path, database_url, batch, "resume", as_json)


@batches.command()
@app_options
@click.argument("batch")
@json_option
def cancel(app_path: str | None, database_url: str | None, batch: str, as_json: bool) -> None:
    """Fail BATCH (reason Cancelled) once its running jobs have stopped."""
    _act(app_path, database_url, batch, "cancel", as_json)


@batches.command()
@app_options
@click.argument("batch")
@click.argument("parallelism", type=click.IntRange(0, 100_000))
@json_option
def scale(
    app_path: str | None, database_url: str | None, batch: str, parallelism: int, as_json: bool
) -> None:
    """Run PARALLELISM jobs of BATCH at once (lowering it cancels the newest; 0 pauses)."""
    _act(app_path, database_url, batch, "scale", as_json, parallelism)
