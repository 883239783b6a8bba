"""`rota enqueue TASK`: enqueue a job by task name, with JSON arguments."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import click

from rota.cli.common import app_options, fail, json_option, load_app, print_json, run_guarded
from rota.standard import App


def _parse_arg(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise click.BadParameter(f"{text!r}: use name=value", param_hint="--arg")
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw  # a bare word is a string


def _db_time_plus(app: App, seconds: float) -> datetime:
    now: datetime = run_guarded(app.driver.db_now)
    return now + timedelta(seconds=seconds)


@click.command()
@app_options
@click.argument("task_name")
@click.option(
    "--args", "args_json", help="All arguments as a JSON object, e.g. '{\"order_id\": 7}'."
)
@click.option(
    "--arg", "arg_pairs", multiple=True, help="One argument as name=value (JSON or text)."
)
@click.option("--queue", help="Override the task's queue.")
@click.option("--priority", type=int, help="Override the priority (lower runs first).")
@click.option("--delay", type=float, help="Run after this many seconds.")
@click.option("--at", "at_text", help="Run at this ISO 8601 time (with a UTC offset).")
@click.option("--key", help="Idempotency key: at most one job per task and key.")
@click.option("--max-attempts", type=int, help="Override max attempts.")
@click.option("--partition-key", help="Run one job of this key at a time, in order.")
@click.option(
    "--expires-in",
    type=click.FloatRange(min=0, min_open=True),
    help="Dead-letter the job (expired) unless it starts within this many seconds.",
)
@click.option("--tenant", help="Who the job is for (fair queues, tenant caps).")
@click.option(
    "--require",
    "requires",
    multiple=True,
    metavar="LABEL",
    help="A label a worker must advertise to run the job (replaces the task's); repeatable.",
)
@json_option
def enqueue(
    app_path: str | None,
    database_url: str | None,
    task_name: str,
    args_json: str | None,
    arg_pairs: tuple[str, ...],
    queue: str | None,
    priority: int | None,
    delay: float | None,
    at_text: str | None,
    key: str | None,
    max_attempts: int | None,
    as_json: bool,
    partition_key: str | None = None,
    expires_in: float | None = None,
    tenant: str | None = None,
    requires: tuple[str, ...] = (),
) -> None:
    """Enqueue one job of TASK_NAME (needs --app so arguments can be validated)."""
    if not app_path:
        raise click.UsageError("enqueue needs --app (or $ROTA_APP) to validate the arguments")
    app = load_app(app_path, database_url)
    args: dict[str, Any] = {}
    if args_json:
        try:
            parsed = json.loads(args_json)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--args") from None
        if not isinstance(parsed, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--args")
        args.update(parsed)
    args.update(_parse_arg(p) for p in arg_pairs)
    at = None
    if at_text:
        try:
            at = datetime.fromisoformat(at_text)
        except ValueError:
            raise click.BadParameter(f"{at_text!r} is not ISO 8601", param_hint="--at") from None
        if at.tzinfo is None:
            fail("--at needs a UTC offset, e.g. 2026-12-01T03:00:00+01:00")
    options = {
        "queue": queue,
        "priority": priority,
        "delay": delay,
        "at": at,
        "key": key,
        "max_attempts": max_attempts,
        "partition_key": partition_key,
        # The deadline is counted from the database's clock, not this machine's.
        "expires_at": None if expires_in is None else _db_time_plus(app, expires_in),
        "tenant": tenant,
        "requires": set(requires) if requires else None,
    }
    options = {k: v for k, v in options.items() if v is not None}
    try:
        job = run_guarded(lambda: app.enqueue(task_name, args, **options))
    finally:
        app.close()
    if as_json:
        print_json(job.to_json())
    else:
        verb = "enqueued" if job.created else "already enqueued (same key)"
        click.echo(f"{verb} job {job.id} ({job.task} on {job.queue}, {job.state})")
