"""The Driver protocol: the only seam that speaks SQL. It talks in jobs, leases and
queues (never cursors), and its parameters and results are frozen dataclasses."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from rota.job import Job, JobState
from rota.ops.model import (
    PoisonedKey,
    QueueChange,
    QueueControl,
    ReplayRecord,
    ReplayRequest,
    Selection,
)

if TYPE_CHECKING:
    from rota.batches.store import BatchStore
    from rota.ops.hold_store import HoldStore
    from rota.routing.store import RoutingStore
    from rota.tenants.store import TenantStore
    from rota.web.records import JobSearch, LeaderRecord, SeriesPoint, WorkerSeen
    from rota.workflows.records import WorkflowStore

# Called by a notifier when jobs may be waiting: with a queue name, or None for "any queue".
WakeFunc = Callable[[str | None], None]


@dataclass(frozen=True)
class JobInsert:
    """One job to insert. Exactly one of `at` / `delay` may be set; neither means now."""

    task: str
    queue: str
    args_json: str
    priority: int
    max_attempts: int
    key: str | None = None
    at: datetime | None = None
    delay: float | None = None
    # An active key blocks a second job; it is released once `key_ttl` seconds have
    # passed since its job was created, or when the job leaves `key_states`.
    key_ttl: float | None = None
    key_states: tuple[str, ...] | None = None
    # Feature metadata (batch index, workflow step, trace context) as a JSON object.
    meta_json: str | None = None
    # Jobs of one partition key (per queue) run one at a time, in id order (rota.ops).
    partition_key: str | None = None
    # A job not started by then is dead-lettered with reason `expired`.
    expires_at: datetime | None = None
    # Labels a worker must advertise to claim the job (sorted; None: any worker).
    requires: tuple[str, ...] | None = None
    tenant: str | None = None  # who the job is for (fair queues, per-tenant caps)


@dataclass(frozen=True)
class Completion:
    """How one attempt ended, as the completer writes it (River's executor/completer split).

    The write is fenced: it applies only while the job is running under `lease_token`.
    """

    job_id: int
    lease_token: str
    state: JobState
    entry_json: str  # the history entry: outcome, error type, message, traceback
    delay: float | None = None  # for retryable / scheduled: seconds from now
    result_json: str | None = None
    # Snooze and graceful shutdown give the attempt back instead of spending it.
    refund_attempt: bool = False


@dataclass(frozen=True)
class LeaseRenewal:
    job_id: int
    lease_token: str
    cancel_requested: bool


@dataclass(frozen=True)
class JobFilter:
    states: tuple[JobState, ...] = ()
    queue: str | None = None
    task: str | None = None
    limit: int = 50
    before_id: int | None = None


@dataclass(frozen=True)
class QueueReport:
    name: str
    paused: bool
    counts: dict[str, int]
    oldest_available_age: float | None  # seconds the oldest runnable job has waited


@dataclass(frozen=True)
class BacklogReport:
    """One queue's scaling signals (SEMANTICS §3.3-3.4), the numbers KEDA scales on."""

    queue: str
    backlog: int  # runnable: available, or waiting and due; 0 while the queue is paused
    running: int
    oldest_age_s: float  # seconds the oldest runnable job has waited (0 when none waits)

    @property
    def demand(self) -> int:
        """Work that needs a worker now: runnable plus running (the default signal)."""
        return self.backlog + self.running


@dataclass(frozen=True)
class DurationReport:
    """How long one queue's recently completed jobs took to run (their last attempt)."""

    queue: str
    window_s: float
    samples: int
    mean_s: float | None  # None when no job completed in the window


@dataclass(frozen=True)
class RescueReport:
    rescued: int = 0
    discarded: int = 0
    cancelled: int = 0


# --- schedules ---------------------------------------------------------------------------


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


@dataclass(frozen=True)
class TokenRecord:
    """An API token as stored: its name, role and lifetime, never the secret. `expired`
    and `stale` (its last use is over a minute old) are read with the database clock."""

    name: str
    role: str
    created_at: datetime
    revoked_at: datetime | None = None
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    expired: bool = False
    stale: bool = False

    def to_json(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "name": self.name,
            "role": self.role,
            "created_at": self.created_at.isoformat(),
            "revoked_at": iso(self.revoked_at),
            "expires_at": iso(self.expires_at),
            "last_used_at": iso(self.last_used_at),
            "expired": self.expired,
        }


@dataclass(frozen=True)
class LoginLinkRecord:
    """A login link and the token it stands for (`name` None: that token is gone)."""

    name: str | None
    role: str | None
    used: bool
    expired: bool
    token_live: bool


class TokenStore(Protocol):
    """API tokens by SHA-256 digest (see rota.auth), the dashboard's browser sessions
    and its single-use login links (also stored as digests)."""

    def insert(self, name: str, digest: str, role: str, seconds: float | None = None) -> bool: ...

    def find(self, digest: str) -> TokenRecord | None: ...

    def all(self) -> list[TokenRecord]: ...

    def revoke(self, name: str) -> bool: ...

    def touch(self, digest: str) -> None: ...

    def session_insert(self, digest: str, token_digest: str, seconds: float) -> None: ...

    def session_find(self, digest: str) -> tuple[TokenRecord, str] | None: ...

    def session_end(self, digest: str) -> bool: ...

    def link_insert(self, digest: str, name: str, seconds: float) -> bool: ...

    def link_redeem(self, digest: str) -> str | None: ...

    def link_find(self, digest: str) -> LoginLinkRecord | None: ...

    def prune(self) -> None: ...


class WebStore(Protocol):
    """Reads behind the HTTP API and the dashboard (records in rota.web.records)."""

    def job_search(self, where: JobSearch) -> list[Job]: ...

    def queue_series(self, window: float, bucket: float) -> list[SeriesPoint]: ...

    def worker_list(self, window: float) -> list[WorkerSeen]: ...

    def leader_list(self) -> list[LeaderRecord]: ...


@dataclass(frozen=True)
class ProgressUpdate:
    """The latest progress of one running job, written fenced by its lease token."""

    job_id: int
    lease_token: str
    fraction: float
    message: str | None


class ProgressStore(Protocol):
    """ctx.progress() values, written in batches by the worker (rota.worker.progress)."""

    def record_many(self, updates: Sequence[ProgressUpdate]) -> set[int]: ...


@dataclass(frozen=True)
class SealedRow:
    """A stored JSON object of sealed arguments: a job's or a schedule's template."""

    id: int
    args_json: str


class SealedArgsStore(Protocol):
    """Encrypted arguments at rest, paged by id, for `rota db rotate-key`. `kind` is
    "job" or "schedule"; swap() writes only if the stored value is still `old_json`."""

    def scan(self, kind: str, after: int, limit: int) -> list[SealedRow]: ...

    def swap(self, kind: str, row_id: int, old_json: str, new_json: str) -> bool: ...


@dataclass(frozen=True)
class TableInfo:
    name: str
    columns: tuple[str, ...]


class CatalogStore(Protocol):
    """What rota objects exist in the database (for `rota db roles` and `rota db copy`)."""

    def schema(self) -> str: ...

    def tables(self) -> list[TableInfo]: ...

    def sequences(self) -> list[str]: ...

    def functions(self) -> list[tuple[str, str]]: ...

    def roles(self, names: Sequence[str]) -> dict[str, str | None]:
        """Which of `names` exist as database roles, with their comments."""
        ...


@dataclass(frozen=True)
class LeaderReport:
    """A live leader row: which worker holds a leader-only role (rota.observe metrics)."""

    name: str
    leader: str
    elected_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class WorkerReport:
    """A worker holding live job leases, and how many jobs it runs."""

    worker: str
    running: int


class MetricsStore(Protocol):
    """Cheap reads for the cluster-wide Prometheus metrics (rota.observe.cluster)."""

    def leaders(self) -> list[LeaderReport]: ...

    def workers(self) -> list[WorkerReport]: ...


class SagaStatus(enum.StrEnum):
    RUNNING = "running"  # forward steps are executing
    COMPENSATING = "compensating"  # undoing the completed steps, newest first
    COMPLETED = "completed"  # every step succeeded
    COMPENSATED = "compensated"  # a step failed (or an abort) and every undo succeeded
    FAILED = "failed"  # an undo kept failing: a human must look

    @property
    def finished(self) -> bool:
        return self in (SagaStatus.COMPLETED, SagaStatus.COMPENSATED, SagaStatus.FAILED)


@dataclass(frozen=True)
class SagaRecord:
    """A stored saga: where it is (`status`, `step`), what it knows (`data`), and how
    it got there (`history`, oldest first, each entry with its database time `at`)."""

    id: int
    key: str
    name: str
    status: SagaStatus
    step: str | None
    version: int
    job_id: int | None
    plan: list[dict[str, Any]]
    data: dict[str, Any]
    error: str | None
    history: tuple[dict[str, Any], ...]
    deadline_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SagaChange:
    """One transition of a locked saga (the version goes up by one)."""

    saga_id: int
    status: SagaStatus
    step: str | None
    job_id: int | None
    data_json: str
    error: str | None
    entry_json: str  # the history entry; the store adds its time
    deadline: float | None = None  # seconds from now the new step may take in all


@dataclass(frozen=True)
class StalledSaga:
    """A saga in flight whose job ended without moving it on, or whose step is overdue."""

    saga_id: int
    version: int
    job_id: int | None
    job_state: JobState | None  # None: the job is gone (pruned)
    overdue: bool


class SagaStore(Protocol):
    """Saga rows (rota.sagas). Methods taking `conn` join the caller's transaction;
    `lock` holds the row until it ends (FOR UPDATE; BEGIN IMMEDIATE on SQLite)."""

    def insert(
        self,
        conn: Any,
        *,
        key: str,
        name: str,
        step: str,
        plan_json: str,
        data_json: str,
        entry_json: str,
    ) -> SagaRecord | None: ...

    def set_job(
        self, conn: Any, saga_id: int, job_id: int, deadline: float | None
    ) -> SagaRecord: ...

    def lock(self, conn: Any, saga_id: int) -> SagaRecord | None: ...

    def try_lock(self, conn: Any, saga_id: int) -> SagaRecord | None: ...

    def lock_key(self, conn: Any, key: str) -> SagaRecord | None: ...

    def job_state(self, conn: Any, job_id: int) -> JobState | None: ...

    def update(self, conn: Any, change: SagaChange) -> SagaRecord: ...

    def get(self, key: str) -> SagaRecord | None: ...

    def get_id(self, saga_id: int) -> SagaRecord | None: ...

    def search(
        self, status: str | None, name: str | None, limit: int, before_id: int | None
    ) -> list[SagaRecord]: ...

    def prune(self, age: float, limit: int) -> int:
        """Delete up to `limit` sagas finished (completed, compensated) over `age` s ago."""
        ...

    def stalled(self, limit: int) -> list[StalledSaga]: ...


@dataclass(frozen=True)
class EventRecord:
    """A published event: a fact with a stable id and a schema version."""

    id: int
    name: str
    version: int
    payload: Any
    key: str | None
    published_at: datetime
    created: bool = True  # False: the key was published before; this is that event

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "payload": self.payload,
            "key": self.key,
            "published_at": self.published_at.isoformat(),
        }


@dataclass(frozen=True)
class Subscription:
    """A task that reacts to an event name, with the job policy its deliveries get."""

    event: str
    task: str
    queue: str
    priority: int
    max_attempts: int
    created_at: datetime | None = None


@dataclass(frozen=True)
class EventFilter:
    name: str | None = None
    after_id: int | None = None
    until_id: int | None = None
    since: datetime | None = None
    limit: int = 1000


class EventStore(Protocol):
    """Events and subscriptions (rota.events); `conn` joins the caller's transaction."""

    def insert(
        self, conn: Any, name: str, version: int, payload_json: str, key: str | None
    ) -> EventRecord: ...

    def get(self, event_id: int) -> EventRecord | None: ...

    def search(self, where: EventFilter) -> list[EventRecord]: ...

    def subscriptions(self, conn: Any, event: str | None) -> list[Subscription]: ...

    def subscribe_many(self, rows: Sequence[Subscription], conn: Any = None) -> None: ...

    def unsubscribe(self, event: str, task: str) -> bool: ...

    def prune(self, age: float, limit: int) -> int:
        """Delete up to `limit` events published over `age` seconds ago."""
        ...


class OpsStore(Protocol):
    """Dead letters, replays, queue controls, expiry and retention (see rota.ops)."""

    def dead_letter_count(self, selection: Selection, limit: int) -> tuple[dict[str, int], int]: ...

    def dead_letter_dismiss(self, ids: Sequence[int], principal: str, reason: str) -> list[int]: ...

    def dead_letter_list(
        self, selection: Selection, limit: int, before_id: int | None
    ) -> list[Job]: ...

    def dead_letter_replay(self, replay: ReplayRequest) -> tuple[int, list[tuple[int, str]]]: ...

    def job_expire_due(self, limit: int) -> int: ...

    def job_prune(self, state: str, age: float, limit: int) -> int: ...

    def queue_configure(self, change: QueueChange) -> QueueControl: ...

    def queue_controls(self, name: str | None = None) -> list[QueueControl]: ...

    def queue_limited(self, name: str) -> bool: ...

    def queue_limited_hint(self, name: str) -> bool:
        """Whether this driver's last claim from the queue was held back by a global or
        rate limit while jobs kept waiting (in memory, no query): the fetcher then claims
        again soon, and whenever one of its slots frees."""
        ...

    def queue_partitions(self, queue: str | None, limit: int) -> list[PoisonedKey]: ...

    def replay_list(self, limit: int, before_id: int | None) -> list[ReplayRecord]: ...


@dataclass(frozen=True)
class CopyColumn:
    name: str
    type: str  # the dialect's type name: "timestamptz", "jsonb", "bool", ...; "real", "text"


class CopyWriter(Protocol):
    """Writes copied rows into the target, all in one transaction (`rota db copy`)."""

    def write(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int: ...

    def count(self, table: str) -> int: ...

    def advance_sequences(self) -> None: ...


class CopyStore(Protocol):
    """Table-driven reads and bulk writes of rota's own tables, to move an installation
    between databases. Table names come from the catalog, never from input."""

    def columns(self) -> dict[str, list[CopyColumn]]: ...

    def dependencies(self) -> list[tuple[str, str]]: ...

    def count(self, table: str) -> int: ...

    def read(
        self, table: str, columns: Sequence[str], after: int, limit: int
    ) -> list[tuple[int, tuple[Any, ...]]]: ...

    def writer(self) -> AbstractContextManager[CopyWriter]: ...


class Notifier(Protocol):
    """Tells a worker that jobs may be waiting; polling remains the fallback."""

    async def run(self, wake: WakeFunc, control: Callable[[str], None]) -> None: ...


class Driver(Protocol):
    """Storage for one dialect. Methods are sorted noun_verb; all are blocking and
    thread-safe, and the worker calls them from a small thread pool."""

    dialect: str
    latest_schema_version: int

    # Feature stores: each a small class in drivers/<dialect>/<feature>.py that borrows
    # the driver's connections, so one feature's SQL plumbing stays out of driver.py.
    @property
    def tokens(self) -> TokenStore: ...

    @property
    def ops(self) -> OpsStore: ...

    @property
    def batches(self) -> BatchStore: ...

    @property
    def sagas(self) -> SagaStore: ...

    @property
    def events(self) -> EventStore: ...

    @property
    def metrics(self) -> MetricsStore: ...

    @property
    def progress(self) -> ProgressStore: ...

    @property
    def sealed(self) -> SealedArgsStore: ...

    @property
    def catalog(self) -> CatalogStore: ...

    @property
    def copy(self) -> CopyStore: ...

    @property
    def web(self) -> WebStore: ...

    @property
    def workflows(self) -> WorkflowStore: ...

    @property
    def holds(self) -> HoldStore: ...

    @property
    def routing(self) -> RoutingStore: ...

    @property
    def tenants(self) -> TenantStore: ...

    def close(self) -> None: ...

    def inbox_prune(self, age: float, limit: int) -> int: ...

    def inbox_record(self, conn: Any, source: str, message_id: str) -> bool: ...

    def db_now(self) -> datetime: ...

    def job_cancel(self, job_id: int) -> Job: ...

    def job_checkpoint(self, job_id: int, lease_token: str, value_json: str) -> bool: ...

    def job_claim(self, job_id: int, worker: str, lease_seconds: float) -> Job | None: ...

    def job_complete_many(
        self, completions: Sequence[Completion], conn: Any = None
    ) -> set[int]: ...

    def job_fetch_available(
        self,
        queue: str,
        limit: int,
        worker: str,
        lease_seconds: float,
        capabilities: Sequence[str] | None = None,
    ) -> list[Job]:
        """Claim runnable jobs; with `capabilities`, only jobs whose requirements they
        cover (None: no routing filter)."""
        ...

    def job_get(self, job_id: int) -> Job | None: ...

    def job_insert_many(self, rows: Sequence[JobInsert], conn: Any = None) -> list[Job]: ...

    def job_lease_renew(
        self, leases: Sequence[tuple[int, str]], lease_seconds: float
    ) -> list[LeaseRenewal]: ...

    def job_list(self, where: JobFilter) -> list[Job]: ...

    def job_prune_finished(self, completed_age: float, discarded_age: float, limit: int) -> int: ...

    def job_rescue_expired(self, limit: int) -> RescueReport: ...

    def job_retry(self, job_id: int) -> Job: ...

    def job_stage_due(self, limit: int, horizon: float = 0.0) -> int: ...

    def leader_attempt_elect(self, name: str, leader: str, ttl_seconds: float) -> bool: ...

    def leader_resign(self, name: str, leader: str) -> None: ...

    def notifier(self) -> Notifier: ...

    def queue_backlog(self, queue: str) -> BacklogReport: ...

    def queue_durations(self, queue: str, window: float) -> DurationReport: ...

    def queue_list(self) -> list[QueueReport]: ...

    def queue_set_paused(self, name: str, paused: bool) -> None: ...

    def schedule_delete(self, name: str) -> bool: ...

    def schedule_event_record(
        self, schedule_id: int, event: str, missed_at: datetime | None
    ) -> None: ...

    def schedule_get(self, name: str) -> ScheduleRecord | None: ...

    def schedule_history_prune(self, limit: int) -> int: ...

    def schedule_list(self) -> list[ScheduleRecord]: ...

    def schedule_run_list(self, where: ScheduleRunFilter) -> list[ScheduleRun]: ...

    def schedule_run_trigger(self, run: ManualRun) -> ScheduleRun: ...

    def schedule_set_suspended(self, name: str, suspended: bool) -> ScheduleRecord: ...

    def schedule_tick_claim(self, claim: TickClaim) -> TickClaimResult: ...

    def schedule_upsert_many(self, rows: Sequence[ScheduleUpsert]) -> list[ScheduleRecord]: ...

    def schema_migrate(self) -> list[int]: ...

    def schema_version(self) -> int: ...

    def step_list(self, job_id: int) -> dict[str, Any]: ...

    def step_record(self, job_id: int, lease_token: str, name: str, result_json: str) -> bool: ...

    def transaction(self) -> AbstractContextManager[Any]: ...


def wake_all(wake: WakeFunc) -> None:
    wake(None)


async def sleep_or(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to `seconds` for `event`; True if it was set."""
    try:
        await asyncio.wait_for(event.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True
