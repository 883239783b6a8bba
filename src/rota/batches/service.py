"""Batch controller: each pass advances every unfinished batch (observe finished jobs,
count failures by the rules, start jobs up to parallelism, cancel on failure, deadline or
suspend, set the condition, fire the finish callback) and prunes batches past their TTL.
Leader-only; two overlapping leaders are safe because every write is version-fenced."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rota.batches.controller import advance
from rota.batches.store import BatchStore
from rota.drivers.base import Driver
from rota.maintenance.service import PeriodicService

log = logging.getLogger("rota.batches")


# slots: no __dict__, so the base does not log every busy pass (finished batches are logged).
@dataclass(frozen=True, slots=True)
class BatchReport:
    advanced: int = 0  # batches whose status or jobs changed
    started: int = 0  # jobs started
    cancelled: int = 0  # jobs asked to stop
    finished: int = 0  # batches that reached Complete or Failed
    pruned: int = 0  # finished batches deleted after their TTL (with their jobs)
    errors: int = 0  # batches this pass could not advance (logged; retried next pass)
    open: int = 0  # unfinished batches this pass looked at


class BatchController(PeriodicService):
    name: ClassVar[str] = "batches"
    prune_batch = 100

    def __init__(
        self, driver: Driver, interval: float, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        super().__init__(driver, interval)
        self.clock = clock  # tests may inject one; by default the database's clock

    def idle(self, report: object) -> bool:
        # No batch is open: a new one comes with a commit. (An open one may pass its
        # deadline with no commit at all, and a full prune may leave more to prune.)
        return isinstance(report, BatchReport) and not (report.open or report.pruned)

    def next_delay(self, report: object) -> float:
        # Jobs just started or observed: their successors are likely due soon, so come
        # back sooner than the interval (a batch of short jobs is not paced by it).
        if isinstance(report, BatchReport) and report.advanced:
            return max(0.01, self.interval / 10)
        return self.interval

    def run_once(self) -> BatchReport:
        store = BatchStore(self.driver)
        totals = {"advanced": 0, "started": 0, "cancelled": 0, "finished": 0, "errors": 0}
        ids = store.open_ids()
        if ids:
            now = self.clock() if self.clock is not None else self.driver.db_now()
            for batch_id in ids:
                record = store.get(batch_id)
                if record is None or record.condition is not None:
                    continue  # pruned or finished meanwhile
                try:
                    decision = advance(store, record, store.items(batch_id), now)
                except Exception as exc:  # one batch must not stop every batch after it
                    totals["errors"] += 1
                    log.warning(
                        "batch %s: advancing failed (%s: %s)", batch_id, type(exc).__name__, exc
                    )
                    continue
                if decision is None:
                    continue
                totals["advanced"] += 1
                totals["started"] += len(decision.start)
                totals["cancelled"] += len(decision.cancel)
                if decision.finished and decision.state.final is not None:
                    totals["finished"] += 1
                    final = decision.state.final
                    log.info(
                        "batch %s (%s): %s/%s %s",
                        record.id,
                        record.name or record.task,
                        final.type,
                        final.reason,
                        final.message,
                    )
        pruned = store.prune_expired(self.prune_batch)
        return BatchReport(**totals, pruned=pruned, open=len(ids))
