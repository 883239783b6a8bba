"""The CronJob decision for one schedule at one instant (SEMANTICS §1.4-§1.7) as a pure
function: the stored state and `now` in, what to do out. The cron service carries it out,
and the database, not this function, makes a tick run at most once."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from rota.schedules.spec import ConcurrencyPolicy, ScheduleSpec

# Kubernetes' limit on unmet start times before it warns (utils.go: "more than 80, but less
# than lots").
TOO_MANY_MISSED = 100


class EventKind(enum.StrEnum):
    """The Kubernetes event reasons a reconcile pass can produce."""

    TOO_MANY_MISSED = "TooManyMissedTimes"
    MISSED_SCHEDULE = "MissSchedule"
    JOB_ALREADY_ACTIVE = "JobAlreadyActive"

    @property
    def warning(self) -> bool:
        return self is not EventKind.JOB_ALREADY_ACTIVE


@dataclass(frozen=True)
class Event:
    kind: EventKind
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass(frozen=True)
class ActiveRun:
    """An unfinished run the schedule started on its own (manual runs are never active)."""

    job_id: int
    scheduled_at: datetime


@dataclass(frozen=True)
class ScheduleState:
    """What the database knows about one schedule (the CronJob's status)."""

    created_at: datetime
    last_schedule_time: datetime | None = None
    # [ours] The latest tick recorded as missed (deadline passed, or skipped by
    # strict_missed_limit); later passes count from it so that a miss is reported once.
    last_missed_time: datetime | None = None
    suspended: bool = False
    active: tuple[ActiveRun, ...] = ()


@dataclass(frozen=True)
class Decision:
    """What one pass should do for one schedule."""

    start: datetime | None = None  # create the run for this tick
    cancel: tuple[int, ...] = ()  # jobs to cancel first (Replace)
    events: tuple[Event, ...] = ()
    missed_at: datetime | None = None  # record this tick as missed
    due: int = 0  # unmet start times, counted the way Kubernetes approximates them
    next_at: datetime | None = None  # the tick after this pass's one, for display


def reconcile(spec: ScheduleSpec, state: ScheduleState, now: datetime) -> Decision:
    """Steps 4-9 of SEMANTICS §1.4 for `spec` at `now`."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    now = now.astimezone(UTC)
    if state.suspended:
        # Nothing is computed and lastScheduleTime does not move: the ticks missed while
        # suspended are found on the first pass after resume.
        return Decision()
    ticks = spec.ticks
    base = max(t for t in (state.created_at, state.last_schedule_time, state.last_missed_time) if t)
    events: list[Event] = []
    missed_at: datetime | None = None
    earliest = base
    if spec.starting_deadline is not None:
        window = now - timedelta(seconds=spec.starting_deadline)
        if window > base:
            # Kubernetes only clamps `earliest` to the window, so ticks that fell out of it
            # vanish silently; we record the latest of them as missed [ours].
            lost = ticks.latest_in(base, window)
            if lost is not None:
                missed_at = lost
                events.append(
                    Event(
                        EventKind.MISSED_SCHEDULE,
                        f"missed scheduled time {_utc(lost)}: not started within the "
                        f"{spec.starting_deadline:g}s starting deadline",
                    )
                )
            earliest = window
    first = ticks.next_after(earliest)
    if first is None or now < first:
        return Decision(events=tuple(events), missed_at=missed_at, next_at=first)
    second = ticks.next_after(first)
    if second is None or now < second:
        most_recent, due = first, 1
    else:
        # The controller's estimate, from the first interval only (utils.go).
        interval = max(1, round((second - first).total_seconds()))
        due = int((now - first).total_seconds()) // interval + 1
        found = ticks.latest_in(earliest, now)
        assert found is not None  # `first` itself qualifies
        most_recent = found
    next_at = ticks.next_after(most_recent)

    def decided(
        start: datetime | None = None,
        cancel: tuple[int, ...] = (),
        missed: datetime | None = missed_at,
    ) -> Decision:
        return Decision(start, cancel, tuple(events), missed, due, next_at)

    if due > TOO_MANY_MISSED:
        events.append(
            Event(
                EventKind.TOO_MANY_MISSED,
                f"too many missed start times ({due}). Set or decrease starting_deadline "
                "or check clock skew",
            )
        )
        if spec.strict_missed_limit:
            # The documented behaviour: start nothing. The tick is recorded as missed, so
            # the schedule runs again at its next tick instead of staying stuck.
            return decided(missed=most_recent)
    if (
        spec.starting_deadline is not None
        and most_recent + timedelta(seconds=spec.starting_deadline) < now
    ):
        events.append(
            Event(
                EventKind.MISSED_SCHEDULE,
                f"missed scheduled time {_utc(most_recent)}: not started within the "
                f"{spec.starting_deadline:g}s starting deadline",
            )
        )
        return decided(missed=most_recent)
    if most_recent == state.last_schedule_time or any(
        run.scheduled_at == most_recent for run in state.active
    ):
        return decided()
    if spec.concurrency is ConcurrencyPolicy.FORBID and state.active:
        ids = ", ".join(str(run.job_id) for run in state.active)
        events.append(
            Event(
                EventKind.JOB_ALREADY_ACTIVE,
                f"not starting the run for {_utc(most_recent)}: job {ids} is still active "
                "and concurrency is forbid",
            )
        )
        return decided()
    cancel: tuple[int, ...] = ()
    if spec.concurrency is ConcurrencyPolicy.REPLACE:
        cancel = tuple(run.job_id for run in state.active)
    return decided(start=most_recent, cancel=cancel)


def _utc(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
