"""`rota tokens create|ls|revoke`: API tokens for the HTTP API and the dashboard."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from rota.auth import Role
from rota.auth.tokens import parse_duration
from rota.cli.common import (
    app_options,
    fail,
    json_option,
    load_app,
    print_json,
    run_guarded,
)
from rota.cli.table import Listing
from rota.drivers.base import TokenRecord
from rota.errors import ArgumentsError

ROLES = [r.value for r in Role]


@click.group()
def tokens() -> None:
    """Create, list and revoke API tokens."""


@tokens.command()
@app_options
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True, help="What the token may do.")
@click.option(
    "--expires",
    metavar="DURATION",
    help="Lifetime, e.g. 12h, 30d or 2w (default: until revoked). An expired token gets 401.",
)
@json_option
def create(
    app_path: str | None,
    database_url: str | None,
    name: str,
    role: str,
    expires: str | None,
    as_json: bool,
) -> None:
    """Create a token for NAME; the secret is printed once and never stored."""
    if expires is not None:
        try:
            parse_duration(expires, "--expires")
        except ArgumentsError as exc:
            raise click.BadParameter(str(exc), param_hint="--expires") from None
    app = load_app(app_path, database_url)
    try:
        secret: str = run_guarded(lambda: app.tokens.create(name, role, expires=expires))
        record = next(t for t in app.tokens.list() if t.name == name)
    finally:
        app.close()
    if as_json:
        print_json({**record.to_json(), "token": secret})
        return
    click.echo(secret)
    until = "" if record.expires_at is None else f", expires {_time(record.expires_at)} UTC"
    click.echo(
        f"token {name} ({role}{until}) created: keep it now, it is not shown again", err=True
    )


@tokens.command("ls")
@app_options
@click.option("--all", "show_all", is_flag=True, help="Include revoked tokens.")
@json_option
def ls(app_path: str | None, database_url: str | None, show_all: bool, as_json: bool) -> None:
    """List tokens: names, roles, lifetimes and last use (never secrets)."""
    app = load_app(app_path, database_url)
    try:
        found: list[TokenRecord] = run_guarded(app.tokens.list)
    finally:
        app.close()
    if not show_all:
        found = [t for t in found if t.revoked_at is None]
    if as_json:
        print_json([t.to_json() for t in found])
        return
    table = Listing(
        "name", "role", "created (UTC)", "expires (UTC)", "last used (UTC)", "revoked (UTC)"
    )
    for t in found:
        expires = "never" if t.expires_at is None else _time(t.expires_at)
        table.add_row(
            t.name,
            t.role,
            _time(t.created_at),
            f"{expires} (expired)" if t.expired else expires,
            "never" if t.last_used_at is None else _time(t.last_used_at),
            "-" if t.revoked_at is None else _time(t.revoked_at),
        )
    table.print()


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


@tokens.command()
@app_options
@click.argument("name")
@json_option
def revoke(app_path: str | None, database_url: str | None, name: str, as_json: bool) -> None:
    """Revoke the token called NAME (at once: its next request is refused)."""
    app = load_app(app_path, database_url)
    try:
        done: bool = run_guarded(lambda: app.tokens.revoke(name))
    finally:
        app.close()
    if not done:
        fail(f"no live token named {name!r}; see `rota tokens ls`")
    if as_json:
        print_json({"name": name, "revoked": True})
    else:
        click.echo(f"token {name} revoked")
