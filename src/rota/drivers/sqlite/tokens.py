"""API token storage on SQLite."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rota.drivers import queries
from rota.drivers.base import TokenRecord

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


def _record(row: sqlite3.Row) -> TokenRecord:
    revoked = row["revoked_at"]
    return TokenRecord(
        name=row["name"],
        role=row["role"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        revoked_at=None if revoked is None else datetime.fromtimestamp(revoked, UTC),
    )


class SQLiteTokenStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def insert(self, name: str, digest: str, role: str) -> bool:
        with self._d._write() as db:
            params = {"name": name, "digest": digest, "role": role}
            return db.execute(_Q["token_insert"], params).fetchone() is not None

    def find(self, digest: str) -> TokenRecord | None:
        rows = self._d._read("token_find", {"digest": digest})
        return _record(rows[0]) if rows else None

    def all(self) -> list[TokenRecord]:
        return [_record(r) for r in self._d._read("token_list")]

    def revoke(self, name: str) -> bool:
        with self._d._write() as db:
            return db.execute(_Q["token_revoke"], {"name": name}).fetchone() is not None
