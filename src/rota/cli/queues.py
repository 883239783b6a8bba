"""`rota queues ls|pause|resume`."""

from __future__ import annotations

import click
from rich.table import Table

from rota.cli.common import app_options, console, json_option, load_app, print_json, run_guarded
from rota.drivers.base import QueueReport
from rota.job import JobState


@click.group()
def queues() -> None:
    """Inspect and steer queues."""


@queues.command("ls")
@app_options
@json_option
def ls(app_path: str | None, database_url: str | None, as_json: bool) -> None:
    """Jobs per queue and state, and the age of the oldest waiting job."""
    app = load_app(app_path, database_url)
    try:
        reports: list[QueueReport] = run_guarded(app.list_queues)
    finally:
        app.close()
    if as_json:
        print_json(
            [
                {
                    "name": r.name,
                    "paused": r.paused,
                    "counts": r.counts,
                    "oldest_available_age_s": r.oldest_available_age,
                }
                for r in reports
            ]
        )
        return
    states = [s.value for s in JobState]
    table = Table("queue", "paused", *states, "oldest waiting")
    for r in reports:
        age = "-" if r.oldest_available_age is None else f"{r.oldest_available_age:.1f}s"
        table.add_row(
            r.name, "yes" if r.paused else "", *(str(r.counts.get(s, 0)) for s in states), age
        )
    console.print(table)


def _set_paused(
    app_path: str | None, database_url: str | None, name: str, paused: bool, as_json: bool
) -> None:
    app = load_app(app_path, database_url)
    try:
        run_guarded(lambda: app.pause_queue(name) if paused else app.resume_queue(name))
    finally:
        app.close()
    if as_json:
        print_json({"name": name, "paused": paused})
    else:
        click.echo(f"queue {name} {'paused' if paused else 'resumed'}")


@queues.command()
@app_options
@click.argument("name")
@json_option
def pause(app_path: str | None, database_url: str | None, name: str, as_json: bool) -> None:
    """Stop starting jobs from NAME (running ones finish; survives restarts)."""
    _set_paused(app_path, database_url, name, True, as_json)


@queues.command()
@app_options
@click.argument("name")
@json_option
def resume(app_path: str | None, database_url: str | None, name: str, as_json: bool) -> None:
    """Start jobs from NAME again."""
    _set_paused(app_path, database_url, name, False, as_json)
