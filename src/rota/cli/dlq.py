"""`rota dlq ls|show|replay|dismiss|replays`: dead letters and governed replay."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.cli.table import Column, Listing, json_text, say, visible, wide_option
from rota.job import Job
from rota.ops.model import ReplayRecord, ReplayReport, Selection

F = TypeVar("F", bound=Callable[..., Any])
_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_when(value: str | None, name: str) -> datetime | None:
    """An ISO 8601 time (UTC when it has no zone) or an age such as 30m, 2h, 7d (ago)."""
    if value is None:
        return None
    match = _AGO.match(value.strip())
    if match:
        seconds = float(match[1]) * _UNITS[match[2]]
        return datetime.now(UTC) - timedelta(seconds=seconds)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: use an ISO 8601 time (2026-11-29T21:00) or an age like 30m, 2h, 7d",
            param_hint=name,
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def selection_options(func: F) -> F:
    for option in reversed(
        [
            click.option(
                "--id", "ids", type=int, multiple=True, help="A dead letter (repeatable)."
            ),
            click.option("--task", help="Only dead letters of this task."),
            click.option("--queue", help="Only dead letters of this queue."),
            click.option("--error-type", help="Last error's type, e.g. ValueError (suffix match)."),
            click.option("--text", help="Text in the last error message (case-insensitive)."),
            click.option("--since", help="Discarded at or after: ISO time or age (2h, 7d)."),
            click.option("--until", help="Discarded before: ISO time or age."),
            click.option("--partition-key", help="Only dead letters of this partition key."),
        ]
    ):
        func = option(func)
    return func


def token_option(func: F) -> F:
    return click.option(
        "--token",
        envvar="ROTA_API_TOKEN",
        help="Act as this API token's owner (default: direct database access, as admin).",
    )(func)


def _selection(options: dict[str, Any], every: bool = False) -> Selection:
    chosen: Selection = run_guarded(
        lambda: Selection(
            ids=tuple(options["ids"]) or None,
            task=options["task"],
            queue=options["queue"],
            error_type=options["error_type"],
            text=options["text"],
            since=parse_when(options["since"], "--since"),
            until=parse_when(options["until"], "--until"),
            partition_key=options["partition_key"],
            all=every,
        )
    )
    return chosen


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


@click.group()
def dlq() -> None:
    """Dead letters (discarded jobs): list, show, replay, dismiss."""


@dlq.command("ls")
@app_options
@selection_options
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Most rows."
)
@click.option("--before-id", type=int, help="Page: only dead letters with a smaller id.")
@token_option
@wide_option
@json_option
def ls(
    app_path: str | None,
    database_url: str | None,
    limit: int,
    before_id: int | None,
    token: str | None,
    wide: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """List dead letters, newest first, with their last error."""
    selection = _selection(options)
    app = load_app(app_path, database_url)
    try:
        found: list[Job] = run_guarded(
            lambda: app.dlq.list(selection, limit=limit, before_id=before_id, token=token)
        )
    finally:
        app.close()
    if as_json:
        print_json([job.to_json() for job in found])
        return
    table = Listing(
        Column("id", justify="right"),
        Column("task", flex=True),
        "queue",
        Column("partition", drop=3),
        Column("attempts", drop=1),
        Column("discarded (UTC)", drop=2),
        Column("last error", flex=True, least=24),
    )
    for job in found:
        last = job.history[-1] if job.history else None
        error = f"{last.error_type}: {last.message}" if last and last.error_type else ""
        table.add_row(
            job.id,
            job.task,
            job.queue,
            job.partition_key or "",
            len(job.history),
            _when(job.finished_at),
            error,
        )
    table.print(wide=wide)


@dlq.command()
@app_options
@click.argument("job_id", type=int)
@token_option
@json_option
def show(
    app_path: str | None, database_url: str | None, job_id: int, token: str | None, as_json: bool
) -> None:
    """Show one dead letter with every attempt and its traceback."""
    app = load_app(app_path, database_url)
    try:
        job: Job = run_guarded(lambda: app.dlq.get(job_id, token=token))
    finally:
        app.close()
    if as_json:
        print_json(job.to_json())
        return
    say(
        f"job {job.id}  {job.task}  queue={job.queue}  state={job.state.value}  "
        f"attempt {job.attempt}/{job.max_attempts}  partition={job.partition_key or '-'}"
    )
    args = job.to_json()["args"]
    say(f"args: {args if isinstance(args, str) else json_text(args)}")
    if job.meta:
        say(f"meta: {json_text(job.meta)}")
    for a in job.history:
        say(
            f"  #{a.attempt} {a.outcome.value:<9} {_when(a.started_at)} -> "
            f"{_when(a.finished_at)} worker={a.worker or '-'} "
            f"{a.error_type or ''} {a.message or ''}"
        )
        if a.traceback:
            for text in a.traceback.rstrip().split("\n"):
                say((text, "dim"))


def _print_report(report: ReplayReport) -> None:
    verb = "would replay" if report.dry_run else f"replay {report.replay_id}: replayed"
    pace = "" if report.rate is None else f" at {report.rate:g}/s (over {report.seconds:.1f}s)"
    click.echo(f"{verb} {report.count} of {report.matched} matching dead letter(s){pace}")
    for task, n in report.per_task.items():
        click.echo(f"  {n:>7}  {visible(task)}")
    if report.matched > report.count and report.count:
        click.echo(
            f"  ({report.matched - report.count} more match: run it again, or raise --limit)"
        )
    click.echo(f"as {visible(report.principal)}")


@dlq.command()
@app_options
@selection_options
@click.option("--all", "every", is_flag=True, help="Replay every dead letter (no filter).")
@click.option("--reason", help="Why (kept in the audit record). Required unless --dry-run.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="Jobs per second.")
@click.option("--dry-run", is_flag=True, help="Count what would be replayed; change nothing.")
@click.option(
    "--limit",
    type=click.IntRange(1, 100_000),
    default=10_000,
    show_default=True,
    help="Most dead letters replayed by this run (run it again for more).",
)
@click.option(
    "--attempts",
    type=click.IntRange(1, 10_000),
    default=1,
    show_default=True,
    help="Attempts each replayed job gets.",
)
@token_option
@json_option
def replay(
    app_path: str | None,
    database_url: str | None,
    every: bool,
    reason: str | None,
    rate: float | None,
    dry_run: bool,
    limit: int,
    attempts: int,
    token: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Put dead letters back in their queues, in place (same id, history kept).

    The selection must be bounded (ids, filters or a time range) or --all. Replayed jobs
    are no longer dead letters: running the same replay again takes only jobs that
    failed again. Every replay is audited (`rota dlq replays`)."""
    selection = _selection(options, every)
    if not dry_run and not reason:
        raise click.UsageError("--reason is required: it goes into the audit record")
    app = load_app(app_path, database_url)
    try:
        report: ReplayReport = run_guarded(
            lambda: app.dlq.replay(
                selection,
                reason=reason or "dry run",
                rate=rate,
                dry_run=dry_run,
                limit=limit,
                attempts=attempts,
                token=token,
            )
        )
    finally:
        app.close()
    if as_json:
        print_json(report.to_json())
    else:
        _print_report(report)


@dlq.command()
@app_options
@click.argument("job_ids", type=int, nargs=-1, required=True)
@click.option("--reason", required=True, help="Why (kept in each job's meta).")
@token_option
@json_option
def dismiss(
    app_path: str | None,
    database_url: str | None,
    job_ids: tuple[int, ...],
    reason: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Give up on dead letters: they become cancelled and stop blocking their partition."""
    app = load_app(app_path, database_url)
    try:
        done: list[int] = run_guarded(lambda: app.dlq.dismiss(job_ids, reason=reason, token=token))
    finally:
        app.close()
    if as_json:
        print_json({"dismissed": done})
    else:
        click.echo(f"dismissed {len(done)} dead letter(s): {', '.join(map(str, done)) or '-'}")


@dlq.command()
@app_options
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=20, show_default=True, help="Most rows."
)
@token_option
@wide_option
@json_option
def replays(
    app_path: str | None,
    database_url: str | None,
    limit: int,
    token: str | None,
    wide: bool,
    as_json: bool,
) -> None:
    """The replay audit: who replayed what, when, why and how many."""
    app = load_app(app_path, database_url)
    try:
        records: list[ReplayRecord] = run_guarded(lambda: app.dlq.replays(limit=limit, token=token))
    finally:
        app.close()
    if as_json:
        print_json([r.to_json() for r in records])
        return
    table = Listing(
        Column("id", justify="right"),
        Column("at (UTC)", drop=2),
        "who",
        "count",
        Column("rate", drop=1),
        Column("reason", flex=True),
        Column("selection", flex=True),
    )
    for r in records:
        table.add_row(
            r.id,
            _when(r.created_at),
            r.principal,
            r.count,
            "-" if r.rate is None else f"{r.rate:g}/s",
            r.reason,
            json_text(r.to_json()["selection"]),
        )
    table.print(wide=wide)
