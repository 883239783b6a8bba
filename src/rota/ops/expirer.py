"""Expirer: waiting jobs whose `expires_at` passed are dead-lettered with reason
`expired` (the claim already skips them; this makes them visible as dead letters).
Where the worker hears of every commit (SQLite), a pass that expired nothing rests until
the next deadline passes (or a commit brings a new one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rota.maintenance.service import PeriodicService
from rota.ops.store import OpsStore


@dataclass(frozen=True)
class ExpireReport:
    expired: int


class Expirer(PeriodicService):
    name: ClassVar[str] = "expirer"
    looks_first = True  # its only writes are jobs falling due
    batch = 1000

    def run_once(self) -> ExpireReport:
        return ExpireReport(expired=OpsStore(self.driver).job_expire_due(self.batch))

    def idle(self, report: object) -> bool:
        return isinstance(report, ExpireReport) and not report.expired

    def due(self) -> float | None:
        return OpsStore(self.driver).job_next_expiry()
