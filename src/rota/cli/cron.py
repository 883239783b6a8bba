"""`rota cron ls|show|next|trigger|suspend|resume|history|delete`: inspect and steer the
schedules stored in the database; times are shown in each schedule's own zone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from rota.cli.common import (
    app_options,
    fail,
    json_option,
    load_app,
    print_json,
    run_guarded,
)
from rota.cli.table import Column, Listing, json_text, say
from rota.errors import RotaError, ScheduleError
from rota.schedules.spec import ScheduleSpec, load_zone, normalize_expression
from rota.schedules.store import ScheduleRecord, ScheduleRun
from rota.schedules.ticks import DstPolicy, Ticks
from rota.schedules.view import local_time, next_runs, run_json, schedule_json, spec_or_error
from rota.standard import App


def _with_app(app_path: str | None, database_url: str | None, action: Any) -> Any:
    app = load_app(app_path, database_url)
    try:
        return run_guarded(lambda: action(app))
    finally:
        app.close()


@click.group()
def cron() -> None:
    """Inspect and steer cron schedules (Kubernetes CronJob semantics)."""


@cron.command("ls")
@app_options
@json_option
def ls(app_path: str | None, database_url: str | None, as_json: bool) -> None:
    """Stored schedules, with their next run in each schedule's zone."""

    def read(app: App) -> tuple[list[ScheduleRecord], datetime]:
        return app.list_schedules(), app.driver.db_now()

    records, now = _with_app(app_path, database_url, read)
    if as_json:
        print_json([schedule_json(r, now) for r in records])
        return
    table = Listing(
        Column("name", flex=True),
        "schedule",
        Column("zone", drop=3),
        Column("next run", flex=True),
        Column("last scheduled", drop=2),
        Column("active", drop=1),
        Column("policy", drop=4),
    )
    for record in records:
        spec = spec_or_error(record)
        if isinstance(spec, ScheduleError):
            upcoming = f"invalid: {spec}"
            valid = None
        else:
            valid = spec
            ticks = next_runs(spec, now, 1)
            upcoming = (
                "suspended" if record.suspended else local_time(next(iter(ticks), None), spec)
            )
        table.add_row(
            record.name,
            record.expression,
            record.timezone,
            upcoming,
            local_time(record.last_schedule_time, valid),
            str(record.active),
            record.concurrency,
        )
    table.print()


@cron.command()
@app_options
@click.argument("name")
@click.option(
    "--next",
    "count",
    type=click.IntRange(1, 100),
    default=5,
    show_default=True,
    help="How many next runs to list.",
)
@json_option
def show(
    app_path: str | None, database_url: str | None, name: str, count: int, as_json: bool
) -> None:
    """One schedule: its policy, status, next runs and recent runs."""

    def read(app: App) -> tuple[ScheduleRecord, datetime, list[ScheduleRun]]:
        record = app.get_schedule(name)
        return record, app.driver.db_now(), app.schedule_history(name, limit=10)

    record, now, runs = _with_app(app_path, database_url, read)
    data = schedule_json(record, now, count)
    if as_json:
        print_json({**data, "runs": [run_json(r) for r in runs]})
        return
    spec = spec_or_error(record)
    valid = spec if isinstance(spec, ScheduleSpec) else None
    say(
        (record.name, "bold"),
        f"  {record.expression!r} in {record.timezone}  task={record.task} queue={record.queue}",
        ("  suspended", "yellow") if record.suspended else "",
    )
    deadline = "none" if record.starting_deadline is None else f"{record.starting_deadline:g}s"
    say(
        f"concurrency={record.concurrency} starting_deadline={deadline} dst={record.dst} "
        f"history={record.successful_history_limit} ok / {record.failed_history_limit} failed"
        + (" strict_missed_limit" if record.strict_missed_limit else "")
    )
    args = data["args"]
    say(f"args: {args if isinstance(args, str) else json_text(args)}")
    if valid is None:
        say(("invalid here:", "red"), f" {spec}")
    elif not record.suspended:
        for tick in next_runs(valid, now, count):
            say(f"  next  {local_time(tick, valid)}")
    say(
        f"last scheduled {local_time(record.last_schedule_time, valid)}  "
        f"last successful {local_time(record.last_successful_time, valid)}  "
        f"active {record.active}"
    )
    if record.last_event:
        say(f"last event ({local_time(record.last_event_at, valid)}): {record.last_event}")
    _print_runs(runs)


def _print_runs(runs: list[ScheduleRun]) -> None:
    table = Listing(
        Column("run", flex=True),
        "trigger",
        "scheduled for",
        Column("job", justify="right"),
        "state",
        Column("finished (UTC)", drop=1),
    )
    for run in runs:
        finished = (
            "-"
            if run.finished_at is None
            else run.finished_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        )
        table.add_row(
            run.name,
            run.trigger,
            run.scheduled_local,
            "-" if run.job_id is None else str(run.job_id),
            "-" if run.job_state is None else str(run.job_state),
            finished,
        )
    table.print()


@cron.command()
@app_options
@click.argument("name")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Most rows."
)
@json_option
def history(
    app_path: str | None, database_url: str | None, name: str, limit: int, as_json: bool
) -> None:
    """A schedule's runs, newest first (older ones are pruned by its history limits)."""
    runs: list[ScheduleRun] = _with_app(
        app_path, database_url, lambda app: app.schedule_history(name, limit=limit)
    )
    if as_json:
        print_json([run_json(r) for r in runs])
        return
    _print_runs(runs)


@cron.command()
@app_options
@click.argument("name")
@click.option("--name", "run_name", help="Name of the run (default: NAME-manual-<random>).")
@json_option
def trigger(
    app_path: str | None,
    database_url: str | None,
    name: str,
    run_name: str | None,
    as_json: bool,
) -> None:
    """Run NAME now, outside its schedule (like kubectl create job --from=cronjob/NAME)."""
    run: ScheduleRun = _with_app(
        app_path, database_url, lambda app: app.trigger_schedule(name, name=run_name)
    )
    if as_json:
        print_json(run_json(run))
    else:
        click.echo(f"run {run.name} created: job {run.job_id} ({run.job_state})")


def _set_suspended(
    app_path: str | None, database_url: str | None, name: str, suspended: bool, as_json: bool
) -> None:
    def act(app: App) -> ScheduleRecord:
        return app.suspend_schedule(name) if suspended else app.resume_schedule(name)

    record: ScheduleRecord = _with_app(app_path, database_url, act)
    if as_json:
        print_json({"name": record.name, "suspended": record.suspended})
    else:
        click.echo(f"schedule {record.name} {'suspended' if suspended else 'resumed'}")


@cron.command()
@app_options
@click.argument("name")
@json_option
def suspend(app_path: str | None, database_url: str | None, name: str, as_json: bool) -> None:
    """Start no new runs of NAME (running ones continue)."""
    _set_suspended(app_path, database_url, name, True, as_json)


@cron.command()
@app_options
@click.argument("name")
@json_option
def resume(app_path: str | None, database_url: str | None, name: str, as_json: bool) -> None:
    """Start runs of NAME again; the latest tick missed meanwhile starts at once if it is
    still inside the starting deadline."""
    _set_suspended(app_path, database_url, name, False, as_json)


@cron.command()
@app_options
@click.argument("name")
@json_option
def delete(app_path: str | None, database_url: str | None, name: str, as_json: bool) -> None:
    """Forget a stored schedule (a worker whose app still declares it stores it again)."""
    _with_app(app_path, database_url, lambda app: app.delete_schedule(name))
    if as_json:
        print_json({"name": name, "deleted": True})
    else:
        click.echo(f"schedule {name} deleted")


@cron.command("next")
@click.argument("expression")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone.")
@click.option(
    "--dst",
    type=click.Choice([p.value for p in DstPolicy]),
    default="once",
    show_default=True,
    help="A wall-clock time that occurs twice (clocks back) fires once or twice; one that "
    "is skipped (clocks forward) fires at the next valid time.",
)
@click.option(
    "--count",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="How many fire times to print.",
)
@click.option("--after", help="Start after this ISO time (default: now).")
@json_option
def next_(expression: str, tz: str, dst: str, count: int, after: str | None, as_json: bool) -> None:
    """Check a cron EXPRESSION and print its next fire times in --tz (no database)."""
    try:
        cron_fields = normalize_expression(expression)
        zone = load_zone(tz)
        start = datetime.now(UTC)
        if after is not None:
            try:
                start = datetime.fromisoformat(after)
            except ValueError:
                raise ScheduleError(f"--after {after!r} is not an ISO 8601 time") from None
            if start.tzinfo is None:
                start = start.replace(tzinfo=zone)
    except RotaError as exc:
        fail(str(exc))
        return
    ticks = Ticks(cron_fields, zone, DstPolicy(dst))
    found: list[datetime] = []
    for tick in ticks.iter_after(start):
        found.append(tick)
        if len(found) >= count:
            break
    if as_json:
        print_json(
            {
                "expression": expression,
                "cron": cron_fields,
                "timezone": tz,
                "dst": dst,
                "next_runs": [t.astimezone(zone).isoformat() for t in found],
                "next_runs_utc": [t.isoformat() for t in found],
            }
        )
        return
    for tick in found:
        here = tick.astimezone(zone)
        click.echo(f"{here:%Y-%m-%d %H:%M:%S} {here:%Z}  ({tick:%Y-%m-%d %H:%M} UTC)")
