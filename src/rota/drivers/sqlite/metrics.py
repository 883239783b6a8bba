"""Reads for the cluster-wide metrics on SQLite: live leaders and lease holders."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rota.drivers.base import LeaderReport, WorkerReport

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver


class SQLiteMetricsStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def leaders(self) -> list[LeaderReport]:
        return [
            LeaderReport(
                r["name"],
                r["leader"],
                datetime.fromtimestamp(r["elected_at"], UTC),
                datetime.fromtimestamp(r["expires_at"], UTC),
            )
            for r in self._d._read("metrics_leaders")
        ]

    def workers(self) -> list[WorkerReport]:
        return [
            WorkerReport(r["worker"], int(r["running"])) for r in self._d._read("metrics_workers")
        ]
