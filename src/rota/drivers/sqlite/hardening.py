"""Production-hardening storage on SQLite: job progress, sealed arguments for key
rotation, and the catalog of rota's tables (copy)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rota.drivers import queries
from rota.drivers.base import ProgressUpdate

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


class SQLiteProgressStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def record_many(self, updates: Sequence[ProgressUpdate]) -> set[int]:
        if not updates:
            return set()
        batch = json.dumps([[u.job_id, u.lease_token, u.fraction, u.message] for u in updates])
        with self._d._write() as db:
            return {r[0] for r in db.execute(_Q["job_progress_record_many"], {"batch": batch})}
