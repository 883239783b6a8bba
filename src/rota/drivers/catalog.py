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


# --- least-privilege roles (planned by rota.security.roles, rendered by the driver) -----

# The comment `rota db roles` puts on the roles it creates: a role of a planned name
# without it belongs to someone else, and is not adopted unless asked (--adopt).
ROLE_MARKER = "rota: least-privilege role managed by `rota db roles`"


@dataclass(frozen=True)
class Grant:
    """One privilege on one table, on all its columns (`columns` None) or on some."""

    table: str
    privilege: str
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RolePlan:
    """The role of one capability (its name: rota.security.roles.Capability) and
    everything it is granted."""

    capability: str
    role: str
    grants: tuple[Grant, ...]
    sequences: bool  # USAGE on rota's sequences (new ids)
    functions: bool  # EXECUTE on rota's functions (the KEDA signals)
