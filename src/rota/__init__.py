"""rota: durable background jobs for Python, with SQLite or PostgreSQL as the queue."""

from rota.app import App
from rota.auth import Permission, Principal, Role
from rota.context import Context
from rota.errors import (
    ArgumentsError,
    AuthenticationError,
    ConfigurationError,
    DatabaseUnavailableError,
    Discard,
    InvalidTransitionError,
    JobNotFoundError,
    LeaseLostError,
    PayloadError,
    PermissionDeniedError,
    Retry,
    RotaError,
    ScheduleError,
    ScheduleNotFoundError,
    SchemaError,
    Snooze,
    TaskDefinitionError,
    TaskTimeoutError,
    UnknownTaskError,
)
from rota.job import Attempt, Job, JobState, Outcome
from rota.retry import Backoff
from rota.schedules import Schedule, ScheduleWarning
from rota.task import Task
from rota.worker import Worker, WorkerSettings

__version__ = "0.1.0"

__all__ = [
    "App",
    "ArgumentsError",
    "Attempt",
    "AuthenticationError",
    "Backoff",
    "ConfigurationError",
    "Context",
    "DatabaseUnavailableError",
    "Discard",
    "InvalidTransitionError",
    "Job",
    "JobNotFoundError",
    "JobState",
    "LeaseLostError",
    "Outcome",
    "PayloadError",
    "Permission",
    "PermissionDeniedError",
    "Principal",
    "Retry",
    "Role",
    "RotaError",
    "Schedule",
    "ScheduleError",
    "ScheduleNotFoundError",
    "ScheduleWarning",
    "SchemaError",
    "Snooze",
    "Task",
    "TaskDefinitionError",
    "TaskTimeoutError",
    "UnknownTaskError",
    "Worker",
    "WorkerSettings",
    "__version__",
]
