"""The caller's connection, from what a framework hands out: a SQLAlchemy Session or
Connection (sync or async) or Django's `connection` become the psycopg or sqlite3
connection under them, so `conn=` joins that framework's open transaction. Duck-typed by
module name: rota imports neither framework."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _from(conn: object, package: str) -> bool:
    return type(conn).__module__.split(".", 1)[0] == package


def plain_connection(conn: Any) -> Any:
    """The DB-API connection under a SQLAlchemy Session/Connection or Django's
    `connection`; anything else is returned as it is."""
    if _from(conn, "sqlalchemy"):
        if hasattr(conn, "get_bind"):  # an ORM Session: its connection in this transaction
            conn = conn.connection()
        # Connection.connection is the pool's proxy of the DB-API connection.
        return conn.connection.dbapi_connection
    if _from(conn, "django"):
        # django.db.connection (a proxy) or connections[alias]: connect if not yet.
        conn.ensure_connection()
        return conn.connection
    return conn


async def plain_connection_async(conn: Any) -> Any:
    """The driver's own async connection under a SQLAlchemy AsyncSession or
    AsyncConnection (psycopg's AsyncConnection, or aiosqlite's); a sync framework object
    as `plain_connection`; anything else as it is."""
    if _from(conn, "sqlalchemy") and hasattr(conn, "get_raw_connection"):
        raw = await conn.get_raw_connection()
        return raw.driver_connection
    if _from(conn, "sqlalchemy") and type(conn).__name__ == "AsyncSession":
        return await plain_connection_async(await conn.connection())
    return plain_connection(conn)


async def run_on_aiosqlite(conn: Any, call: Callable[[Any], T]) -> T | None:
    """Run `call(sqlite3 connection)` on the thread an aiosqlite connection owns (a sqlite3
    connection may only be used there); None when `conn` is not aiosqlite's."""
    if not _from(conn, "aiosqlite"):
        return None
    # aiosqlite keeps its sqlite3 connection and its thread private; _execute is how its
    # own methods run a function there.
    result: T = await conn._execute(call, conn._conn)
    return result
