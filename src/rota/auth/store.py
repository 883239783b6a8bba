"""Token storage, written once over the dialect seam: API tokens, the dashboard's browser
sessions and its single-use login links, all stored as SHA-256 digests
(SQL: drivers/<dialect>/queries/token.sql and session.sql)."""

from __future__ import annotations

from typing import Any

from rota.drivers.base import Driver, LoginLinkRecord, TokenRecord
from rota.drivers.database import Row


class TokenStore:
    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def _record(self, row: Row) -> TokenRecord:
        c = self._db.codec
        return TokenRecord(
            name=row["name"],
            role=row["role"],
            created_at=c.instant(row["created_at"]),
            revoked_at=c.time(row["revoked_at"]),
            expires_at=c.time(row["expires_at"]),
            last_used_at=c.time(row["last_used_at"]),
            expired=c.flag(row["expired"]),
            stale=c.flag(row["stale"]),
        )

    def _write(self, name: str, params: dict[str, Any] | None = None) -> list[Row]:
        return self._db.execute(name, params or {})

    def insert(self, name: str, digest: str, role: str, seconds: float | None = None) -> bool:
        params = {"name": name, "digest": digest, "role": role, "seconds": seconds}
        return bool(self._write("token_insert", params))

    def find(self, digest: str) -> TokenRecord | None:
        rows = self._db.query("token_find", {"digest": digest})
        return self._record(rows[0]) if rows else None

    def all(self) -> list[TokenRecord]:
        return [self._record(r) for r in self._db.query("token_list")]

    def revoke(self, name: str) -> bool:
        return bool(self._write("token_revoke", {"name": name}))

    def touch(self, digest: str) -> None:
        self._write("token_touch", {"digest": digest})

    def session_insert(self, digest: str, token_digest: str, seconds: float) -> None:
        params = {"digest": digest, "token_digest": token_digest, "seconds": seconds}
        self._write("session_insert", params)

    def session_find(self, digest: str) -> tuple[TokenRecord, str] | None:
        rows = self._db.query("session_find", {"digest": digest})
        return (self._record(rows[0]), str(rows[0]["digest"])) if rows else None

    def session_end(self, digest: str) -> bool:
        return bool(self._write("session_end", {"digest": digest}))

    def link_insert(self, digest: str, name: str, seconds: float) -> bool:
        params = {"digest": digest, "name": name, "seconds": seconds}
        return bool(self._write("login_link_insert", params))

    def link_redeem(self, digest: str) -> str | None:
        rows = self._write("login_link_redeem", {"digest": digest})
        return str(rows[0]["token_digest"]) if rows else None

    def link_find(self, digest: str) -> LoginLinkRecord | None:
        rows = self._db.query("login_link_find", {"digest": digest})
        if not rows:
            return None
        c = self._db.codec
        r = rows[0]
        return LoginLinkRecord(
            r["name"], r["role"], c.flag(r["used"]), c.flag(r["expired"]), c.flag(r["token_live"])
        )

    def prune(self) -> None:
        self._write("session_prune")
        self._write("login_link_prune")
