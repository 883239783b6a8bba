"""The API's input and output shapes (pydantic): inputs are validated from them and the
OpenAPI document describes them. Bounds keep every value inside what the database takes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from rota.auth import Role
from rota.job import MASKED_ARGS, Attempt, Job, JobState

MAX_ID = 2**63 - 1


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL: refuse it here rather than fail in the driver.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, Field(min_length=1, max_length=500), AfterValidator(_no_nul)]
Name = Annotated[
    str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f]+$"), AfterValidator(_no_nul)
]
JobId = Annotated[int, Field(ge=1, le=MAX_ID)]
# Why an operator acts (kept in the audit log or the job's meta).
Reason = Annotated[str, Field(min_length=1, max_length=1000), AfterValidator(_no_nul)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- inputs ----------------------------------------------------------------------------------


class JobPath(Strict):
    job_id: JobId


class NamePath(Strict):
    name: Name


class JobQuery(Strict):
    q: Text | None = Field(None, description="An id, an idempotency key, a task or argument text.")
    id: JobId | None = None
    key: Text | None = Field(None, description="Idempotency key (exact).")
    task: Text | None = Field(None, description="Task name (exact).")
    queue: Name | None = None
    tenant: Name | None = Field(None, description="Tenant (exact).")
    state: list[JobState] = Field(default_factory=list, max_length=7)
    text: Text | None = Field(None, description="Text in the JSON arguments (substring).")
    before_id: JobId | None = Field(None, description="Page: only jobs with a smaller id.")
    limit: int = Field(50, ge=1, le=500)


class EnqueueBody(Strict):
    task: Name
    args: dict[str, Any] = Field(default_factory=dict)
    queue: Name | None = None
    priority: int | None = Field(None, ge=-1000, le=1000)
    delay: float | None = Field(None, ge=0, le=10 * 365 * 86400)
    at: datetime | None = None
    key: Text | None = None
    max_attempts: int | None = Field(None, ge=1, le=1000)


class SeriesQuery(Strict):
    window: int = Field(3600, ge=60, le=7 * 86400, description="Seconds back from now.")
    bucket: int = Field(60, ge=10, le=86400, description="Seconds per point.")


class HistoryQuery(Strict):
    limit: int = Field(20, ge=1, le=500)


class TriggerBody(Strict):
    name: Name | None = Field(None, description="The run's name (default: generated).")


class TokenBody(Strict):
    name: Annotated[
        str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@-]*$")
    ]
    role: Role
    expires_in: int | None = Field(
        None, ge=60, le=10 * 365 * 86400, description="Lifetime in seconds (none: until revoked)."
    )


class SessionBody(Strict):
    token: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_no_nul)]


class LinkBody(Strict):
    code: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_no_nul)]


# --- outputs ---------------------------------------------------------------------------------


class AttemptOut(BaseModel):
    attempt: int
    worker: str | None
    started_at: datetime | None
    finished_at: datetime | None
    outcome: str
    error_type: str | None
    message: str | None
    traceback: str | None

    @classmethod
    def of(cls, a: Attempt) -> AttemptOut:
        return cls(
            attempt=a.attempt,
            worker=a.worker,
            started_at=a.started_at,
            finished_at=a.finished_at,
            outcome=str(a.outcome),
            error_type=a.error_type,
            message=a.message,
            traceback=a.traceback,
        )


class JobOut(BaseModel):
    id: int
    task: str
    queue: str
    args: dict[str, Any] | str = Field(
        description='The arguments; "<encrypted>" for a task declared encrypted=True; '
        '"<hidden>" for a caller without the dlq_read permission.'
    )
    args_encrypted: bool = False
    payload_hidden: bool = Field(
        False,
        description="True when the caller lacks dlq_read: args, result, checkpoint, steps, "
        "progress message and the attempts' messages and tracebacks are left out.",
    )
    state: JobState
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    attempted_at: datetime | None
    finished_at: datetime | None
    key: str | None
    worker: str | None
    lease_expires_at: datetime | None
    cancel_requested: bool
    result: Any = None
    checkpoint: Any = None
    meta: dict[str, Any]
    history: list[AttemptOut]
    steps: dict[str, Any] | None = Field(None, description="Durable step results (job page).")
    progress: float | None = Field(None, description="The last ctx.progress() fraction, 0..1.")
    progress_message: str | None = None
    progress_at: datetime | None = None

    @classmethod
    def of(cls, job: Job, steps: dict[str, Any] | None = None) -> JobOut:
        return cls(
            id=job.id,
            task=job.task,
            queue=job.queue,
            # Sealed arguments are never shown, not even as ciphertext (docs/security.md).
            args=MASKED_ARGS if job.args_encrypted else job.args,
            args_encrypted=job.args_encrypted,
            progress=job.progress,
            progress_message=job.progress_message,
            progress_at=job.progress_at,
            state=job.state,
            priority=job.priority,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            run_at=job.run_at,
            created_at=job.created_at,
            attempted_at=job.attempted_at,
            finished_at=job.finished_at,
            key=job.key,
            worker=job.worker,
            lease_expires_at=job.lease_expires_at,
            cancel_requested=job.cancel_requested,
            result=job.result,
            checkpoint=job.checkpoint,
            meta=job.meta,
            history=[AttemptOut.of(a) for a in job.history],
            steps=steps,
        )


class QueueOut(BaseModel):
    name: str
    paused: bool
    counts: dict[str, int]
    depth: int = Field(description="Jobs waiting: available, scheduled and retryable.")
    running: int
    oldest_available_age_s: float | None


class SeriesOut(BaseModel):
    """Per queue and kind (`enqueued` or a finished state), one count per bucket, oldest
    first; the last bucket ends now."""

    window: int
    bucket: int
    series: dict[str, dict[str, list[int]]]


class PausedOut(BaseModel):
    name: str
    paused: bool
    # What still holds the queue: "manual", "window", "breaker" (a resume lifts only
    # the manual pause).
    held_by: list[str] = []


class ScheduleOut(BaseModel):
    name: str
    task: str
    queue: str
    args: dict[str, Any] | str = Field(
        description='The job template\'s arguments; "<encrypted>" for an encrypted task; '
        '"<hidden>" without dlq_read.'
    )
    schedule: str
    description: str = Field("", description='The schedule in plain words: "every 5 minutes".')
    timezone: str
    concurrency: str
    suspended: bool
    active: int
    next_runs: list[str | None]
    next_runs_utc: list[str]
    last_schedule_time: str | None
    last_successful_time: str | None
    last_missed_time: str | None
    last_event: str | None
    last_event_at: str | None
    invalid: str | None


class ScheduleRunOut(BaseModel):
    id: int
    name: str
    schedule: str
    trigger: str
    scheduled_at: str
    scheduled_at_utc: str
    job_id: int | None
    state: str | None
    scheduler: str | None
    created_at: str
    attempted_at: str | None
    finished_at: str | None


class ScheduleDetailOut(ScheduleOut):
    history: list[ScheduleRunOut]


class WorkerOut(BaseModel):
    worker: str
    running: int
    queues: list[str]
    last_seen: datetime | None = Field(description="When it last started a job.")
    leader_of: list[str]
    last_heartbeat: datetime | None = Field(
        None, description="Its last heartbeat row (every live worker renews one)."
    )
    started_at: datetime | None = None
    capabilities: list[str] = []


class LeaderOut(BaseModel):
    name: str
    leader: str
    elected_at: datetime
    expires_at: datetime
    live: bool


class WorkersOut(BaseModel):
    workers: list[WorkerOut]
    leaders: list[LeaderOut]


class HorizonHolderOut(BaseModel):
    kind: str = Field(description="session (holder: its pid) or prepared (holder: its gid).")
    holder: str
    username: str | None
    application: str | None
    client: str | None
    state: str | None
    since: datetime
    age_s: float


class DatabaseOut(BaseModel):
    dialect: str
    horizon_threshold_s: float
    horizon_held: bool | None = Field(
        description="Whether a transaction has held the xmin horizon longer than the "
        "threshold (null on SQLite, which has none)."
    )
    holders: list[HorizonHolderOut] | None = Field(
        description="The oldest transactions holding a snapshot, oldest first (at most five)."
    )


class TokenOut(BaseModel):
    name: str
    role: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None
    last_used_at: datetime | None = Field(None, description="Recorded at most once a minute.")
    expired: bool = False


class NewTokenOut(BaseModel):
    name: str
    role: str
    token: str = Field(description="The secret: shown once, never stored.")


class HealthOut(BaseModel):
    status: str
    version: str
    dialect: str
    schema_version: int | None
    detail: str | None = None


class MeOut(BaseModel):
    name: str
    role: str
    permissions: list[str]
    features: list[str] = Field(description="Optional dashboard sections available here.")


# --- dead letters (app.dlq) ------------------------------------------------------------------


class DeadLetterQuery(Strict):
    id: JobId | None = None
    task: Text | None = Field(None, description="Task name (exact).")
    queue: Name | None = None
    error_type: Text | None = Field(None, description="Error class, e.g. ValueError (suffix).")
    text: Text | None = Field(None, description="Text in the last error message.")
    since: datetime | None = Field(None, description="Discarded at or after.")
    until: datetime | None = Field(None, description="Discarded before.")
    before_id: JobId | None = None
    limit: int = Field(50, ge=1, le=500)


class ReplayBody(Strict):
    """A bounded selection of dead letters, why, and how fast. Run it with `dry_run`
    first: that counts what would be replayed (per task) and changes nothing."""

    ids: list[JobId] | None = Field(None, min_length=1, max_length=10_000)
    task: Text | None = None
    queue: Name | None = None
    error_type: Text | None = None
    text: Text | None = None
    since: datetime | None = None
    until: datetime | None = None
    all: bool = Field(False, description="Every dead letter (needed when no filter is set).")
    reason: Reason
    rate: float | None = Field(None, gt=0, le=100_000, description="Jobs per second.")
    dry_run: bool = False
    limit: int = Field(10_000, ge=1, le=100_000)
    attempts: int = Field(1, ge=1, le=10_000)


class DismissBody(Strict):
    ids: list[JobId] = Field(min_length=1, max_length=10_000)
    reason: Reason


class ReplayOut(BaseModel):
    dry_run: bool
    replay_id: int | None
    count: int
    matched: int
    per_task: dict[str, int]
    principal: str
    rate: float | None
    seconds: float
    job_ids: list[int]


class ReplayRecordOut(BaseModel):
    id: int
    created_at: datetime
    principal: str
    reason: str
    selection: dict[str, Any]
    rate: float | None
    count: int
    job_ids: list[int]


class DismissOut(BaseModel):
    dismissed: list[int]


# --- batches, workflows, sagas (their own JSON views, described loosely) ----------------------


class Open(BaseModel):
    """A feature's own JSON view: the fields listed are always there, more may follow."""

    model_config = ConfigDict(extra="allow")


class RefPath(Strict):
    ref: Name = Field(description="An id (digits) or a name / key.")

    @property
    def value(self) -> int | str:
        return int(self.ref) if self.ref.isdigit() and len(self.ref) < 19 else self.ref


class KeyPath(Strict):
    key: Name


class StepPath(Strict):
    ref: Name
    step: Name


class FeatureQuery(Strict):
    state: Name | None = Field(None, description="Only runs in this state.")
    limit: int = Field(50, ge=1, le=500)


class AbortBody(Strict):
    reason: Reason = "aborted from the dashboard"


class BatchOut(Open):
    id: int
    name: str | None
    task: str
    state: str
    completions: int
    succeeded: int
    failed: int
    active: int


class BatchDetailOut(BatchOut):
    jobs: list[JobOut]


class WorkflowOut(Open):
    id: int
    name: str
    key: str | None
    state: str
    steps: list[dict[str, Any]]


class SagaOut(Open):
    key: str
    saga: str
    status: str
    step: str | None
    steps: list[str]
    history: list[dict[str, Any]]
