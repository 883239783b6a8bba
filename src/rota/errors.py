"""The exception tree: everything rota raises derives from RotaError, and the
control-flow signals a task raises (Retry, Discard, Snooze) live here too."""

from __future__ import annotations


class RotaError(Exception):
    """Base class of every error rota raises."""


class ConfigurationError(RotaError):
    """A setting, URL or option is invalid."""


class TaskDefinitionError(RotaError):
    """A task was declared with an invalid policy or signature."""


class UnknownTaskError(RotaError):
    """A job names a task this app does not know."""


class ArgumentsError(RotaError):
    """Arguments do not bind to the task's signature or payload model."""


class PayloadError(RotaError):
    """A value is not JSON, or the encoded payload is over the size limit."""


class SchemaError(RotaError):
    """The database schema is missing, older or newer than this rota knows."""


class DatabaseUnavailableError(RotaError):
    """The database could not be reached."""


class NotFoundError(RotaError):
    """Base class of the "no such thing" errors (a job, schedule, batch, workflow or
    saga): `except rota.NotFoundError` catches any of them, e.g. to answer 404."""


class JobNotFoundError(NotFoundError):
    """No job has the given id."""


class JobFailedError(RotaError):
    """`app.wait` found the job dead-lettered (discarded: attempts exhausted, a permanent
    error, Discard, expired). `job` is the finished job; `error_type` and `error` are
    its last attempt's (the original exception cannot cross the database)."""

    def __init__(
        self, message: str, *, job: object, error_type: str | None = None, error: str | None = None
    ) -> None:
        super().__init__(message)
        self.job = job
        self.error_type = error_type
        self.error = error


class JobCancelledError(JobFailedError):
    """`app.wait` found the job cancelled (by an operator, a batch or a workflow)."""


class WaitTimeoutError(RotaError, TimeoutError):
    """`app.wait(..., timeout=)` ran out before the job finished (it keeps running)."""


class InvalidTransitionError(RotaError):
    """A job cannot move from its current state to the requested one."""


class TaskTimeoutError(RotaError):
    """A task ran longer than its timeout."""


class LeaseLostError(RotaError):
    """This attempt no longer owns its job (the lease expired and it was rescued, or
    the job was completed already); its writes are refused so they cannot happen twice."""


class ScheduleError(ConfigurationError):
    """A schedule is invalid: its cron expression, time zone, name or a policy value."""


class ScheduleNotFoundError(NotFoundError):
    """No schedule has the given name."""


class BatchError(RotaError):
    """A batch definition is invalid, or an action does not fit the batch's state
    (resuming a finished batch)."""


class BatchNotFoundError(NotFoundError):
    """No batch has the given id or name."""


class WorkflowError(RotaError):
    """A workflow is declared or started wrongly (a cycle, an unknown step, bad
    arguments), or an action does not fit its state (retrying a step that did not fail)."""


class WorkflowNotFoundError(NotFoundError):
    """No workflow has the given id or key."""


class AuthenticationError(RotaError):
    """An API token is missing, malformed, unknown or revoked."""


class PermissionDeniedError(RotaError):
    """The caller's role does not grant the permission an operation needs."""


class SagaError(RotaError):
    """A saga cannot do what was asked: it is unknown, finished, or its step is running."""


class SagaNotFoundError(SagaError, NotFoundError):
    """No saga has the given business key."""


# --- control flow raised by tasks -------------------------------------------


class Retry(Exception):
    """Fail this attempt and retry, after `after` seconds or the task's backoff."""

    def __init__(self, reason: str = "retry requested", *, after: float | None = None) -> None:
        if after is not None and after < 0:
            raise ValueError("Retry(after=...) must be >= 0 seconds")
        super().__init__(reason)
        self.reason = reason
        self.after = after


class Discard(Exception):
    """Stop retrying: move the job to the dead letters with `reason`."""

    def __init__(self, reason: str = "discarded by task") -> None:
        super().__init__(reason)
        self.reason = reason


class Snooze(Exception):
    """Run again after `seconds` without spending an attempt."""

    def __init__(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("Snooze(seconds) must be >= 0")
        super().__init__(f"snoozed for {seconds}s")
        self.seconds = seconds


def describe(exc: BaseException) -> str:
    """str(exc), or what went wrong when even that raises (a broken __str__ in a task's
    exception must not cost the attempt its outcome)."""
    try:
        return str(exc)
    except Exception as err:
        return f"<str() of {type(exc).__name__} failed: {type(err).__name__}>"
