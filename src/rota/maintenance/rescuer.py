"""Rescuer: jobs whose lease expired (their worker died or stalled) go back to the
queue, or to the dead letters when they have no attempts left."""

from __future__ import annotations

from typing import ClassVar

from rota.drivers.base import RescueReport
from rota.maintenance.service import PeriodicService


class Rescuer(PeriodicService):
    name: ClassVar[str] = "rescuer"
    batch = 1000

    def run_once(self) -> RescueReport:
        return self.driver.job_rescue_expired(self.batch)
