"""`rota queues ls|pause|resume|set|partitions`."""

from __future__ import annotations

import re
from typing import Any

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.cli.holds import held_by
from rota.cli.table import Column, Listing
from rota.drivers.base import QueueHold, QueueReport
from rota.job import JobState
from rota.ops.model import PoisonedKey, QueueControl


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
        controls = {c.name: c for c in run_guarded(app.queues.list)}
        held, breakers = run_guarded(lambda: held_by(app))
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
                    "limits": controls.get(r.name, QueueControl(r.name)).to_json(),
                    "held_by": held.get(r.name, []),
                    "breaker": breakers.get(r.name),
                }
                for r in reports
            ]
        )
        return
    states = [s.value for s in JobState]
    # On a narrow screen the counts an operator looks at first stay: waiting, running,
    # failing; empty pause and limit columns go first, the finished counts next.
    drop = {"scheduled": 3, "retryable": 2, "completed": 6, "discarded": 1, "cancelled": 7}
    table = Listing(
        "queue",
        Column("paused", drop=9),
        Column("limits", flex=True, drop=8),
        *(Column(s, drop=drop.get(s, 0), justify="right") for s in states),
        Column("oldest waiting", justify="right"),
    )
    for r in reports:
        age = "-" if r.oldest_available_age is None else f"{r.oldest_available_age:.1f}s"
        table.add_row(
            r.name,
            ", ".join(held.get(r.name, [])) or ("yes" if r.paused else ""),
            _limits(controls.get(r.name), breakers.get(r.name)),
            *(str(r.counts.get(s, 0)) for s in states),
            age,
        )
    table.print()


def _limits(control: QueueControl | None, breaker: str | None = None) -> str:
    parts = [] if breaker is None else [f"breaker {breaker.replace('_', '-')}"]
    if control is None or not control.limited:
        return ", ".join(parts)
    if control.global_limit is not None:
        parts.append(f"global {control.global_limit}")
    if control.rate_limit is not None:
        parts.append(f"{control.rate_limit}/{control.rate_period:g}s")
    return ", ".join(parts)


_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*(s|m|h|d)?\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_rate(value: str) -> tuple[int, float] | None:
    """`100/60s`, `100/1m`, `5/s`, `10/2.5s` -> (jobs, seconds); `none` -> None."""
    if value.strip().lower() in ("none", "off", "unlimited"):
        return None
    match = _RATE.match(value)
    if not match:
        raise click.BadParameter(
            f"{value!r}: use JOBS/PERIOD such as 100/60s, 100/1m, 5/s (or none)",
            param_hint="--rate",
        )
    period = float(match[2] or 1) * _UNITS[match[3] or "s"]
    return int(match[1]), period


@queues.command("set")
@app_options
@click.argument("name")
@click.option("--global-limit", help="Jobs running at once over all workers (or none).")
@click.option("--rate", help="Starts per period over all workers: 100/60s, 5/s (or none).")
@json_option
def set_limits(
    app_path: str | None,
    database_url: str | None,
    name: str,
    global_limit: str | None,
    rate: str | None,
    as_json: bool,
) -> None:
    """Set or clear NAME's global concurrency and rate limits; workers pick them up on
    their next claim (no restart)."""
    options: dict[str, Any] = {}
    if global_limit is not None:
        if global_limit.strip().lower() in ("none", "off", "unlimited"):
            options["global_limit"] = None
        elif global_limit.strip().isdigit():
            options["global_limit"] = int(global_limit)
        else:
            raise click.BadParameter(
                f"{global_limit!r}: a number of jobs, or none", param_hint="--global-limit"
            )
    if rate is not None:
        options["rate"] = parse_rate(rate)
    if not options:
        raise click.UsageError("nothing to set: pass --global-limit and/or --rate")
    app = load_app(app_path, database_url)
    try:
        control: QueueControl = run_guarded(lambda: app.queues.configure(name, **options))
    finally:
        app.close()
    if as_json:
        print_json(control.to_json())
    else:
        click.echo(f"queue {control.name}: {_limits(control) or 'unlimited'}")


@queues.command()
@app_options
@click.option("--queue", help="Only this queue.")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=100, show_default=True, help="Most rows."
)
@json_option
def partitions(
    app_path: str | None, database_url: str | None, queue: str | None, limit: int, as_json: bool
) -> None:
    """Partition keys held up by a dead letter (poisoned keys). Their later jobs wait
    until the dead letter is replayed (`rota dlq replay --id N`) or dismissed
    (`rota dlq dismiss N`); other keys keep flowing."""
    app = load_app(app_path, database_url)
    try:
        keys: list[PoisonedKey] = run_guarded(lambda: app.queues.partitions(queue, limit=limit))
    finally:
        app.close()
    if as_json:
        print_json([k.to_json() for k in keys])
        return
    table = Listing(
        "queue",
        Column("partition key", flex=True),
        Column("dead job", justify="right"),
        "dead",
        "waiting",
        Column("since (UTC)", drop=1),
    )
    for k in keys:
        since = "-" if k.since is None else k.since.strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(
            k.queue, k.partition_key, str(k.dead_job_id), str(k.dead), str(k.waiting), since
        )
    table.print()


def _set_paused(
    app_path: str | None, database_url: str | None, name: str, paused: bool, as_json: bool
) -> None:
    app = load_app(app_path, database_url)
    try:
        run_guarded(lambda: app.pause_queue(name) if paused else app.resume_queue(name))
        holds: list[QueueHold] = run_guarded(lambda: app.queues.holds(name))
    finally:
        app.close()
    if as_json:
        print_json({"name": name, "paused": paused})
    else:
        # A window or a breaker may still hold the queue: say so (docs/operations.md).
        others = ", ".join(h.source for h in holds if h.source != "manual")
        still = f" (still held by: {others})" if others and not paused else ""
        click.echo(f"queue {name} {'paused' if paused else 'resumed'}{still}")


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
