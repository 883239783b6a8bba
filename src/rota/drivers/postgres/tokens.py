"""API tokens, browser sessions and login links on PostgreSQL (digests only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rota.drivers.base import LoginLinkRecord, TokenRecord

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver


def _record(row: dict[str, Any]) -> TokenRecord:
    return TokenRecord(
        name=row["name"],
        role=row["role"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        expires_at=row["expires_at"],
        last_used_at=row["last_used_at"],
        expired=bool(row["expired"]),
        stale=bool(row["stale"]),
    )


class PostgresTokenStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def insert(self, name: str, digest: str, role: str, seconds: float | None = None) -> bool:
        params = {"name": name, "digest": digest, "role": role, "seconds": seconds}
        return bool(self._d._rows("token_insert", params))

    def find(self, digest: str) -> TokenRecord | None:
        rows = self._d._rows("token_find", {"digest": digest})
        return _record(rows[0]) if rows else None

    def all(self) -> list[TokenRecord]:
        return [_record(r) for r in self._d._rows("token_list")]

    def revoke(self, name: str) -> bool:
        return bool(self._d._rows("token_revoke", {"name": name}))

    def touch(self, digest: str) -> None:
        self._d._rows("token_touch", {"digest": digest})

    def session_insert(self, digest: str, token_digest: str, seconds: float) -> None:
        params = {"digest": digest, "token_digest": token_digest, "seconds": seconds}
        self._d._rows("session_insert", params)

    def session_find(self, digest: str) -> tuple[TokenRecord, str] | None:
        rows = self._d._rows("session_find", {"digest": digest})
        return (_record(rows[0]), rows[0]["digest"]) if rows else None

    def session_end(self, digest: str) -> bool:
        return bool(self._d._rows("session_end", {"digest": digest}))

    def link_insert(self, digest: str, name: str, seconds: float) -> bool:
        params = {"digest": digest, "name": name, "seconds": seconds}
        return bool(self._d._rows("login_link_insert", params))

    def link_redeem(self, digest: str) -> str | None:
        rows = self._d._rows("login_link_redeem", {"digest": digest})
        return str(rows[0]["token_digest"]) if rows else None

    def link_find(self, digest: str) -> LoginLinkRecord | None:
        rows = self._d._rows("login_link_find", {"digest": digest})
        if not rows:
            return None
        r = rows[0]
        return LoginLinkRecord(
            r["name"], r["role"], bool(r["used"]), bool(r["expired"]), bool(r["token_live"])
        )

    def prune(self) -> None:
        self._d._rows("session_prune")
        self._d._rows("login_link_prune")
