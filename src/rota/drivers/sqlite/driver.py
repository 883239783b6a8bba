"""SQLite driver: one file shared by every worker process on a host, WAL mode,
`BEGIN IMMEDIATE` for writes, and a data_version watcher instead of LISTEN/NOTIFY."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

from rota.drivers import queries
from rota.drivers.deadlines import Deadlines
from rota.drivers.sql import SQLDriver
from rota.drivers.sqlite.copy import SQLiteCopyStore
from rota.drivers.sqlite.database import SQLiteDatabase
from rota.drivers.sqlite.presence import SQLitePresence
from rota.drivers.sqlite.schema_edits import EDITS
from rota.drivers.sqlite.watch import DataVersionNotifier
from rota.drivers.url import DatabaseURL
from rota.errors import (
    SchemaError,
)

_Q = queries.load("sqlite")
_MIGRATIONS = queries.migrations("sqlite")


class SQLiteDriver(SQLDriver):
    dialect = "sqlite"
    latest_schema_version = len(_MIGRATIONS)

    def __init__(self, url: DatabaseURL) -> None:
        self._sqlite = SQLiteDatabase(url)
        super().__init__(self._sqlite)
        self._path = url.path
        self._busy_ms = self._sqlite.busy_ms
        self.copy = SQLiteCopyStore(self)
        self.presence = SQLitePresence(self._sqlite)

    # --- connections (through the dialect seam) ----------------------------------------

    def _conn(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._sqlite._pooled()

    @contextlib.contextmanager
    def _write(self, conn: sqlite3.Connection | None = None) -> Iterator[sqlite3.Cursor]:
        with self._sqlite.write(conn) as session:
            yield session._cursor

    def _read(self, name: str, params: dict[str, Any] | None = None) -> list[sqlite3.Row]:
        return self._sqlite.query(name, params)  # type: ignore[return-value]

    # --- schema -------------------------------------------------------------------------

    def deadlines_set(self, deadlines: Deadlines) -> None:
        """A local file has no silent peer: its calls are bounded by the busy timeout."""

    def schema_migrate(self) -> list[int]:
        applied: list[int] = []
        with self._write() as conn:
            conn.execute(_Q["schema_create_migrations"])
            current = int(conn.execute(_Q["schema_version"]).fetchone()[0])
            if current > self.latest_schema_version:
                raise SchemaError(
                    f"the database schema is at version {current}, newer than this rota knows "
                    f"({self.latest_schema_version}): upgrade rota"
                )
            for version, name, sql in _MIGRATIONS:
                if version <= current:
                    continue
                for statement in _statements(sql):
                    conn.execute(statement)
                if version in EDITS:
                    EDITS[version](conn)
                conn.execute(_Q["schema_record"], {"version": version, "name": name})
                applied.append(version)
        return applied

    # --- jobs ---------------------------------------------------------------------------

    # --- leadership and queues ------------------------------------------------------------

    # --- steps, inbox and user transactions -------------------------------------------------

    # --- wake-ups -------------------------------------------------------------------------

    def notifier(self) -> DataVersionNotifier:
        return DataVersionNotifier(self._path, self._busy_ms)

    def done_watcher(self) -> DataVersionNotifier:
        # No NOTIFY on SQLite: every commit to the file may have finished an awaited job.
        return DataVersionNotifier(self._path, self._busy_ms)


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (sqlite3 executes one at a time)."""
    out, current = [], []
    for line in sql.splitlines():
        if line.strip().startswith("--"):
            continue
        current.append(line)
        if sqlite3.complete_statement("\n".join(current)):
            out.append("\n".join(current).strip())
            current = []
    if "".join(current).strip():
        raise SchemaError("a migration ends with an incomplete statement")
    return [s for s in out if s]
