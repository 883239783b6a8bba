"""Render least-privilege role plans (planned by rota.security.roles) as PostgreSQL statements,
and apply them. Every statement is idempotent: rerun after each `rota migrate`. Roles
rota creates carry a comment that marks them; a role of the same name that rota did not
create is refused unless adopted, and no statement ever touches a table, sequence or
function that is not rota's."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

from rota.drivers.catalog import ROLE_MARKER, CatalogStore, RolePlan
from rota.errors import ConfigurationError


def _ident(*names: str) -> sql.Identifier:
    return sql.Identifier(*names)


def foreign_roles(plans: Sequence[RolePlan], catalog: CatalogStore) -> list[str]:
    """The planned role names that exist already without rota's mark."""
    existing = catalog.roles([p.role for p in plans])
    return sorted(name for name, comment in existing.items() if comment != ROLE_MARKER)


def render(
    plans: Sequence[RolePlan], schema: str, catalog: CatalogStore, *, adopt: bool = False
) -> list[str]:
    """The statements that create the roles (NOLOGIN: grant them to login roles) and
    set their privileges on rota's objects to exactly the plan's, for the objects that
    exist now. A role of a planned name that rota did not create is refused
    (ConfigurationError) unless `adopt`: it may hold grants an application relies on."""
    foreign = foreign_roles(plans, catalog)
    if foreign and not adopt:
        raise ConfigurationError(
            f"role(s) {', '.join(foreign)} exist already and were not created by "
            "`rota db roles`: choose another --prefix, or pass --adopt to let rota manage "
            "them (their grants on tables that are not rota's are kept)"
        )
    tables = [t.name for t in catalog.tables()]
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
        out.append(sql.SQL("COMMENT ON ROLE {} IS {}").format(role, sql.Literal(ROLE_MARKER)))
        # Start from nothing on rota's own tables and sequences, so a rerun also takes
        # back what a capability no longer has. Never `ALL TABLES IN SCHEMA`: the schema
        # may hold the application's tables, and the role grants on them.
        for name in tables:
            out.append(sql.SQL("REVOKE ALL ON TABLE {} FROM {}").format(_ident(schema, name), role))
        for name in sequences:
            out.append(
                sql.SQL("REVOKE ALL ON SEQUENCE {} FROM {}").format(_ident(schema, name), role)
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
    from rota.drivers.postgres.driver import PostgresDriver

    if not isinstance(driver, PostgresDriver):
        raise ConfigurationError("least-privilege roles are made on PostgreSQL only")
    driver.execute_rendered(statements)
