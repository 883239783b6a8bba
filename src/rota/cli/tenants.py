"""`rota tenants ls|set|fair`: tenant caps, fair queues and each tenant's load."""

from __future__ import annotations

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.cli.table import Listing, say


@click.group()
def tenants() -> None:
    """Tenants: caps on running jobs and fair queues."""


@tenants.command("ls")
@app_options
@json_option
def ls(app_path: str | None, database_url: str | None, as_json: bool) -> None:
    """Each tenant's cap and its running and waiting jobs, and the fair queues."""
    app = load_app(app_path, database_url)
    try:
        records = run_guarded(app.tenants.list)
        fair = run_guarded(app.tenants.fair_queues)
    finally:
        app.close()
    if as_json:
        print_json({"tenants": [r.to_json() for r in records], "fair_queues": fair})
        return
    table = Listing("tenant", "max running", "running", "waiting")
    for r in records:
        cap = "-" if r.max_running is None else str(r.max_running)
        table.add_row(r.name, cap, str(r.running), str(r.waiting))
    table.print()
    say("fair queues: " + (", ".join(fair) if fair else "none"))


@tenants.command("set")
@app_options
@click.argument("name")
@click.option(
    "--max-running",
    required=True,
    metavar="N|none",
    help="At most N jobs of the tenant run at once in fair queues; `none` lifts the cap.",
)
def set_cap(app_path: str | None, database_url: str | None, name: str, max_running: str) -> None:
    """Set or lift a tenant's cap on running jobs."""
    if max_running.lower() == "none":
        cap = None
    else:
        try:
            cap = int(max_running)
        except ValueError:
            raise click.BadParameter(
                f"{max_running!r} is not a number or `none`", param_hint="--max-running"
            ) from None
    app = load_app(app_path, database_url)
    try:
        record = run_guarded(lambda: app.tenants.configure(name, max_running=cap))
    finally:
        app.close()
    shown = "no cap" if record.max_running is None else f"max running {record.max_running}"
    click.echo(f"tenant {record.name}: {shown}")


@tenants.command("fair")
@app_options
@click.argument("queue")
@click.option("--off", is_flag=True, help="Claim the queue in plain priority order again.")
def fair(app_path: str | None, database_url: str | None, queue: str, off: bool) -> None:
    """Make a queue's claims fair by tenant (tenant caps apply there)."""
    app = load_app(app_path, database_url)
    try:
        run_guarded(lambda: app.tenants.set_fair(queue, not off))
    finally:
        app.close()
    click.echo(f"queue {queue}: {'plain' if off else 'fair by tenant'}")
