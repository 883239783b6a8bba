"""Reads for the cluster-wide metrics, written once over the dialect seam (SQL:
drivers/<dialect>/queries/metrics.sql): live leaders and lease holders."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rota.drivers.base import Driver


@dataclass(frozen=True)
class LeaderReport:
    """A live leader row: which worker holds a leader-only role (rota.observe metrics)."""

    name: str
    leader: str
    elected_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class WorkerReport:
    """A worker holding live job leases, and how many jobs it runs."""

    worker: str
    running: int


class MetricsStore:
    """Cheap reads for the cluster-wide Prometheus metrics (rota.observe.cluster)."""

    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def leaders(self) -> list[LeaderReport]:
        c = self._db.codec
        return [
            LeaderReport(
                r["name"], r["leader"], c.instant(r["elected_at"]), c.instant(r["expires_at"])
            )
            for r in self._db.query("metrics_leaders")
        ]

    def workers(self) -> list[WorkerReport]:
        return [
            WorkerReport(r["worker"], int(r["running"])) for r in self._db.query("metrics_workers")
        ]
