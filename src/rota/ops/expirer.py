"""Expirer: waiting jobs whose `expires_at` passed are dead-lettered with reason
`expired` (the claim already skips them; this makes them visible as dead letters)."""

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
    batch = 1000

    def run_once(self) -> ExpireReport:
        return ExpireReport(expired=OpsStore(self.driver).job_expire_due(self.batch))
