"""Advertiser: every worker records its queues and capabilities in rota_workers, renewed
every heartbeat interval and removed on a clean stop, so `app.routing.unroutable()` can
tell a job that waits for a busy worker from one that no live worker can run, and the
dashboard can list every live worker."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rota.drivers.base import Driver
from rota.maintenance.service import PeriodicService
from rota.routing.store import RoutingStore

log = logging.getLogger("rota.worker")


@dataclass(frozen=True, slots=True)
class AdvertiseReport:
    capabilities: int


class Advertiser(PeriodicService):
    name: ClassVar[str] = "advertiser"
    leader_only: ClassVar[bool] = False  # every worker speaks for itself
    immediate: ClassVar[bool] = True  # advertise before the first job is claimed

    def __init__(
        self,
        driver: Driver,
        *,
        worker_id: str,
        queues: Sequence[str],
        capabilities: Sequence[str],
        interval: float,
        ttl: float,
    ) -> None:
        super().__init__(driver, interval)
        self.worker_id = worker_id
        self.queues = tuple(queues)
        self.capabilities = tuple(sorted(capabilities))
        # Three missed renewals before the row counts as gone: one slow beat must not
        # make the worker's jobs look unroutable.
        self.ttl = max(ttl, 3 * interval)

    def run_once(self) -> AdvertiseReport:
        RoutingStore(self.driver).worker_advertise(
            self.worker_id, self.queues, self.capabilities, self.ttl
        )
        return AdvertiseReport(len(self.capabilities))

    def close(self) -> None:
        # A clean stop removes the row at once; otherwise it expires after `ttl`.
        RoutingStore(self.driver).worker_retire(self.worker_id)
