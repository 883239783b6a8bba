"""API tokens, browser sessions and login links on SQLite (digests only)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.drivers.base import LoginLinkRecord, TokenRecord

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _record(row: sqlite3.Row) -> TokenRecord:
    return TokenRecord(
        name=row["name"],
        role=row["role"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        revoked_at=_ts(row["revoked_at"]),
        expires_at=_ts(row["expires_at"]),
        last_used_at=_ts(row["last_used_at"]),
        expired=bool(row["expired"]),
        stale=bool(row["stale"]),
    )


class SQLiteTokenStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def _one(self, name: str, params: dict[str, Any]) -> sqlite3.Row | None:
        with self._d._write() as db:
            row: sqlite3.Row | None = db.execute(_Q[name], params).fetchone()
            return row

    def insert(self, name: str, digest: str, role: str, seconds: float | None = None) -> bool:
        params = {"name": name, "digest": digest, "role": role, "seconds": seconds}
        return self._one("token_insert", params) is not None

    def find(self, digest: str) -> TokenRecord | None:
        rows = self._d._read("token_find", {"digest": digest})
        return _record(rows[0]) if rows else None

    def all(self) -> list[TokenRecord]:
        return [_record(r) for r in self._d._read("token_list")]

    def revoke(self, name: str) -> bool:
        return self._one("token_revoke", {"name": name}) is not None

    def touch(self, digest: str) -> None:
        self._one("token_touch", {"digest": digest})

    def session_insert(self, digest: str, token_digest: str, seconds: float) -> None:
        self._one(
            "session_insert", {"digest": digest, "token_digest": token_digest, "seconds": seconds}
        )

    def session_find(self, digest: str) -> tuple[TokenRecord, str] | None:
        rows = self._d._read("session_find", {"digest": digest})
        return (_record(rows[0]), str(rows[0]["digest"])) if rows else None

    def session_end(self, digest: str) -> bool:
        return self._one("session_end", {"digest": digest}) is not None

    def link_insert(self, digest: str, name: str, seconds: float) -> bool:
        params = {"digest": digest, "name": name, "seconds": seconds}
        return self._one("login_link_insert", params) is not None

    def link_redeem(self, digest: str) -> str | None:
        row = self._one("login_link_redeem", {"digest": digest})
        return None if row is None else str(row["token_digest"])

    def link_find(self, digest: str) -> LoginLinkRecord | None:
        rows = self._d._read("login_link_find", {"digest": digest})
        if not rows:
            return None
        r = rows[0]
        return LoginLinkRecord(
            r["name"], r["role"], bool(r["used"]), bool(r["expired"]), bool(r["token_live"])
        )

    def prune(self) -> None:
        self._one("session_prune", {})
        self._one("login_link_prune", {})
