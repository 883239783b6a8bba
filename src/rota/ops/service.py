"""Hold service (leader): closes and opens queues by their processing windows, and runs
their circuit breakers (closed -> open -> half-open -> closed). It pauses a queue only
through a hold of its own source, so it never lifts an operator's pause."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from rota.drivers.base import Driver, QueueHold
from rota.maintenance.service import PeriodicService
from rota.ops.breakers import FAILED_OUTCOMES, BreakerConfig, should_open, trial_verdict
from rota.ops.hold_model import BreakerRecord
from rota.ops.hold_store import HoldStore
from rota.ops.model import QueueChange
from rota.ops.store import OpsStore
from rota.ops.windows import WindowSchedule, schedule_from_json

log = logging.getLogger("rota.holds")


@dataclass
class HoldReport:
    windows_closed: int = 0
    windows_opened: int = 0
    breakers_opened: int = 0
    breakers_half_open: int = 0
    breakers_closed: int = 0
    # Some queue has windows, a breaker or a hold of this service: time alone may give
    # the next pass work (a window opens, a cool-down ends).
    watching: bool = False


def apply_window(
    driver: Driver,
    queue: str,
    schedule: WindowSchedule | None,
    now: datetime,
    holds: list[QueueHold] | None = None,
) -> int:
    """Hold or release `queue` as its windows say at `now` (None: no windows, release);
    `holds`: the current holds when the caller has read them already.
    Returns -1 when this closed the queue's window, 1 when it opened it, 0 otherwise."""
    current = driver.queue_hold_list(queue) if holds is None else holds
    hold = next((h for h in current if h.queue == queue and h.source == "window"), None)
    held = hold is not None
    if schedule is not None and not schedule.is_open(now):
        reason = f"outside its processing windows ({schedule.describe()})"
        until = schedule.next_change(now)
        if hold is not None:
            if (hold.reason, hold.until) != (reason, until):  # the windows were changed
                driver.queue_hold_put(queue, "window", reason, until)
            return 0
        driver.queue_hold_put(queue, "window", reason, until)
        log.info(
            "queue %s closed: %s", queue, reason, extra={"queue": queue, "event": "window_closed"}
        )
        return -1
    if not held:
        return 0
    driver.queue_hold_drop(queue, "window")
    log.info(
        "queue %s opened by its processing windows",
        queue,
        extra={"queue": queue, "event": "window_opened"},
    )
    return 1


def restore_rate(driver: Driver, record: BreakerRecord) -> BreakerRecord:
    """Give the queue its own rate limit back after a trial borrowed it, unless an
    operator set another meanwhile (theirs wins)."""
    if not record.saved_rate:
        return record
    found = OpsStore(driver).queue_controls(record.queue)
    if found and (found[0].rate_limit, found[0].rate_period) == (1, _trial_period(record)):
        rate = (
            None
            if record.saved_rate_limit is None or record.saved_rate_period is None
            else (record.saved_rate_limit, record.saved_rate_period)
        )
        OpsStore(driver).queue_configure(QueueChange(name=record.queue, rate=rate, set_rate=True))
    return replace(record, saved_rate=False, saved_rate_limit=None, saved_rate_period=None)


def _trial_period(record: BreakerRecord) -> float:
    # The trial's rate window: one start per cool-down. The queue was held for at least
    # the cool-down, so the window counts no start from before the breaker opened.
    return float(record.cooldown)


def close_breaker(driver: Driver, record: BreakerRecord, now: datetime, why: str) -> BreakerRecord:
    record = restore_rate(driver, record)
    closed = replace(
        record,
        state="closed",
        changed_at=now,
        attempts=0,
        failures=0,
        trial_job_id=None,
        trial_attempt=None,
    )
    HoldStore(driver).breaker_save(closed)
    driver.queue_hold_drop(record.queue, "breaker")
    log.info(
        "circuit breaker of queue %s closed: %s",
        record.queue,
        why,
        extra={"queue": record.queue, "event": "breaker_closed"},
    )
    return closed


class QueueHoldService(PeriodicService):
    """One pass: every queue's windows at `clock()` (tests move it by hand), then every
    breaker at the database's time (attempts and cool-downs are database times)."""

    name: ClassVar[str] = "holds"

    def __init__(
        self, driver: Driver, interval: float, clock: Callable[[], datetime] | None = None
    ) -> None:
        super().__init__(driver, interval)
        self.clock = clock or (lambda: datetime.now(UTC))

    def idle(self, report: object) -> bool:
        # No windows, breakers or holds of its own: they come with a commit.
        return isinstance(report, HoldReport) and not report.watching

    def run_once(self) -> HoldReport:
        report = HoldReport()
        current = self.driver.queue_hold_list()  # one read of every hold per pass
        report.watching = any(h.source in ("window", "breaker") for h in current)
        self.windows_pass(report, current)
        self.breakers_pass(report, current)
        return report

    def windows_pass(self, report: HoldReport, current: list[QueueHold]) -> None:
        now = self.clock()
        holds = HoldStore(self.driver)
        configured: set[str] = set()
        for record in holds.window_list():
            report.watching = True
            configured.add(record.queue)
            try:
                schedule = schedule_from_json(record.windows_json, record.tz)
            except Exception as exc:  # e.g. a zone this host's tz database lacks
                log.warning("queue %s: unusable processing windows: %s", record.queue, exc)
                continue
            moved = apply_window(self.driver, record.queue, schedule, now, current)
            report.windows_closed += moved < 0
            report.windows_opened += moved > 0
        for hold in current:
            if hold.source == "window" and hold.queue not in configured:
                self.driver.queue_hold_drop(hold.queue, "window")  # its windows were cleared
                report.windows_opened += 1

    def breakers_pass(self, report: HoldReport, current: list[QueueHold]) -> None:
        holds = HoldStore(self.driver)
        records = holds.breaker_list()
        if records:
            report.watching = True
            now = self.driver.db_now()  # breaker times are database times
            for record in records:
                self._step(record, now, report)
        known = {r.queue for r in records}
        for hold in current:
            if hold.source == "breaker" and hold.queue not in known:
                self.driver.queue_hold_drop(hold.queue, "breaker")  # its breaker was removed

    def _step(self, r: BreakerRecord, now: datetime, report: HoldReport) -> None:
        holds = HoldStore(self.driver)
        changed_at = r.changed_at or now
        if r.state == "closed":
            since = max(now - timedelta(seconds=r.window), changed_at)
            attempts, failures = holds.breaker_attempts(r.queue, since, FAILED_OUTCOMES)
            config = BreakerConfig(r.threshold, r.min_attempts, r.window, r.cooldown)
            if should_open(config, attempts, failures):
                self._open(replace(r, attempts=attempts, failures=failures), now, "tripped")
                report.breakers_opened += 1
            elif (attempts, failures) != (r.attempts, r.failures):
                holds.breaker_save(replace(r, attempts=attempts, failures=failures))
        elif r.state == "open":
            if now >= changed_at + timedelta(seconds=r.cooldown):
                self._half_open(r, now)
                report.breakers_half_open += 1
        else:
            self._trial(r, now, report)

    def _open(self, r: BreakerRecord, now: datetime, why: str) -> None:
        opened = replace(
            restore_rate(self.driver, r),
            state="open",
            changed_at=now,
            trips=r.trips + 1,
            trial_job_id=None,
            trial_attempt=None,
        )
        HoldStore(self.driver).breaker_save(opened)
        reason = (
            f"circuit breaker open ({why}: {r.failures} of {r.attempts} attempts failed)"
            if why == "tripped"
            else f"circuit breaker open ({why})"
        )
        until = now + timedelta(seconds=r.cooldown)
        self.driver.queue_hold_put(r.queue, "breaker", reason, until)
        log.warning(
            "circuit breaker of queue %s opened: %s; trial in %gs",
            r.queue,
            reason,
            r.cooldown,
            extra={"queue": r.queue, "event": "breaker_opened"},
        )

    def _half_open(self, r: BreakerRecord, now: datetime) -> None:
        """Let exactly one job start: borrow the queue's rate limit (one start per
        cool-down, counted by the claim over all workers), then lift the hold."""
        found = OpsStore(self.driver).queue_controls(r.queue)
        control = found[0] if found else None
        trial = replace(
            r,
            state="half_open",
            changed_at=now,
            trial_job_id=None,
            trial_attempt=None,
            saved_rate=True,
            saved_rate_limit=None if control is None else control.rate_limit,
            saved_rate_period=None if control is None else control.rate_period,
        )
        if r.saved_rate:  # still borrowed from a trial that said nothing: keep the original
            trial = replace(
                trial, saved_rate_limit=r.saved_rate_limit, saved_rate_period=r.saved_rate_period
            )
        HoldStore(self.driver).breaker_save(trial)
        change = QueueChange(name=r.queue, rate=(1, _trial_period(r)), set_rate=True)
        OpsStore(self.driver).queue_configure(change)
        self.driver.queue_hold_drop(r.queue, "breaker")
        log.info(
            "circuit breaker of queue %s half-open: letting one trial job through",
            r.queue,
            extra={"queue": r.queue, "event": "breaker_half_open"},
        )

    def _trial(self, r: BreakerRecord, now: datetime, report: HoldReport) -> None:
        holds = HoldStore(self.driver)
        if r.trial_job_id is None:
            started = holds.breaker_trial(r.queue, r.changed_at or now)
            if started is None:
                return  # no job has started yet (an empty queue, or another hold)
            # Hold again at once: the trial runs alone, however long it takes.
            self.driver.queue_hold_put(
                r.queue, "breaker", f"half-open: trial job {started[0]} running", None
            )
            r = replace(
                restore_rate(self.driver, r), trial_job_id=started[0], trial_attempt=started[1]
            )
            holds.breaker_save(r)
        job = self.driver.job_get(r.trial_job_id) if r.trial_job_id is not None else None
        outcome: str | None = "cancelled"  # a trial job that vanished says nothing
        if job is not None:
            entries = [a for a in job.history if a.attempt == r.trial_attempt]
            outcome = str(entries[-1].outcome) if entries else None
        verdict = trial_verdict(outcome)
        if verdict == "close":
            close_breaker(self.driver, r, now, f"trial job {r.trial_job_id} completed")
            report.breakers_closed += 1
        elif verdict == "reopen":
            self._open(r, now, f"trial job {r.trial_job_id} failed")
            report.breakers_opened += 1
        elif verdict == "retry":
            self._half_open(replace(r, trial_job_id=None, trial_attempt=None), now)
            report.breakers_half_open += 1
