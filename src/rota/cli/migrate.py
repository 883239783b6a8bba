"""`rota migrate [--check] [--wait]`: apply or check the schema."""

from __future__ import annotations

import time
from typing import Any

import click

from rota.cli.common import app_options, err_console, fail, json_option, load_app, print_json
from rota.errors import DatabaseUnavailableError, RotaError


@click.command()
@app_options
@click.option("--check", is_flag=True, help="Apply nothing; exit 1 unless the schema is current.")
@click.option("--wait", is_flag=True, help="With --check: wait until the schema is current.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="With --wait: give up after this many seconds.",
)
@json_option
def migrate(
    app_path: str | None,
    database_url: str | None,
    check: bool,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Apply pending migrations (idempotent, safe to run concurrently)."""
    app = load_app(app_path, database_url, creates=True)
    if wait and not check:
        raise click.UsageError("--wait goes with --check (an init container waits for the schema)")
    try:
        if not check:
            applied = app.migrate()
            version = app.schema_version()
            # With --app, the schedules it declares are stored too (as a worker would at
            # start), so `rota cron ls` shows them before the first worker runs.
            stored = [r.name for r in app.sync_schedules()]
            app.events.sync()  # and its event subscriptions, which publishers deliver to
            if as_json:
                print_json({"applied": applied, "version": version, "schedules": stored})
            elif applied:
                click.echo(f"applied migrations {applied}; schema is at version {version}")
            else:
                click.echo(f"schema is current (version {version})")
            if stored and not as_json:
                click.echo(f"stored {len(stored)} schedule(s): {', '.join(stored)}")
            return
        status: dict[str, Any]
        deadline = time.monotonic() + timeout
        while True:
            try:
                current = app.schema_version()
                latest = app.driver.latest_schema_version
                status = {"version": current, "expected": latest, "current": current == latest}
            except DatabaseUnavailableError as exc:
                status = {"version": None, "expected": None, "current": False, "error": str(exc)}
            if status["current"] or not wait or time.monotonic() >= deadline:
                break
            err_console.print(f"waiting for the schema: {status}", highlight=False, markup=False)
            time.sleep(2.0)
    except RotaError as exc:
        fail(str(exc))
    finally:
        app.close()
    if as_json:
        print_json(status)
    elif status["current"]:
        click.echo(f"schema is current (version {status['version']})")
    elif status.get("error"):
        fail(f"database unreachable: {status['error']}")
    else:
        fail(
            f"schema is at version {status['version']}, this rota needs {status['expected']}: "
            "run `rota migrate`"
        )
    if not status["current"]:
        raise SystemExit(1)
