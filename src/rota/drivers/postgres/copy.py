"""`rota db copy` on PostgreSQL: the target side. Rows arrive through COPY, all tables in
one transaction, and the id sequences are moved past the copied ids at the end."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from rota.drivers.base import CopyColumn
from rota.drivers.postgres.database import SCRIPTS
from rota.errors import ConfigurationError

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver


def _table(name: str) -> sql.Identifier:
    if not name.startswith("rota_"):
        raise ConfigurationError(f"{name!r} is not one of rota's tables")
    return sql.Identifier(name)


class PostgresCopyWriter:
    def __init__(self, cur: psycopg.Cursor[Any], serial: list[tuple[str, str]]) -> None:
        self._cur = cur
        self._serial = serial

    def write(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            _table(table), sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        with self._cur.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
        return len(rows)

    def count(self, table: str) -> int:
        self._cur.execute(sql.SQL("SELECT count(*) AS n FROM {}").format(_table(table)))
        row = self._cur.fetchone()
        return int(row["n"]) if row else 0

    def advance_sequences(self) -> None:
        for table, column in self._serial:
            # The next id comes after the largest copied one (or stays at 1 when empty).
            self._cur.execute(
                sql.SQL(
                    "SELECT setval(pg_get_serial_sequence({}, {}), "
                    "COALESCE((SELECT max({}) FROM {}), 0) + 1, false)"
                ).format(
                    sql.Literal(table), sql.Literal(column), sql.Identifier(column), _table(table)
                )
            )

    def recount(self) -> None:
        for statement in SCRIPTS["copy_recount"]:
            self._cur.execute(statement)


class PostgresCopyStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def columns(self) -> dict[str, list[CopyColumn]]:
        out: dict[str, list[CopyColumn]] = {}
        for r in self._d._rows("copy_columns"):
            out.setdefault(r["table_name"], []).append(CopyColumn(r["column_name"], r["type_name"]))
        return out

    def dependencies(self) -> list[tuple[str, str]]:
        return [(r["child"], r["parent"]) for r in self._d._rows("copy_foreign_keys")]

    def count(self, table: str) -> int:
        with self._d._tx(single=True) as cur:
            cur.execute(sql.SQL("SELECT count(*) AS n FROM {}").format(_table(table)))
            row = cur.fetchone()
            return int(row["n"]) if row else 0

    def read(
        self, table: str, columns: Sequence[str], after: int, limit: int
    ) -> list[tuple[int, tuple[Any, ...]]]:
        raise ConfigurationError(
            "rota db copy reads from SQLite: to move between PostgreSQL servers use "
            "pg_dump --schema=<schema> and pg_restore"
        )

    @contextlib.contextmanager
    def writer(self) -> Iterator[PostgresCopyWriter]:
        serial = [(r["table_name"], r["column_name"]) for r in self._d._rows("copy_serial_columns")]
        with self._d._tx() as cur:
            yield PostgresCopyWriter(cur, serial)
