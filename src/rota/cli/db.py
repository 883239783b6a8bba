"""`rota db roles|rotate-key|generate-key`: least-privilege roles, and the keys that
encrypt task arguments at rest (docs/security.md)."""

from __future__ import annotations

import click

from rota.cli.common import (
    app_options,
    fail,
    json_option,
    load_app,
    print_json,
    require_sqlite_file,
    run_guarded,
)
from rota.cli.progress import progress_bars
from rota.errors import ConfigurationError
from rota.security import roles as role_plans
from rota.security.encryption import RotationReport, generate_key, keyring_from_env, rotate_stored


@click.group()
def db() -> None:
    """Database administration: roles, encryption keys."""


@db.command("roles")
@app_options
@click.option(
    "--prefix",
    default="rota",
    show_default=True,
    help="Roles are named PREFIX_enqueue, PREFIX_worker, PREFIX_deadletters, "
    "PREFIX_replay and PREFIX_metrics.",
)
@click.option("--apply", "apply_", is_flag=True, help="Run the statements (default: print).")
@click.option(
    "--adopt",
    is_flag=True,
    help="Manage roles of these names that exist already but were not created by rota "
    "(their grants on other tables are kept).",
)
@json_option
def roles(
    app_path: str | None,
    database_url: str | None,
    prefix: str,
    apply_: bool,
    adopt: bool,
    as_json: bool,
) -> None:
    """Create least-privilege PostgreSQL roles for rota's tables in the app's schema.

    The roles cannot log in: grant them to your login roles, e.g.
    `CREATE ROLE billing_web LOGIN PASSWORD '...' IN ROLE rota_enqueue`. Rerun after
    every `rota migrate` so new tables are covered. A role of the same name that rota
    did not create is refused unless --adopt is given; rota never changes grants on
    tables that are not its own."""
    try:
        role_plans.check_prefix(prefix)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), param_hint="--prefix") from None
    app = load_app(app_path, database_url)
    try:
        if app.driver.dialect != "postgres":
            fail("roles are a PostgreSQL feature: SQLite has no users (protect the file instead)")
        from rota.drivers.postgres import roles as pg_roles

        def build() -> tuple[str, list[role_plans.RolePlan], list[str]]:
            catalog = app.driver.catalog
            schema = catalog.schema()
            tables = catalog.tables()
            if not any(t.name == "rota_jobs" for t in tables):
                raise ConfigurationError(
                    f"no rota tables in schema {schema!r}: run `rota migrate` first"
                )
            plans = role_plans.plan(prefix, tables)
            return schema, plans, pg_roles.render(plans, schema, catalog, adopt=adopt)

        schema, plans, statements = run_guarded(build)
        if apply_:
            run_guarded(lambda: pg_roles.apply(app.driver, statements))
    finally:
        app.close()
    if as_json:
        print_json(
            {
                "schema": schema,
                "applied": apply_,
                "roles": {p.capability.value: p.role for p in plans},
                "statements": statements,
            }
        )
    elif apply_:
        names = ", ".join(p.role for p in plans)
        click.echo(f"roles {names} are set up for schema {schema} ({len(statements)} statements)")
    else:
        for statement in statements:
            click.echo(f"{statement};")


@db.command("generate-key")
def generate_key_command() -> None:
    """Print a new key for ROTA_ENCRYPTION_KEYS (put it first; keep the old ones after
    it until `rota db rotate-key` has resealed everything)."""
    click.echo(generate_key())


@db.command("rotate-key")
@app_options
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=500,
    show_default=True,
    help="Rows re-encrypted per transaction.",
)
@json_option
def rotate_key(app_path: str | None, database_url: str | None, batch: int, as_json: bool) -> None:
    """Re-encrypt stored arguments under the current key (the first of
    ROTA_ENCRYPTION_KEYS); safe while workers run. Exits 1 if some could not be read."""
    app = load_app(app_path, database_url)
    try:
        ring = run_guarded(keyring_from_env)
        with progress_bars(not as_json) as bars:
            report: RotationReport = run_guarded(
                lambda: rotate_stored(app.driver, ring, batch=batch, progress=bars)
            )
    finally:
        app.close()
    if as_json:
        print_json(report.to_json())
    else:
        click.echo(
            f"resealed {report.resealed}, already current {report.current}, "
            f"unreadable {report.unreadable}, changed meanwhile {report.changed}"
        )
    if report.unreadable:
        fail(
            f"{report.unreadable} sealed value(s) open with none of the configured keys: "
            "add the key that sealed them after the current one and run again"
        )


@db.command("copy")
@click.option("--from", "source_url", required=True, help="The SQLite installation: sqlite:///...")
@click.option("--to", "target_url", required=True, help="The PostgreSQL target: postgresql://...")
@click.option("--dry-run", is_flag=True, help="Check and count; write nothing.")
@click.option(
    "--batch",
    type=click.IntRange(1, 100_000),
    default=1000,
    show_default=True,
    help="Rows copied per statement.",
)
@json_option
def copy_command(
    source_url: str, target_url: str, dry_run: bool, batch: int, as_json: bool
) -> None:
    """Copy a rota installation from SQLite to PostgreSQL: every rota table (jobs with
    their history and steps, schedules and runs, tokens, batches, workflows, sagas,
    events, ...) into an empty target, in one transaction, verified by row counts.
    Stop the workers and producers on the source first."""
    from rota.copier import CopyReport, copy_installation
    from rota.drivers import open_driver
    from rota.drivers.url import parse

    try:
        source_parsed, target_parsed = parse(source_url), parse(target_url)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc)) from None
    require_sqlite_file(source_parsed, "--from")
    source, target = open_driver(source_parsed), open_driver(target_parsed, pool_size=1)
    try:
        with progress_bars(not as_json and not dry_run) as bars:
            report: CopyReport = run_guarded(
                lambda: copy_installation(
                    source, target, dry_run=dry_run, batch=batch, progress=bars
                )
            )
    finally:
        source.close()
        target.close()
    if as_json:
        print_json(report.to_json())
    else:
        verb = "would copy" if dry_run else "copied"
        click.echo(
            f"{verb} {source_parsed.redacted()} -> {target_parsed.redacted()}"
            + (" (dry run: nothing written)" if dry_run else "")
        )
        for t in report.tables:
            if t.skipped:
                click.echo(f"  {t.name:<24} skipped: {t.skipped}")
            elif t.target is None:
                click.echo(f"  {t.name:<24} {t.source} row(s)")
            else:
                mark = "ok" if t.ok else "MISMATCH"
                click.echo(f"  {t.name:<24} {t.source} -> {t.target} {mark}")
        for note in report.notes:
            click.echo(f"note: {note}")
        if report.running:
            click.echo(
                f"note: {report.running} job(s) were running in the source; on the target "
                "their leases expire and they run again"
            )
        if report.source_changed:
            click.echo(
                "warning: the source changed during the copy in "
                + ", ".join(report.source_changed)
                + ": stop producers and workers, and copy into an empty schema again"
            )
    if not report.ok:
        fail("the copy did not verify")
