"""Production-hardening storage on PostgreSQL: job progress, sealed arguments for key
rotation, and the catalog of rota's objects (roles, copy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rota.drivers.base import ProgressUpdate, SealedRow, TableInfo
from rota.errors import ArgumentsError

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver

_KINDS = ("job", "schedule")


def _kind(kind: str) -> str:
    if kind not in _KINDS:
        raise ArgumentsError(f"kind must be one of {_KINDS}, not {kind!r}")
    return kind


class PostgresProgressStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def record_many(self, updates: Sequence[ProgressUpdate]) -> set[int]:
        if not updates:
            return set()
        params = {
            "ids": [u.job_id for u in updates],
            "tokens": [u.lease_token for u in updates],
            "fractions": [u.fraction for u in updates],
            "messages": [u.message for u in updates],
        }
        return {r["id"] for r in self._d._rows("job_progress_record_many", params)}


class PostgresSealedArgsStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def scan(self, kind: str, after: int, limit: int) -> list[SealedRow]:
        rows = self._d._rows(f"sealed_{_kind(kind)}_scan", {"after": after, "limit": limit})
        return [SealedRow(r["id"], r["args"]) for r in rows]

    def swap(self, kind: str, row_id: int, old_json: str, new_json: str) -> bool:
        params = {"id": row_id, "old": old_json, "new": new_json}
        return bool(self._d._rows(f"sealed_{_kind(kind)}_swap", params))


class PostgresCatalogStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def schema(self) -> str:
        return str(self._d._rows("catalog_schema")[0]["name"])

    def tables(self) -> list[TableInfo]:
        return [TableInfo(r["name"], tuple(r["columns"])) for r in self._d._rows("catalog_tables")]

    def sequences(self) -> list[str]:
        return [r["name"] for r in self._d._rows("catalog_sequences")]

    def functions(self) -> list[tuple[str, str]]:
        return [(r["name"], r["args"]) for r in self._d._rows("catalog_functions")]

    def roles(self, names: Sequence[str]) -> dict[str, str | None]:
        rows = self._d._rows("catalog_roles", {"names": list(names)})
        return {r["name"]: r["comment"] for r in rows}
