"""Schedule storage, written once over the dialect seam (SQL: drivers/<dialect>/queries/
schedule.sql): definitions and status, the runs of each tick (one per tick, by a unique
key, so racing schedulers create it once), manual runs and history limits."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rota.drivers.base import Driver, JobInsert
from rota.drivers.database import Row, Session
from rota.errors import ScheduleError, ScheduleNotFoundError
from rota.job import Job, JobState


@dataclass(frozen=True)
class ScheduleUpsert:
    """A schedule's definition as code declares it: its CronJob spec and its job template.
    Upserting it never touches the status (suspension, last times) kept in the database."""

    name: str
    task: str
    queue: str
    priority: int
    max_attempts: int
    args_json: str
    expression: str
    timezone: str
    dst: str
    concurrency: str
    starting_deadline: float | None
    successful_history_limit: int
    failed_history_limit: int
    strict_missed_limit: bool

    def params(self) -> dict[str, Any]:
        """Named parameters of the schedule_upsert query (the same in both dialects)."""
        return {
            "name": self.name,
            "task": self.task,
            "queue": self.queue,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "args": self.args_json,
            "expression": self.expression,
            "timezone": self.timezone,
            "dst": self.dst,
            "concurrency": self.concurrency,
            "starting_deadline": self.starting_deadline,
            "successful_history_limit": self.successful_history_limit,
            "failed_history_limit": self.failed_history_limit,
            "strict_missed_limit": self.strict_missed_limit,
        }


@dataclass(frozen=True)
class ScheduleRecord:
    """A stored schedule: definition, status, and how many of its runs are active."""

    id: int
    name: str
    task: str
    queue: str
    priority: int
    max_attempts: int
    args_json: str
    expression: str
    timezone: str
    dst: str
    concurrency: str
    starting_deadline: float | None
    successful_history_limit: int
    failed_history_limit: int
    strict_missed_limit: bool
    suspended: bool
    created_at: datetime
    updated_at: datetime
    last_schedule_time: datetime | None = None
    last_successful_time: datetime | None = None
    last_missed_time: datetime | None = None
    last_event: str | None = None
    last_event_at: datetime | None = None
    active: int = 0  # unfinished runs it started on its own (manual runs are not counted)

    def job_row(self) -> JobInsert:
        """The job one run of this schedule enqueues (from the stored template, so the CLI
        can trigger a schedule without importing the app's code)."""
        return JobInsert(
            task=self.task,
            queue=self.queue,
            args_json=self.args_json,
            priority=self.priority,
            max_attempts=self.max_attempts,
        )


@dataclass(frozen=True)
class ScheduleRun:
    """One run of a schedule: a tick it started (`scheduled`) or a `manual` trigger."""

    id: int
    schedule_id: int
    schedule: str
    name: str
    trigger: str  # "scheduled" or "manual"
    scheduled_at: datetime  # the tick (UTC); for a manual run, when it was triggered
    scheduled_local: str  # the same instant as RFC 3339 in the schedule's zone
    job_id: int | None
    job_state: JobState | None
    created_at: datetime
    scheduler: str | None = None  # the worker (or CLI) that created it
    attempted_at: datetime | None = None  # when its job last started running
    finished_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.job_state is not None and not self.job_state.finished


@dataclass(frozen=True)
class ScheduleRunFilter:
    schedule_id: int | None = None
    active_only: bool = False  # unfinished scheduled runs: the CronJob's `status.active`
    limit: int = 50


@dataclass(frozen=True)
class TickClaim:
    """Create the run of one tick, once. The key is (schedule_id, the tick's UTC minute)."""

    schedule_id: int
    at: datetime  # the tick, UTC
    local: str  # RFC 3339 in the schedule's zone
    name: str
    scheduler: str
    job: JobInsert


class ClaimStatus(enum.StrEnum):
    CLAIMED = "claimed"  # the run and its job were created
    EXISTS = "exists"  # another scheduler created this tick's run: the unique key held
    STALE = "stale"  # a later tick was already started: this one is collapsed into it
    BLOCKED = "blocked"  # concurrency forbid and a scheduled run is active
    SUSPENDED = "suspended"
    MISSING = "missing"  # the schedule was deleted


@dataclass(frozen=True)
class TickClaimResult:
    status: ClaimStatus
    run: ScheduleRun | None = None
    job: Job | None = None


def tick_minute(at: datetime) -> int:
    """The tick key's time part: the scheduled instant's Unix minute (Kubernetes names a
    CronJob's Job `<cronjob>-<unix seconds / 60>` the same way)."""
    return int(at.timestamp() // 60)


def claim_refusal(state: Any) -> ClaimStatus:
    """Why a tick claim inserted nothing, from the `schedule_tick_state` row (None: the
    schedule is gone)."""
    if state is None:
        return ClaimStatus.MISSING
    if state["taken"]:
        return ClaimStatus.EXISTS
    if state["suspended"]:
        return ClaimStatus.SUSPENDED
    return ClaimStatus.BLOCKED


@dataclass(frozen=True)
class ManualRun:
    """A run created by hand (`rota cron trigger`): not a tick, so no unique tick key,
    no effect on last_schedule_time and invisible to the concurrency policy."""

    schedule_id: int
    at: datetime
    local: str
    name: str
    scheduler: str
    job: JobInsert


class _Refused(Exception):
    """Rolls a tick claim back (the job it inserted goes with it)."""

    def __init__(self, status: ClaimStatus) -> None:
        super().__init__(status)
        self.status = status


class ScheduleStore:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._db = driver.database

    # --- rows -----------------------------------------------------------------------------

    def _schedule(self, row: Row) -> ScheduleRecord:
        c = self._db.codec
        return ScheduleRecord(
            id=row["id"],
            name=row["name"],
            task=row["task"],
            queue=row["queue"],
            priority=row["priority"],
            max_attempts=row["max_attempts"],
            args_json=row["args_json"],
            expression=row["expression"],
            timezone=row["timezone"],
            dst=row["dst"],
            concurrency=row["concurrency"],
            starting_deadline=row["starting_deadline"],
            successful_history_limit=row["successful_history_limit"],
            failed_history_limit=row["failed_history_limit"],
            strict_missed_limit=c.flag(row["strict_missed_limit"]),
            suspended=c.flag(row["suspended"]),
            created_at=c.instant(row["created_at"]),
            updated_at=c.instant(row["updated_at"]),
            last_schedule_time=c.time(row["last_schedule_time"]),
            last_successful_time=c.time(row["last_successful_time"]),
            last_missed_time=c.time(row["last_missed_time"]),
            last_event=row["last_event"],
            last_event_at=c.time(row["last_event_at"]),
            active=int(row["active"]),
        )

    def _run(self, row: Row) -> ScheduleRun:
        c = self._db.codec
        state = row["job_state"]
        return ScheduleRun(
            id=row["id"],
            schedule_id=row["schedule_id"],
            schedule=row["schedule"],
            name=row["name"],
            trigger=row["kind"],
            scheduled_at=c.instant(row["scheduled_at"]),
            scheduled_local=row["scheduled_local"],
            job_id=row["job_id"],
            job_state=None if state is None else JobState(state),
            created_at=c.instant(row["created_at"]),
            scheduler=row["scheduler"],
            attempted_at=c.time(row["attempted_at"]),
            finished_at=c.time(row["finished_at"]),
        )

    def _run_in(self, session: Session[Any], run_id: int) -> ScheduleRun:
        params = {"schedule_id": None, "run_id": run_id, "active_only": False, "limit": 1}
        row = session.one("schedule_run_list", params)
        assert row is not None
        return self._run(row)

    # --- definitions and status -----------------------------------------------------------

    def upsert_many(self, rows: Sequence[ScheduleUpsert]) -> list[ScheduleRecord]:
        """Create or update definitions; what the database owns (suspension, last times,
        history) is kept."""
        with self._db.write() as session:
            session.many("schedule_upsert", [row.params() for row in rows])
        found = [self.get(row.name) for row in rows]
        return [record for record in found if record is not None]

    def all(self) -> list[ScheduleRecord]:
        return [self._schedule(r) for r in self._db.query("schedule_list")]

    def get(self, name: str) -> ScheduleRecord | None:
        rows = self._db.query("schedule_get", {"name": name})
        return self._schedule(rows[0]) if rows else None

    def set_suspended(self, name: str, suspended: bool) -> ScheduleRecord:
        changed = self._db.execute("schedule_set_suspended", {"name": name, "suspended": suspended})
        record = self.get(name) if changed else None
        if record is None:
            raise ScheduleNotFoundError(f"no schedule named {name!r}")
        return record

    def delete(self, name: str) -> bool:
        return bool(self._db.execute("schedule_delete", {"name": name}))

    def event_record(self, schedule_id: int, event: str, missed_at: datetime | None) -> None:
        """Note the latest event (a warning, a missed tick) on the schedule's status."""
        params = {"id": schedule_id, "event": event, "missed": self._db.codec.time_param(missed_at)}
        self._db.execute("schedule_event_record", params)

    # --- runs -----------------------------------------------------------------------------

    def tick_claim(self, claim: TickClaim) -> TickClaimResult:
        """Create the run of one tick and its job, once: the unique tick key stops a
        second scheduler, and the policy (suspend, Forbid) is checked under the row lock."""
        c = self._db.codec
        params = {
            "id": claim.schedule_id,
            "name": claim.name,
            "minute": tick_minute(claim.at),
            "at": c.time_param(claim.at),
            "local": claim.local,
            "scheduler": claim.scheduler,
        }
        try:
            with self._db.write() as session:
                # The row lock makes concurrent claims on one schedule take turns, so the
                # Forbid check below sees every committed run (READ COMMITTED re-reads per
                # statement; SQLite's write lock serialises anyway). A duplicate tick is
                # stopped by the unique tick key itself.
                session.all("schedule_lock", params)
                inserted = session.one("schedule_tick_claim", params)
                if inserted is None:
                    raise _Refused(claim_refusal(session.one("schedule_tick_state", params)))
                job = self._driver.job_insert_many([claim.job], conn=session.connection)[0]
                session.count("schedule_run_link", {"run_id": inserted["id"], "job_id": job.id})
                if session.one("schedule_last_time_set", params) is None:
                    raise _Refused(ClaimStatus.STALE)
                run = self._run_in(session, inserted["id"])
        except _Refused as refused:
            return TickClaimResult(refused.status)
        return TickClaimResult(ClaimStatus.CLAIMED, run, job)

    def run_trigger(self, run: ManualRun) -> ScheduleRun:
        """Create a manual run (`rota cron trigger`) and its job."""
        params = {
            "id": run.schedule_id,
            "name": run.name,
            "at": self._db.codec.time_param(run.at),
            "local": run.local,
            "scheduler": run.scheduler,
        }
        with self._db.write() as session:
            inserted = session.one("schedule_run_insert_manual", params)
            if inserted is None:
                raise ScheduleError(f"this schedule already has a run named {run.name!r}")
            job = self._driver.job_insert_many([run.job], conn=session.connection)[0]
            session.count("schedule_run_link", {"run_id": inserted["id"], "job_id": job.id})
            return self._run_in(session, inserted["id"])

    def run_list(self, where: ScheduleRunFilter) -> list[ScheduleRun]:
        params = {
            "schedule_id": where.schedule_id,
            "run_id": None,
            "active_only": where.active_only,
            "limit": where.limit,
        }
        return [self._run(r) for r in self._db.query("schedule_run_list", params)]

    def history_prune(self, limit: int) -> int:
        """Delete finished runs beyond each schedule's history limits. A read looks first:
        most passes find nothing to do, and on SQLite a write transaction would hold up
        every other writer (a busy drain's claims) even when it changes nothing."""
        if not self._db.codec.flag(self._db.query("schedule_history_due")[0]["due"]):
            return 0
        with self._db.write() as session:
            # lastSuccessfulTime first: the prune may delete the run it comes from.
            session.count("schedule_success_refresh")
            return session.count("schedule_history_prune", {"limit": limit})
