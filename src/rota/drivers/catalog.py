"""What rota objects exist in the database, for `rota db roles` and `rota db copy`;
written once over the dialect seam (SQL: queries/hardening.sql; SQLite has no sequences
or functions, so its queries return none)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rota.drivers.database import Database


@dataclass(frozen=True)
class TableInfo:
    name: str
    columns: tuple[str, ...]


class CatalogStore:
    def __init__(self, database: Database[Any]) -> None:
        self._db = database

    def schema(self) -> str:
        return str(self._db.query("catalog_schema")[0]["name"])

    def tables(self) -> list[TableInfo]:
        c = self._db.codec
        return [
            TableInfo(r["name"], tuple(c.json(r["columns"])))
            for r in self._db.query("catalog_tables")
        ]

    def sequences(self) -> list[str]:
        return [r["name"] for r in self._db.query("catalog_sequences")]

    def functions(self) -> list[tuple[str, str]]:
        return [(r["name"], r["args"]) for r in self._db.query("catalog_functions")]

    def roles(self, names: Sequence[str]) -> dict[str, str | None]:
        """Which of `names` exist as database roles, with their comments (none on SQLite)."""
        rows = self._db.query("catalog_roles", {"names": self._db.codec.array(list(names))})
        return {r["name"]: r["comment"] for r in rows}
