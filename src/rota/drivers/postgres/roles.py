"""Render least-privilege role plans (rota.security.roles) as PostgreSQL statements,
and apply them. Every statement is idempotent: rerun after each `rota migrate`."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

from rota.drivers.catalog import CatalogStore
from rota.security.roles import RolePlan


def _ident(*names: str) -> sql.Identifier:
    return sql.Identifier(*names)


def render(plans: Sequence[RolePlan], schema: str, catalog: CatalogStore) -> list[str]:
    """The statements that create the roles (NOLOGIN: grant them to login roles) and
    set their privileges to exactly the plan's, for the objects that exist now."""
    sequences = catalog.sequences()
    functions = catalog.functions()
    out: list[sql.Composable] = []
    for p in plans:
        role = _ident(p.role)
        # Dollar-quoted so the role name is quoted once, by sql.Identifier.
        out.append(
            sql.SQL(
                "DO $rota$ BEGIN CREATE ROLE {} NOLOGIN; "
                "EXCEPTION WHEN duplicate_object THEN NULL; END $rota$"
            ).format(role)
        )
        # Start from nothing in this schema, so a rerun also takes back what a
        # capability no longer has.
        out.append(
            sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}").format(_ident(schema), role)
        )
        out.append(
            sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA {} FROM {}").format(_ident(schema), role)
        )
        out.append(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(_ident(schema), role))
        for grant in p.grants:
            columns = (
                sql.SQL("")
                if grant.columns is None
                else sql.SQL(" ({})").format(sql.SQL(", ").join(map(_ident, grant.columns)))
            )
            out.append(
                sql.SQL("GRANT {}{} ON TABLE {} TO {}").format(
                    sql.SQL(grant.privilege), columns, _ident(schema, grant.table), role
                )
            )
        if p.sequences:
            for name in sequences:
                out.append(
                    sql.SQL("GRANT USAGE ON SEQUENCE {} TO {}").format(_ident(schema, name), role)
                )
        for name, args in functions:
            verb = "GRANT" if p.functions else "REVOKE"
            link = "TO" if p.functions else "FROM"
            # `args` comes from pg_get_function_identity_arguments: type names, not input.
            out.append(
                sql.SQL("{} EXECUTE ON FUNCTION {}({}) {} {}").format(
                    sql.SQL(verb), _ident(schema, name), sql.SQL(args), sql.SQL(link), role
                )
            )
    return [statement.as_string(None) for statement in out]


def apply(driver: object, statements: Sequence[str]) -> None:
    """Run `statements` in one transaction (all roles change together, or none)."""
    from typing import LiteralString, cast

    from rota.drivers.postgres.driver import PostgresDriver

    assert isinstance(driver, PostgresDriver)
    with driver._tx() as cur:
        for statement in statements:
            # Rendered above from identifiers and fixed text: as trusted as a literal.
            cur.execute(cast(LiteralString, statement))  # type: ignore[redundant-cast]
