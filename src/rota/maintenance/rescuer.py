"""Rescuers: jobs whose lease expired (their worker died or stalled), and at once the
jobs of workers whose presence is gone (their process died), go back to the queue, or
to the dead letters when they have no attempts left."""

from __future__ import annotations

from typing import ClassVar

from rota.drivers.base import Driver, RescueReport
from rota.maintenance.service import PeriodicService


class Rescuer(PeriodicService):
    name: ClassVar[str] = "rescuer"
    batch = 1000

    def run_once(self) -> RescueReport:
        return self.driver.job_rescue_expired(self.batch)


class PresenceRescuer(PeriodicService):
    """Every worker, leader or not, sweeps for dead peers at a short interval: a killed
    leader must not delay its own rescue by a leader election (leader_ttl). The sweep is
    one read of the lock table (PostgreSQL) or a few flock tries (SQLite); it writes only
    when a worker is gone, and rescues are fenced, so sweeping together is safe."""

    name: ClassVar[str] = "presence"
    leader_only: ClassVar[bool] = False
    batch = 1000

    def __init__(self, driver: Driver, interval: float, grace: float | None = None) -> None:
        super().__init__(driver, interval)
        self.grace = grace  # None: the dialect's (rota.drivers.presence)

    def run_once(self) -> RescueReport:
        return self.driver.presence.sweep(self.grace, self.batch)
