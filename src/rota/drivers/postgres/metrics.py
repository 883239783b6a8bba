"""Reads for the cluster-wide metrics on PostgreSQL: live leaders and lease holders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rota.drivers.base import LeaderReport, WorkerReport

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver


class PostgresMetricsStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def leaders(self) -> list[LeaderReport]:
        return [
            LeaderReport(r["name"], r["leader"], r["elected_at"], r["expires_at"])
            for r in self._d._rows("metrics_leaders")
        ]

    def workers(self) -> list[WorkerReport]:
        return [
            WorkerReport(r["worker"], int(r["running"])) for r in self._d._rows("metrics_workers")
        ]
