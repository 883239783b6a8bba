"""rota: durable background jobs for Python, with SQLite or PostgreSQL as the queue."""

from rota.auth import Permission, Principal, Role
from rota.batches import (
    BatchError,
    BatchNotFoundError,
    BatchStatus,
    FailureRule,
    SuccessRule,
)
from rota.context import Context
from rota.errors import (
    ArgumentsError,
    AuthenticationError,
    ConfigurationError,
    DatabaseUnavailableError,
    Discard,
    InvalidTransitionError,
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    LeaseLostError,
    NotFoundError,
    PayloadError,
    PermissionDeniedError,
    Retry,
    RotaError,
    SagaError,
    SagaNotFoundError,
    ScheduleError,
    ScheduleNotFoundError,
    SchemaError,
    Snooze,
    TaskDefinitionError,
    TaskTimeoutError,
    UnknownTaskError,
    WaitTimeoutError,
    WorkflowError,
    WorkflowNotFoundError,
)
from rota.events import Event
from rota.job import Attempt, Job, JobState, Outcome
from rota.retry import Backoff
from rota.sagas import Saga, SagaRecord, SagaStatus, SagaStep
from rota.schedules import Schedule, ScheduleWarning
from rota.standard import App
from rota.task import Task
from rota.worker import Worker, WorkerSettings
from rota.workflows import Workflow, WorkflowRun, chain

__version__ = "0.1.0"

__all__ = [
    "App",
    "ArgumentsError",
    "Attempt",
    "AuthenticationError",
    "Backoff",
    "BatchError",
    "BatchNotFoundError",
    "BatchStatus",
    "ConfigurationError",
    "Context",
    "DatabaseUnavailableError",
    "Discard",
    "Event",
    "FailureRule",
    "InvalidTransitionError",
    "Job",
    "JobCancelledError",
    "JobFailedError",
    "JobNotFoundError",
    "JobState",
    "LeaseLostError",
    "NotFoundError",
    "Outcome",
    "PayloadError",
    "Permission",
    "PermissionDeniedError",
    "Principal",
    "Retry",
    "Role",
    "RotaError",
    "Saga",
    "SagaError",
    "SagaNotFoundError",
    "SagaRecord",
    "SagaStatus",
    "SagaStep",
    "Schedule",
    "ScheduleError",
    "ScheduleNotFoundError",
    "ScheduleWarning",
    "SchemaError",
    "Snooze",
    "SuccessRule",
    "Task",
    "TaskDefinitionError",
    "TaskTimeoutError",
    "UnknownTaskError",
    "WaitTimeoutError",
    "Worker",
    "WorkerSettings",
    "Workflow",
    "WorkflowError",
    "WorkflowNotFoundError",
    "WorkflowRun",
    "__version__",
    "chain",
]
