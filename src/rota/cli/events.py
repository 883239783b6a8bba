"""`rota events ls|subscriptions|replay`: published events, who receives them, and
delivering stored events again on purpose."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import click

from rota.cli.common import app_options, console, json_option, load_app, print_json, run_guarded
from rota.cli.table import Column, Listing
from rota.events.store import EventRecord, Subscription
from rota.job import Job
from rota.standard import App


def _with_app(app_path: str | None, database_url: str | None, action: Any) -> Any:
    app = load_app(app_path, database_url)
    try:
        return run_guarded(lambda: action(app))
    finally:
        app.close()


def _subscription_json(sub: Subscription) -> dict[str, Any]:
    return {
        "event": sub.event,
        "task": sub.task,
        "queue": sub.queue,
        "priority": sub.priority,
        "max_attempts": sub.max_attempts,
        "since": None if sub.created_at is None else sub.created_at.isoformat(),
    }


@click.group()
def events() -> None:
    """Published events and their subscribers."""


@events.command("ls")
@app_options
@click.option("--name", "event_name", help="Only events with this name.")
@click.option("--after", "after_id", type=int, help="Only events with a larger id.")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Most rows."
)
@json_option
def ls(
    app_path: str | None,
    database_url: str | None,
    event_name: str | None,
    after_id: int | None,
    limit: int,
    as_json: bool,
) -> None:
    """Events, oldest first."""
    found: list[EventRecord] = _with_app(
        app_path,
        database_url,
        lambda app: app.events.list(name=event_name, after_id=after_id, limit=limit),
    )
    if as_json:
        print_json([e.to_json() for e in found])
        return
    table = Listing(
        Column("id", justify="right"),
        Column("name", flex=True),
        "version",
        Column("key", flex=True),
        "published (UTC)",
    )
    for event in found:
        table.add_row(
            str(event.id),
            event.name,
            str(event.version),
            event.key or "-",
            event.published_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
        )
    table.print()


@events.command()
@app_options
@json_option
def subscriptions(app_path: str | None, database_url: str | None, as_json: bool) -> None:
    """Stored subscriptions: each event name's subscriber tasks, and since when."""
    found: list[Subscription] = _with_app(
        app_path, database_url, lambda app: app.events.subscriptions()
    )
    if as_json:
        print_json([_subscription_json(s) for s in found])
        return
    table = Listing(
        Column("event", flex=True),
        Column("task", flex=True),
        "queue",
        Column("max attempts", drop=1),
        Column("since (UTC)", drop=2),
    )
    for sub in found:
        since = (
            "-" if sub.created_at is None else f"{sub.created_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}"
        )
        table.add_row(sub.event, sub.task, sub.queue, str(sub.max_attempts), since)
    table.print()


@events.command()
@app_options
@click.argument("event_id", type=int, required=False)
@click.option("--name", "event_name", help="Replay every event with this name.")
@click.option("--after", "after_id", type=int, help="Only events with a larger id.")
@click.option("--until", "until_id", type=int, help="Only events up to this id.")
@click.option("--subscriber", help="Deliver only to this subscriber task (default: all).")
@json_option
def replay(
    app_path: str | None,
    database_url: str | None,
    event_id: int | None,
    event_name: str | None,
    after_id: int | None,
    until_id: int | None,
    subscriber: str | None,
    as_json: bool,
) -> None:
    """Deliver stored events again: EVENT_ID, or a filter."""

    def act(app: App) -> list[Job]:
        return app.events.replay(
            event_id, name=event_name, after_id=after_id, until_id=until_id, subscriber=subscriber
        )

    jobs: list[Job] = _with_app(app_path, database_url, act)
    if as_json:
        print_json([{"job_id": j.id, "task": j.task, "event": j.meta.get("event")} for j in jobs])
        return
    console.print(f"queued {len(jobs)} deliver{'y' if len(jobs) == 1 else 'ies'}", highlight=False)
