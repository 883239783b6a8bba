"""Production-hardening storage on PostgreSQL: job progress, sealed arguments for key
rotation, and the catalog of rota's objects (roles, copy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rota.drivers.base import ProgressUpdate

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver


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
