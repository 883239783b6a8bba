"""`rota tokens create|ls|revoke`: API tokens for the HTTP API and the dashboard."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from rota.auth import Role
from rota.cli.common import (
    app_options,
    console,
    fail,
    json_option,
    load_app,
    print_json,
    run_guarded,
)
from rota.drivers.base import TokenRecord

ROLES = [r.value for r in Role]


@click.group()
def tokens() -> None:
    """Create, list and revoke API tokens."""


@tokens.command()
@app_options
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True, help="What the token may do.")
@json_option
def create(
    app_path: str | None, database_url: str | None, name: str, role: str, as_json: bool
) -> None:
    """Create a token for NAME; the secret is printed once and never stored."""
    app = load_app(app_path, database_url)
    try:
        secret: str = run_guarded(lambda: app.tokens.create(name, role))
    finally:
        app.close()
    if as_json:
        print_json({"name": name, "role": role, "token": secret})
        return
    click.echo(secret)
    click.echo(f"token {name} ({role}) created: keep it now, it is not shown again", err=True)


@tokens.command("ls")
@app_options
@click.option("--all", "show_all", is_flag=True, help="Include revoked tokens.")
@json_option
def ls(app_path: str | None, database_url: str | None, show_all: bool, as_json: bool) -> None:
    """List tokens (names and roles, never secrets)."""
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
    table = Table("name", "role", "created (UTC)", "revoked (UTC)")
    for t in found:
        table.add_row(
            escape(t.name),
            t.role,
            t.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            "-" if t.revoked_at is None else t.revoked_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
    console.print(table)


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
