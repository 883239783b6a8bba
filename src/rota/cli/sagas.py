"""`rota sagas ls|show|retry|abort`: where each saga is, and the two levers a human
has: run the current step again, or stop and compensate."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.cli.table import Column, Listing, json_text, say, wide_option
from rota.sagas.store import SagaRecord, SagaStatus
from rota.sagas.view import saga_json
from rota.standard import App

_COLOURS = {
    SagaStatus.RUNNING: "cyan",
    SagaStatus.COMPENSATING: "yellow",
    SagaStatus.COMPLETED: "green",
    SagaStatus.COMPENSATED: "magenta",
    SagaStatus.FAILED: "red",
}


def _time(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _with_app(app_path: str | None, database_url: str | None, action: Any) -> Any:
    app = load_app(app_path, database_url)
    try:
        return run_guarded(lambda: action(app))
    finally:
        app.close()


def _print_saga(saga: SagaRecord, wide: bool) -> None:
    say(
        (saga.key, "bold"),
        f"  saga={saga.name}  ",
        (str(saga.status), _COLOURS[saga.status]),
        f"  step={saga.step or '-'}  job={saga.job_id or '-'}",
    )
    steps: list[str | tuple[str, str]] = ["steps: "]
    for n, step in enumerate(saga.plan):
        name = str(step["name"])
        steps += [" → "] if n else []
        steps.append((name, "bold") if name == saga.step else name)
    say(*steps)
    if saga.error:
        say(("error:", "red"), f" {saga.error}")
    say(f"data: {json_text(saga.data)}")
    table = Listing(
        "at (UTC)",
        "event",
        Column("step", flex=True),
        "status",
        Column("job", justify="right"),
        Column("detail", flex=True, least=24),
    )
    for entry in saga.history:
        detail = entry.get("error") or (f"next: {entry['next']}" if entry.get("next") else "")
        table.add_row(
            _time(entry.get("at")),
            str(entry.get("event", "")),
            str(entry.get("step") or ""),
            str(entry.get("status", "")),
            str(entry.get("job_id") or ""),
            str(detail),
        )
    table.print(wide=wide)


@click.group()
def sagas() -> None:
    """Inspect sagas by business key; retry a stuck step or abort with compensation."""


@sagas.command("ls")
@app_options
@click.option(
    "--status", type=click.Choice([s.value for s in SagaStatus]), help="Only sagas in this status."
)
@click.option("--name", "saga_name", help="Only sagas of this definition.")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Most rows."
)
@wide_option
@json_option
def ls(
    app_path: str | None,
    database_url: str | None,
    status: str | None,
    saga_name: str | None,
    limit: int,
    wide: bool,
    as_json: bool,
) -> None:
    """Sagas, newest first."""
    found: list[SagaRecord] = _with_app(
        app_path,
        database_url,
        lambda app: app.sagas.list(status=status, name=saga_name, limit=limit),
    )
    if as_json:
        print_json([saga_json(s) for s in found])
        return
    table = Listing(
        "key",  # the name to act on: never cut
        Column("saga", flex=True, drop=2),
        "status",
        Column("step", flex=True, drop=3),
        Column("updated (UTC)", drop=1),
        Column("error", flex=True, least=24),
    )
    for saga in found:
        table.add_row(
            saga.key,
            saga.name,
            saga.status,
            saga.step or "-",
            _time(saga.updated_at),
            saga.error or "",
        )
    table.print(wide=wide)


@sagas.command()
@app_options
@click.argument("key")
@wide_option
@json_option
def show(
    app_path: str | None, database_url: str | None, key: str, wide: bool, as_json: bool
) -> None:
    """One saga: its status, step, data and history."""
    saga: SagaRecord = _with_app(app_path, database_url, lambda app: app.sagas.get(key))
    if as_json:
        print_json(saga_json(saga))
    else:
        _print_saga(saga, wide)


@sagas.command()
@app_options
@click.argument("key")
@json_option
def retry(app_path: str | None, database_url: str | None, key: str, as_json: bool) -> None:
    """Run the saga's current step (or failed compensation) again now."""

    def act(app: App) -> SagaRecord:
        return app.sagas.retry(key)

    saga: SagaRecord = _with_app(app_path, database_url, act)
    if as_json:
        print_json(saga_json(saga))
    else:
        say(f"saga {saga.key}: {saga.status}, step {saga.step} queued (job {saga.job_id})")


@sagas.command()
@app_options
@click.argument("key")
@click.option(
    "--reason",
    default="aborted by request",
    show_default=True,
    help="Why (kept in the saga's history).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Abort even while a step runs (what it did so far is not compensated).",
)
@json_option
def abort(
    app_path: str | None,
    database_url: str | None,
    key: str,
    reason: str,
    force: bool,
    as_json: bool,
) -> None:
    """Stop a running saga and compensate its completed steps, newest first."""
    saga: SagaRecord = _with_app(
        app_path, database_url, lambda app: app.sagas.abort(key, reason=reason, force=force)
    )
    if as_json:
        print_json(saga_json(saga))
    else:
        say(
            f"saga {saga.key}: {saga.status}" + (f", compensating {saga.step}" if saga.step else "")
        )
