"""Cron: each pass reconciles every stored schedule at the database's `now` (Kubernetes
CronJob semantics, schedules/reconcile.py), creates due runs through the unique tick key,
and applies the history limits. Leader-only, but safe if two leaders overlap."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rota.drivers.base import Driver
from rota.errors import InvalidTransitionError, JobNotFoundError, ScheduleError
from rota.maintenance.service import PeriodicService
from rota.schedules.reconcile import ActiveRun, Decision, ScheduleState, reconcile
from rota.schedules.schedule import spec_of
from rota.schedules.spec import ScheduleSpec
from rota.schedules.store import (
    ClaimStatus,
    ScheduleRecord,
    ScheduleRunFilter,
    ScheduleStore,
    TickClaim,
    tick_minute,
)

log = logging.getLogger("rota.cron")

# Enough for every active run of every schedule in one read.
MAX_ACTIVE_RUNS = 100_000


@dataclass(frozen=True)
class CronReport:
    enqueued: int = 0  # runs created (one job each)
    refused: int = 0  # claims the database turned down: taken by another scheduler, or stale
    missed: int = 0  # ticks recorded as missed (starting deadline, strict_missed_limit)
    replaced: int = 0  # active runs cancelled by concurrency "replace"
    pruned: int = 0  # finished runs deleted by the history limits
    events: int = 0  # new events (warnings and notices) recorded on schedules
    # Whether any schedule is stored: with none, only a commit (one created or declared)
    # brings work, so where the worker hears of every commit the service rests.
    watching: bool = True


def run_name(schedule: str, at: datetime) -> str:
    """A scheduled run's name, like a CronJob's Job: `<schedule>-<unix minute>`."""
    return f"{schedule}-{tick_minute(at)}"


class CronService(PeriodicService):
    name: ClassVar[str] = "cron"
    prune_batch = 1000

    def __init__(
        self,
        driver: Driver,
        interval: float,
        *,
        scheduler: str = "cron",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(driver, interval)
        self.scheduler = scheduler  # recorded on each run it creates
        # `now` comes from the database (workers' clocks drift); tests may inject a clock.
        self.clock = clock
        self._specs: dict[tuple[str, ...], ScheduleSpec | ScheduleError] = {}

    def run_once(self) -> CronReport:
        records = ScheduleStore(self.driver).all()
        if not records:
            return CronReport(watching=False)
        now = self.clock() if self.clock is not None else self.driver.db_now()
        active: dict[int, list[ActiveRun]] = defaultdict(list)
        for run in ScheduleStore(self.driver).run_list(
            ScheduleRunFilter(active_only=True, limit=MAX_ACTIVE_RUNS)
        ):
            if run.job_id is not None:
                active[run.schedule_id].append(ActiveRun(run.job_id, run.scheduled_at))
        totals: dict[str, int] = defaultdict(int)
        for record in records:
            self._pass(record, tuple(active[record.id]), now, totals)
        pruned = ScheduleStore(self.driver).history_prune(self.prune_batch)
        return CronReport(
            enqueued=totals["enqueued"],
            refused=totals["refused"],
            missed=totals["missed"],
            replaced=totals["replaced"],
            pruned=pruned,
            events=totals["events"],
        )

    def idle(self, report: object) -> bool:
        return isinstance(report, CronReport) and not report.watching

    def _spec(self, record: ScheduleRecord) -> ScheduleSpec | ScheduleError:
        key = (
            record.name,
            record.expression,
            record.timezone,
            record.dst,
            record.concurrency,
            repr(record.starting_deadline),
            str(record.successful_history_limit),
            str(record.failed_history_limit),
            str(record.strict_missed_limit),
        )
        if key not in self._specs:
            if len(self._specs) > 4096:  # definitions changed many times: start over
                self._specs.clear()
            try:
                self._specs[key] = spec_of(record)
            except ScheduleError as exc:
                self._specs[key] = exc
        return self._specs[key]

    def _pass(
        self,
        record: ScheduleRecord,
        active: tuple[ActiveRun, ...],
        now: datetime,
        totals: dict[str, int],
    ) -> None:
        spec = self._spec(record)
        if isinstance(spec, ScheduleError):
            # Kubernetes stops a CronJob whose zone became unknown (UnknownTimeZone); so do
            # we, and say why.
            self._note(record, [(f"InvalidSchedule: {spec}", True)], None, totals)
            return
        state = ScheduleState(
            created_at=record.created_at,
            last_schedule_time=record.last_schedule_time,
            last_missed_time=record.last_missed_time,
            suspended=record.suspended,
            active=active,
        )
        decision = reconcile(spec, state, now)
        if decision.events:
            notes = [(str(event), event.kind.warning) for event in decision.events]
            self._note(record, notes, decision.missed_at, totals)
        if decision.start is not None:
            self._start(record, spec, decision, totals)

    def _start(
        self,
        record: ScheduleRecord,
        spec: ScheduleSpec,
        decision: Decision,
        totals: dict[str, int],
    ) -> None:
        assert decision.start is not None
        for job_id in decision.cancel:
            # Replace: the existing cancel path stops a waiting job at once and asks a
            # running one to stop. If a cancel fails, the exception ends this pass before
            # anything is created, as Kubernetes does when a delete fails.
            try:
                self.driver.job_cancel(job_id)
            except (InvalidTransitionError, JobNotFoundError):
                continue  # it finished meanwhile: nothing left to replace
            totals["replaced"] += 1
        claim = TickClaim(
            schedule_id=record.id,
            at=decision.start,
            local=spec.local(decision.start),
            name=run_name(record.name, decision.start),
            scheduler=self.scheduler,
            job=record.job_row(),
        )
        result = ScheduleStore(self.driver).tick_claim(claim)
        if result.status is ClaimStatus.CLAIMED:
            totals["enqueued"] += 1
            log.info(
                "schedule %s: started run %s (job %s) for %s",
                record.name,
                claim.name,
                result.job.id if result.job else "?",
                claim.local,
            )
        else:
            totals["refused"] += 1
            log.debug("schedule %s: run for %s not started: %s", record.name, claim.local, result)

    def _note(
        self,
        record: ScheduleRecord,
        notes: list[tuple[str, bool]],
        missed_at: datetime | None,
        totals: dict[str, int],
    ) -> None:
        # A condition such as a Forbid wait lasts many passes: store and log an event when
        # its text changes, not every second (Kubernetes aggregates repeated events too).
        text = "; ".join(note for note, _ in notes)
        if text == record.last_event and missed_at is None:
            return
        ScheduleStore(self.driver).event_record(record.id, text, missed_at)
        if missed_at is not None:
            totals["missed"] += 1
        if text != record.last_event:
            totals["events"] += 1
            for note, warning in notes:
                level = logging.WARNING if warning else logging.INFO
                log.log(level, "schedule %s: %s", record.name, note)
