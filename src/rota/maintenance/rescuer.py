"""Rescuers: jobs whose lease expired (their worker died or stalled), and at once the
jobs of workers whose presence is gone (their process died), go back to the queue, or
to the dead letters when they have no attempts left."""

from __future__ import annotations

import random
from typing import ClassVar

from rota.drivers.base import Driver, RescueReport
from rota.maintenance.service import PeriodicService


class Rescuer(PeriodicService):
    name: ClassVar[str] = "rescuer"
    batch = 1000

    def run_once(self) -> RescueReport:
        return self.driver.job_rescue_expired(self.batch)


# Sweeps the whole fleet makes per second, all workers together (see PresenceRescuer).
FLEET_SWEEPS = 4.0


class PresenceRescuer(PeriodicService):
    """Every worker, leader or not, sweeps for dead peers: a killed leader must not delay
    its own rescue by a leader election (leader_ttl). A sweep is one read of the lock
    table (PostgreSQL) or a few flock tries (SQLite); it writes only when a worker is
    gone, and rescues are fenced, so sweeping together is safe. Each worker sweeps every
    `interval` seconds while the fleet is small, and less often as it grows, so that the
    fleet makes about FLEET_SWEEPS a second in all (a sweep costs O(workers): ~0.5 ms at
    100, bench/presence_sweep.py); jittered, so a gone worker is first seen within a
    fraction of a second whichever worker sees it, and the mark it leaves in the
    database lets any other complete the rescue after the grace."""

    name: ClassVar[str] = "presence"
    leader_only: ClassVar[bool] = False
    batch = 1000

    def __init__(self, driver: Driver, interval: float, grace: float | None = None) -> None:
        super().__init__(driver, interval)
        self.grace = grace  # None: the dialect's (rota.drivers.presence)

    def run_once(self) -> RescueReport:
        return self.driver.presence.sweep(self.grace, self.batch)

    def next_delay(self, report: object) -> float:
        pace = max(self.interval, self.driver.presence.present / FLEET_SWEEPS)
        return random.uniform(0.5, 1.5) * pace
