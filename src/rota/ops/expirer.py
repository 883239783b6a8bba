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
    # Seconds until the next start deadline passes, when asked (a resting expirer that
    # expired nothing); None: not asked, or no waiting job has one.
    due_in: float | None = None


class Expirer(PeriodicService):
    name: ClassVar[str] = "expirer"
    batch = 1000

    def run_once(self) -> ExpireReport:
        store = OpsStore(self.driver)
        expired = store.job_expire_due(self.batch)
        if expired or not self.rests:
            return ExpireReport(expired=expired)
        return ExpireReport(expired=0, due_in=store.job_next_expiry())

    def rest_for(self, report: object) -> float | None:
        if not isinstance(report, ExpireReport) or report.expired:
            return None
        return self.rest_until(report.due_in)
