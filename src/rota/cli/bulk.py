"""The operations feature's bulk actions on the command line: `rota queues purge NAME` and
`rota jobs cancel-many --queue ... --task ...`, each with --dry-run and an audit record
(`rota jobs audit`)."""

from __future__ import annotations

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.ops.bulk import CANCELLABLE, MAX_BULK, WAITING, BulkReport

REASON = click.option(
    "--reason", required=True, help="Why (kept in the audit record with who and when)."
)
DRY_RUN = click.option(
    "--dry-run", is_flag=True, help="Count what would be cancelled, per task; change nothing."
)
TOKEN = click.option(
    "--token", envvar="ROTA_TOKEN", default=None, help="An API token to act as ($ROTA_TOKEN)."
)


def _report(report: BulkReport, as_json: bool) -> None:
    if as_json:
        print_json(report.to_json())
        return
    verb = "would cancel" if report.dry_run else "cancelled"
    click.echo(f"{report.action}: {verb} {report.count} of {report.matched} matching job(s)")
    for task, count in report.per_task.items():
        click.echo(f"  {task}\t{count}")
    if report.audit_id is not None:
        click.echo(f"audit record {report.audit_id} (rota jobs audit)")


@click.command("purge")
@app_options
@click.argument("name")
@REASON
@DRY_RUN
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_BULK),
    default=MAX_BULK,
    show_default=True,
    help="At most this many jobs, oldest first.",
)
@TOKEN
@json_option
def purge(
    app_path: str | None,
    database_url: str | None,
    name: str,
    reason: str,
    dry_run: bool,
    limit: int,
    token: str | None,
    as_json: bool,
) -> None:
    """Cancel every waiting job of queue NAME (running jobs finish)."""
    app = load_app(app_path, database_url)
    try:
        report = run_guarded(
            lambda: app.queues.purge(name, reason=reason, dry_run=dry_run, limit=limit, token=token)
        )
    finally:
        app.close()
    _report(report, as_json)


@click.command("cancel-many")
@app_options
@click.option("--queue", default=None, help="Only jobs of this queue.")
@click.option("--task", default=None, help="Only jobs of this task (its full name).")
@click.option("--tenant", default=None, help="Only jobs of this tenant.")
@click.option("--id", "ids", type=int, multiple=True, help="Only these job ids (repeatable).")
@click.option(
    "--state",
    "states",
    type=click.Choice([str(s) for s in CANCELLABLE]),
    multiple=True,
    help="States to cancel (repeatable; default: scheduled, available, retryable). "
    "Running jobs are asked to stop.",
)
@click.option("--all", "everything", is_flag=True, help="Allow a selection with no filter.")
@REASON
@DRY_RUN
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_BULK),
    default=10_000,
    show_default=True,
    help="At most this many jobs, oldest first.",
)
@TOKEN
@json_option
def cancel_many(
    app_path: str | None,
    database_url: str | None,
    queue: str | None,
    task: str | None,
    tenant: str | None,
    ids: tuple[int, ...],
    states: tuple[str, ...],
    everything: bool,
    reason: str,
    dry_run: bool,
    limit: int,
    token: str | None,
    as_json: bool,
) -> None:
    """Cancel the jobs matching every filter given, audited."""
    app = load_app(app_path, database_url)
    try:
        report = run_guarded(
            lambda: app.jobs.cancel(
                queue=queue,
                task=task,
                tenant=tenant,
                ids=ids or None,
                states=states or WAITING,
                all=everything,
                reason=reason,
                dry_run=dry_run,
                limit=limit,
                token=token,
            )
        )
    finally:
        app.close()
    _report(report, as_json)


@click.command("audit")
@app_options
@click.option(
    "--action",
    type=click.Choice(["purge", "cancel"]),
    default=None,
    help="Only this kind of action.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=50,
    show_default=True,
    help="How many records, newest first.",
)
@json_option
def audit(
    app_path: str | None, database_url: str | None, action: str | None, limit: int, as_json: bool
) -> None:
    """The audit records of queue purges and bulk cancels, newest first."""
    app = load_app(app_path, database_url)
    try:
        records = run_guarded(lambda: app.jobs.audit(action=action, limit=limit))
    finally:
        app.close()
    if as_json:
        print_json([r.to_json() for r in records])
        return
    for r in records:
        click.echo(
            "\t".join(
                [
                    str(r.id),
                    r.created_at.isoformat(timespec="seconds"),
                    r.action,
                    str(r.count),
                    r.principal,
                    r.reason,
                ]
            )
        )


def install(root: click.Group) -> None:
    """Add the bulk actions to `rota queues` and `rota jobs`."""
    for group, command in (("queues", purge), ("jobs", cancel_many), ("jobs", audit)):
        target = root.commands[group]
        assert isinstance(target, click.Group)
        target.add_command(command)
