"""CountFolder: the leader folds the changes that rota_jobs' statement triggers append
(PostgreSQL, migration 0019) into the counts per queue and state, the flow per minute
and the workers seen, which the dashboard and /metrics read instead of rota_jobs (#23);
on both dialects it drops the throughput and the workers older than any chart shows.
(SQLite's triggers keep counters in place: its pass turns their growth into throughput
per minute and records the workers running jobs.)"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from rota.drivers.base import Driver
from rota.maintenance.service import PeriodicService


@dataclass(frozen=True, slots=True)  # slots: no __dict__, so a pass is not logged
class FoldReport:
    folded: int
    pruned: int


class CountFolder(PeriodicService):
    """Reads add the changes not folded yet, so they are exact whenever this runs; it
    keeps that unfolded tail short (a few hundred rows at thousands of jobs/s) and drops
    throughput and workers older than any chart shows, once every `prune_every` s."""

    name: ClassVar[str] = "counts"
    prune_every = 300.0

    def __init__(self, driver: Driver, interval: float = 2.0) -> None:
        super().__init__(driver, interval)
        self._pruned_at = float("-inf")

    def idle(self, report: object) -> bool:
        # Nothing to fold: changes to fold come with commits (the triggers write them).
        return isinstance(report, FoldReport) and not report.folded

    def run_once(self) -> FoldReport:
        db = self.driver.database
        folded = sum(int(r["folded"]) for r in db.execute("metrics_counts_fold"))
        pruned = 0
        if time.monotonic() - self._pruned_at >= self.prune_every:
            pruned = sum(int(r["pruned"]) for r in db.execute("metrics_counts_prune"))
            self._pruned_at = time.monotonic()
        return FoldReport(folded, pruned)
