"""`rota db copy` on SQLite: the source side, read table by table in rowid pages (WAL
reads take no lock, so workers on the file are not held up)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.drivers.base import CopyColumn, CopyWriter
from rota.errors import ConfigurationError

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(name: str) -> str:
    if not name.startswith("rota_"):
        raise ConfigurationError(f"{name!r} is not one of rota's tables")
    return _ident(name)


class SQLiteCopyStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def columns(self) -> dict[str, list[CopyColumn]]:
        out: dict[str, list[CopyColumn]] = {}
        for r in self._d._read("copy_columns"):
            out.setdefault(r["table_name"], []).append(CopyColumn(r["column_name"], r["type_name"]))
        return out

    def dependencies(self) -> list[tuple[str, str]]:
        return [(r["child"], r["parent"]) for r in self._d._read("copy_foreign_keys")]

    def count(self, table: str) -> int:
        with self._d._conn() as conn:
            return int(conn.execute(f"SELECT count(*) FROM {_table(table)}").fetchone()[0])

    def read(
        self, table: str, columns: Sequence[str], after: int, limit: int
    ) -> list[tuple[int, tuple[Any, ...]]]:
        names = ", ".join(_ident(c) for c in columns)
        statement = (
            f"SELECT rowid, {names} FROM {_table(table)} WHERE rowid > ? ORDER BY rowid LIMIT ?"
        )
        with self._d._conn() as conn:
            rows = conn.execute(statement, (after, limit)).fetchall()
        return [(int(r[0]), tuple(r[1:])) for r in rows]

    @contextlib.contextmanager
    def writer(self) -> Iterator[CopyWriter]:
        raise ConfigurationError(
            "rota db copy writes to PostgreSQL: SQLite is the embedded starting point"
        )
        yield  # pragma: no cover
