"""`rota queues window|breaker|holds`: processing windows, circuit breakers, and why a
queue is paused (one hold per source: manual, window, breaker)."""

from __future__ import annotations

import re

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.cli.table import Column, Listing
from rota.drivers.base import QueueHold
from rota.ops.hold_model import BreakerRecord
from rota.ops.windows import WindowSchedule
from rota.standard import App

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_seconds(value: str | None, hint: str) -> float | None:
    """`90`, `90s`, `5m`, `1h` -> seconds."""
    if value is None:
        return None
    match = _DURATION.match(value)
    if not match:
        raise click.BadParameter(
            f"{value!r}: use seconds such as 60, 60s, 5m or 1h", param_hint=hint
        )
    return float(match[1]) * _UNITS[match[2] or "s"]


def _time(value: object) -> str:
    return "-" if value is None else f"{value:%Y-%m-%d %H:%M:%S}"


@click.command()
@app_options
@click.argument("name")
@click.argument("windows", nargs=-1)
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of the windows.")
@click.option("--clear", is_flag=True, help="Remove the windows: run around the clock.")
@json_option
def window(
    app_path: str | None,
    database_url: str | None,
    name: str,
    windows: tuple[str, ...],
    tz: str,
    clear: bool,
    as_json: bool,
) -> None:
    """Show or set NAME's processing windows, e.g. "01:00-05:00" or "Mon-Fri 22:00-02:00"
    (several allowed; a window ending before it starts crosses midnight). Outside its
    windows a queue starts nothing new; running jobs finish."""
    if clear and windows:
        raise click.UsageError("give windows or --clear, not both")
    app = load_app(app_path, database_url)
    try:
        if clear:
            run_guarded(lambda: app.queues.clear_window(name))
            schedule: WindowSchedule | None = None
        elif windows:
            schedule = run_guarded(lambda: app.queues.set_window(name, windows, tz=tz))
        else:
            schedule = run_guarded(lambda: app.queues.window(name))
        holds: list[QueueHold] = run_guarded(lambda: app.queues.holds(name))
    finally:
        app.close()
    held = next((h for h in holds if h.source == "window"), None)
    if as_json:
        print_json(
            {
                "name": name,
                "windows": None if schedule is None else [str(w) for w in schedule.windows],
                "tz": None if schedule is None else schedule.tz,
                "closed": held is not None,
                "opens_at": None if held is None or held.until is None else held.until.isoformat(),
            }
        )
        return
    if schedule is None:
        click.echo(f"queue {name}: no processing windows (runs around the clock)")
        return
    state = "closed" if held is not None else "open"
    until = f" until {_time(held.until)} UTC" if held is not None and held.until else ""
    click.echo(f"queue {name}: windows {schedule.describe()}; now {state}{until}")


@click.command()
@app_options
@click.argument("name", required=False)
@click.option("--threshold", type=float, help="Failure rate that opens it (0.5 = 50%).")
@click.option("--min-attempts", type=int, help="Attempts needed before it may open.")
@click.option("--window", "window_", help="Seconds of attempts counted: 60, 60s, 1m.")
@click.option("--cooldown", help="Seconds open before a trial job: 30, 30s, 5m.")
@click.option("--clear", is_flag=True, help="Remove the breaker (releasing its hold).")
@click.option("--reset", is_flag=True, help="Close the breaker now.")
@json_option
def breaker(
    app_path: str | None,
    database_url: str | None,
    name: str | None,
    threshold: float | None,
    min_attempts: int | None,
    window_: str | None,
    cooldown: str | None,
    clear: bool,
    reset: bool,
    as_json: bool,
) -> None:
    """Show (all, or NAME's), set, reset or clear a queue's circuit breaker. Set one with
    any of --threshold/--min-attempts/--window/--cooldown (the rest keep their values,
    or the defaults 0.5, 20, 60s, 30s)."""
    settings: dict[str, float | int] = {}
    if threshold is not None:
        settings["threshold"] = threshold
    if min_attempts is not None:
        settings["min_attempts"] = min_attempts
    if (seconds := parse_seconds(window_, "--window")) is not None:
        settings["window"] = seconds
    if (seconds := parse_seconds(cooldown, "--cooldown")) is not None:
        settings["cooldown"] = seconds
    if sum((bool(settings), clear, reset)) > 1:
        raise click.UsageError("set, --clear and --reset are separate actions: give one")
    if (settings or clear or reset) and name is None:
        raise click.UsageError("name the queue")
    app = load_app(app_path, database_url)
    try:
        if name is not None and settings:
            current = run_guarded(lambda: app.queues.breaker(name))
            if current is not None:
                for key, value in (
                    ("threshold", current.threshold),
                    ("min_attempts", current.min_attempts),
                    ("window", current.window),
                    ("cooldown", current.cooldown),
                ):
                    settings.setdefault(key, value)
            run_guarded(lambda: app.queues.set_breaker(name, **settings))  # type: ignore[arg-type]
        elif name is not None and clear:
            run_guarded(lambda: app.queues.clear_breaker(name))
        elif name is not None and reset:
            run_guarded(lambda: app.queues.reset_breaker(name))
        records: list[BreakerRecord] = run_guarded(app.queues.breakers)
    finally:
        app.close()
    if name is not None:
        records = [r for r in records if r.queue == name]
    if as_json:
        shown = [r.to_json() for r in records]
        print_json(shown[0] if name is not None and shown else shown if name is None else None)
        return
    if name is not None and not records:
        click.echo(f"queue {name}: no circuit breaker")
        return
    table = Listing(
        "queue",
        "state",
        Column("since (UTC)", drop=2),
        Column("trips", drop=1),
        "failed/attempts",
        Column("rule", flex=True),
    )
    for r in records:
        rule = (
            f">= {r.threshold:.0%} of >= {r.min_attempts} in {r.window:g}s, "
            f"cool-down {r.cooldown:g}s"
        )
        table.add_row(
            r.queue,
            r.state.replace("_", "-"),
            _time(r.changed_at),
            str(r.trips),
            f"{r.failures}/{r.attempts}",
            rule,
        )
    table.print()


@click.command()
@app_options
@click.argument("name", required=False)
@json_option
def holds(app_path: str | None, database_url: str | None, name: str | None, as_json: bool) -> None:
    """Why queues are paused: an operator (manual), a closed window, an open breaker. A
    queue starts jobs only when it has no hold; `rota queues resume` lifts only the
    manual one."""
    app = load_app(app_path, database_url)
    try:
        found: list[QueueHold] = run_guarded(lambda: app.queues.holds(name))
    finally:
        app.close()
    if as_json:
        print_json([h.to_json() for h in found])
        return
    table = Listing(
        "queue",
        "source",
        Column("since (UTC)", drop=1),
        Column("until (UTC)", drop=2),
        Column("reason", flex=True),
    )
    for h in found:
        table.add_row(h.queue, h.source, _time(h.since), _time(h.until), h.reason)
    table.print()


def held_by(app: App) -> tuple[dict[str, list[str]], dict[str, str]]:
    """For `rota queues ls`: each held queue's hold sources, each breaker's state."""
    held: dict[str, list[str]] = {}
    for hold in app.queues.holds():
        held.setdefault(hold.queue, []).append(hold.source)
    return held, {b.queue: b.state for b in app.queues.breakers()}


def add_hold_commands(group: click.Group) -> None:
    """Attach the commands to `rota queues`."""
    for command in (window, breaker, holds):
        group.add_command(command)


def install(root: click.Group) -> None:
    """The operations feature's part of `rota queues`: window, breaker, holds."""
    queues = root.commands["queues"]
    assert isinstance(queues, click.Group)
    add_hold_commands(queues)
