"""API token storage on PostgreSQL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rota.drivers.base import TokenRecord

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver


def _record(row: dict[str, Any]) -> TokenRecord:
    return TokenRecord(
        name=row["name"],
        role=row["role"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
    )


class PostgresTokenStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def insert(self, name: str, digest: str, role: str) -> bool:
        return bool(self._d._rows("token_insert", {"name": name, "digest": digest, "role": role}))

    def find(self, digest: str) -> TokenRecord | None:
        rows = self._d._rows("token_find", {"digest": digest})
        return _record(rows[0]) if rows else None

    def all(self) -> list[TokenRecord]:
        return [_record(r) for r in self._d._rows("token_list")]

    def revoke(self, name: str) -> bool:
        return bool(self._d._rows("token_revoke", {"name": name}))
