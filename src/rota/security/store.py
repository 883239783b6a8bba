"""Sealed arguments at rest, paged by id, for `rota db rotate-key`; written once over the
dialect seam (SQL: drivers/<dialect>/queries/hardening.sql)."""

from __future__ import annotations

from dataclasses import dataclass

from rota.drivers.base import Driver
from rota.errors import ArgumentsError

KINDS = ("job", "schedule")


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ArgumentsError(f"kind must be one of {KINDS}, not {kind!r}")
    return kind


@dataclass(frozen=True)
class SealedRow:
    """A stored JSON object of sealed arguments: a job's or a schedule's template."""

    id: int
    args_json: str


class SealedArgsStore:
    """A job's or a schedule's stored JSON object of sealed arguments. `kind` is "job" or
    "schedule"; swap() writes only if the stored value is still `old_json`."""

    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def scan(self, kind: str, after: int, limit: int) -> list[SealedRow]:
        rows = self._db.query(f"sealed_{_kind(kind)}_scan", {"after": after, "limit": limit})
        return [SealedRow(r["id"], r["args"]) for r in rows]

    def swap(self, kind: str, row_id: int, old_json: str, new_json: str) -> bool:
        params = {"id": row_id, "old": old_json, "new": new_json}
        return bool(self._db.execute(f"sealed_{_kind(kind)}_swap", params))
