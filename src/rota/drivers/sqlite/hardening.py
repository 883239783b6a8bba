"""Production-hardening storage on SQLite: job progress, sealed arguments for key
rotation, and the catalog of rota's tables (copy)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rota.drivers import queries
from rota.drivers.base import ProgressUpdate, SealedRow, TableInfo
from rota.errors import ArgumentsError

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")
_KINDS = ("job", "schedule")


def _kind(kind: str) -> str:
    if kind not in _KINDS:
        raise ArgumentsError(f"kind must be one of {_KINDS}, not {kind!r}")
    return kind


class SQLiteProgressStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def record_many(self, updates: Sequence[ProgressUpdate]) -> set[int]:
        if not updates:
            return set()
        batch = json.dumps([[u.job_id, u.lease_token, u.fraction, u.message] for u in updates])
        with self._d._write() as db:
            return {r[0] for r in db.execute(_Q["job_progress_record_many"], {"batch": batch})}


class SQLiteSealedArgsStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def scan(self, kind: str, after: int, limit: int) -> list[SealedRow]:
        rows = self._d._read(f"sealed_{_kind(kind)}_scan", {"after": after, "limit": limit})
        return [SealedRow(r["id"], r["args"]) for r in rows]

    def swap(self, kind: str, row_id: int, old_json: str, new_json: str) -> bool:
        params = {"id": row_id, "old": old_json, "new": new_json}
        with self._d._write() as db:
            return db.execute(_Q[f"sealed_{_kind(kind)}_swap"], params).fetchone() is not None


class SQLiteCatalogStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def schema(self) -> str:
        return str(self._d._read("catalog_schema")[0]["name"])

    def tables(self) -> list[TableInfo]:
        return [
            TableInfo(r["name"], tuple(json.loads(r["columns"])))
            for r in self._d._read("catalog_tables")
        ]

    def sequences(self) -> list[str]:
        return []

    def functions(self) -> list[tuple[str, str]]:
        return []

    def roles(self, names: Sequence[str]) -> dict[str, str | None]:
        return {}  # SQLite has no roles
