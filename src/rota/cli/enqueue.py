"""`rota enqueue TASK`: enqueue a job by task name, with JSON arguments."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from rota.cli.common import app_options, fail, json_option, load_app, print_json, run_guarded


def _parse_arg(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise click.BadParameter(f"{text!r}: use name=value", param_hint="--arg")
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw  # a bare word is a string


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
