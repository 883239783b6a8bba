"""PostgreSQL driver: psycopg 3 with a connection pool, `FOR UPDATE SKIP LOCKED`
claims, array-parameter batch writes and LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any, LiteralString, cast

import psycopg

from rota.drivers import queries
from rota.drivers.base import WakeFunc
from rota.drivers.postgres.copy import PostgresCopyStore
from rota.drivers.postgres.database import PostgresDatabase
from rota.drivers.postgres.presence import PostgresPresence
from rota.drivers.sql import SQLDriver
from rota.drivers.url import DatabaseURL
from rota.errors import (
    SchemaError,
)

_Q = queries.load("postgres")
_MIGRATIONS = queries.migrations("postgres")
log = logging.getLogger("rota.postgres")

JOBS_CHANNEL = "rota_jobs"
CONTROL_CHANNEL = "rota_control"


class PostgresDriver(SQLDriver):
    dialect = "postgres"
    latest_schema_version = len(_MIGRATIONS)

    def __init__(self, url: DatabaseURL, *, pool_size: int = 4) -> None:
        self._pg = PostgresDatabase(url, pool_size=pool_size)
        super().__init__(self._pg)
        self._conninfo = self._pg.conninfo
        self.copy = PostgresCopyStore(self)
        self.presence = PostgresPresence(self._pg)

    # --- connections (through the dialect seam) ----------------------------------------

    def _conn(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        return self._pg.connection()

    @contextlib.contextmanager
    def _tx(
        self, conn: Any = None, *, single: bool = False
    ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor in the caller's transaction (`conn`), or on a pooled connection in a
        transaction of its own (in autocommit when the caller runs a `single` statement)."""
        opened = self._pg.read(conn) if single else self._pg.write(conn)
        with opened as session:
            yield session._cursor

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one named statement (in autocommit) and return its rows."""
        with self._tx(single=True) as cur:
            cur.execute(_Q[name], params or {})
            return cur.fetchall() if cur.description else []

    # --- schema -------------------------------------------------------------------------

    def schema_migrate(self) -> list[int]:
        applied: list[int] = []
        with self._tx() as cur:
            cur.execute(_Q["schema_lock"])
            cur.execute(_Q["schema_create_migrations"])
            cur.execute(_Q["schema_version"])
            row = cur.fetchone()
            current = int(next(iter(row.values()))) if row else 0
            if current > self.latest_schema_version:
                raise SchemaError(
                    f"the database schema is at version {current}, newer than this rota knows "
                    f"({self.latest_schema_version}): upgrade rota"
                )
            for version, name, sql in _MIGRATIONS:
                if version <= current:
                    continue
                cur.execute(sql.encode())  # a whole file: several statements
                cur.execute(_Q["schema_record"], {"version": version, "name": name})
                applied.append(version)
        return applied

    # --- jobs ---------------------------------------------------------------------------

    # --- leadership and queues ------------------------------------------------------------

    # --- steps, inbox and user transactions -------------------------------------------------

    def execute_rendered(self, statements: Sequence[str]) -> None:
        """Run statements rota rendered itself (from identifiers and fixed text, e.g. the
        role grants of `rota db roles`) in one transaction: all of them, or none."""
        with self._tx() as cur:
            for statement in statements:
                # Rendered by rota from identifiers and fixed text: as trusted as a literal.
                cur.execute(cast(LiteralString, statement))  # type: ignore[redundant-cast]

    # --- wake-ups -------------------------------------------------------------------------

    def notifier(self) -> ListenNotifier:
        return ListenNotifier(self._conninfo)


class ListenNotifier:
    """LISTEN on the jobs and control channels; reconnects with backoff when the
    connection drops (polling covers the gap, so nothing waits forever)."""

    def __init__(self, conninfo: str | Callable[[], str]) -> None:
        self._conninfo = conninfo

    async def run(self, wake: WakeFunc, control: Callable[[str], None]) -> None:
        delay = 0.1
        while True:
            try:
                conninfo = self._conninfo() if callable(self._conninfo) else self._conninfo
                conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {JOBS_CHANNEL}")
                    await conn.execute(f"LISTEN {CONTROL_CHANNEL}")
                    delay = 0.1
                    wake(None)  # anything inserted while we were not listening
                    async for note in conn.notifies():
                        if note.channel == JOBS_CHANNEL:
                            wake(note.payload or None)
                        else:
                            control(note.payload)
            except psycopg.Error as exc:
                # Jittered, so the workers of a restarted server do not reconnect in step.
                wait = random.uniform(delay / 2, delay)
                log.warning("LISTEN connection lost (%s); retrying in %.1fs", exc, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, 5.0)


__all__ = ["PostgresDriver"]
