"""Task: a registered function with its policy, and the enqueue API that validates
arguments at the door and writes jobs through the app's driver."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from rota.drivers.base import JobInsert
from rota.errors import ArgumentsError, ConfigurationError, TaskDefinitionError
from rota.job import Job, JobState
from rota.labels import check_labels, check_queue_name
from rota.payload import ArgsModel, ArgsSealer, check_text, encode
from rota.retry import Backoff


class TaskOwner(Protocol):
    """What a task needs of the App it belongs to (rota.app.App): the payload limit, the
    sealer of encrypted arguments, and the insert every enqueue goes through."""

    @property
    def max_payload_bytes(self) -> int: ...

    @property
    def sealer(self) -> ArgsSealer | None: ...

    def _insert(
        self, rows: list[JobInsert], *, conn: Any, tasks: list[Task[Any, Any]]
    ) -> list[Job]: ...


P = ParamSpec("P")
R = TypeVar("R")

# Options enqueue() accepts beside the task's own arguments; a task may not use these names.
ENQUEUE_OPTIONS = frozenset(
    {
        "key",
        "at",
        "delay",
        "priority",
        "queue",
        "conn",
        "max_attempts",
        "partition_key",
        "expires_at",
        "requires",
        "tenant",
    }
)
PRIORITY_RANGE = range(-100, 101)
MAX_KEY_LENGTH = 512


@dataclass(frozen=True)
class TaskPolicy:
    """How jobs of a task are queued and retried."""

    queue: str = "default"
    priority: int = 0  # lower runs first
    max_attempts: int = 20
    backoff: Backoff = field(default_factory=Backoff)
    timeout: float | None = None  # seconds per attempt
    permanent: tuple[type[BaseException], ...] = ()  # errors that are never retried
    # Idempotency keys: a key blocks a second job for `key_ttl` seconds after its job was
    # created (None: until the job is pruned), and only while that job is in `key_states`
    # (None: in any state).
    key_ttl: float | None = 24 * 3600.0
    key_states: frozenset[JobState] | None = None
    # Arguments stored encrypted (the encryption feature: $ROTA_ENCRYPTION_KEYS).
    encrypted: bool = False
    # Labels a worker must advertise to run the task's jobs (rota.routing); () for any.
    requires: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_queue_name(self.queue, TaskDefinitionError)
        object.__setattr__(
            self, "requires", check_labels(self.requires, "requires", TaskDefinitionError)
        )
        check_priority(self.priority, TaskDefinitionError)
        check_max_attempts(self.max_attempts, TaskDefinitionError)
        if self.timeout is not None and not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise TaskDefinitionError("timeout must be a positive number of seconds or None")
        if self.key_ttl is not None and not (self.key_ttl > 0 and math.isfinite(self.key_ttl)):
            raise TaskDefinitionError("key_ttl must be a positive number of seconds or None")
        if self.key_states is not None and (
            not self.key_states or not all(isinstance(s, JobState) for s in self.key_states)
        ):
            raise TaskDefinitionError("key_states must be a non-empty set of rota.JobState")
        for exc_type in self.permanent:
            if not (isinstance(exc_type, type) and issubclass(exc_type, BaseException)):
                raise TaskDefinitionError(f"permanent= takes exception classes, not {exc_type!r}")


def check_priority(priority: object, error: type[Exception]) -> None:
    if (
        not isinstance(priority, int)
        or isinstance(priority, bool)
        or priority not in PRIORITY_RANGE
    ):
        raise error(
            f"priority must be an integer from -100 to 100 (lower runs first), not {priority!r}"
        )


def check_max_attempts(value: object, error: type[Exception]) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10_000:
        raise error(f"max_attempts must be an integer from 1 to 10000, not {value!r}")


def check_partition_options(partition_key: object, expires_at: object, at: datetime | None) -> None:
    """Validate the ordering and deadline options of one job (rota.ops)."""
    if partition_key is not None and (
        not isinstance(partition_key, str)
        or not partition_key
        or len(partition_key) > MAX_KEY_LENGTH
    ):
        raise ArgumentsError(
            f"partition_key must be a non-empty string of at most {MAX_KEY_LENGTH} chars"
        )
    if partition_key is not None:
        check_text(partition_key, "partition_key")
    if expires_at is not None:
        if not isinstance(expires_at, datetime):
            raise ArgumentsError(f"expires_at= must be a datetime, not {type(expires_at).__name__}")
        if expires_at.tzinfo is None:
            raise ArgumentsError("expires_at= must be timezone-aware (e.g. datetime.now(UTC))")
        if at is not None and expires_at <= at:
            raise ArgumentsError("expires_at= must be later than at=: the job could never start")


def check_tenant(tenant: object) -> None:
    """A tenant is a short name (the same rules as a queue name)."""
    if tenant is not None:
        check_queue_name(tenant, ArgumentsError)


def _takes_context(func: Callable[..., Any]) -> bool:
    params = list(inspect.signature(func).parameters.values())
    if not params:
        return False
    first = params[0]
    annotation = first.annotation
    named = first.name in ("ctx", "context")
    typed = annotation is not first.empty and (
        getattr(annotation, "__name__", None) == "Context"
        or (isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "Context")
    )
    return named or typed


class Task(Generic[P, R]):
    """A function registered with an App. Call it directly to run it in-process;
    `.enqueue(...)` to run it on a worker."""

    def __init__(self, app: TaskOwner, func: Callable[P, R], name: str, policy: TaskPolicy) -> None:
        self.app = app
        self.func = func
        self.name = name
        self.policy = policy
        self.is_async = inspect.iscoroutinefunction(func)
        self.takes_context = _takes_context(func)
        self.args_model = ArgsModel(func, skip_first=self.takes_context, reserved=ENQUEUE_OPTIONS)
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", name)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.policy.queue}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    # --- enqueue ------------------------------------------------------------------------

    def enqueue(
        self,
        *,
        key: str | None = None,
        at: datetime | None = None,
        delay: float | None = None,
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        partition_key: str | None = None,
        expires_at: datetime | None = None,
        requires: Iterable[str] | None = None,
        tenant: str | None = None,
        conn: Any = None,
        **args: Any,
    ) -> Job:
        """Store one job. With `conn=` (a psycopg or sqlite3 connection in an open
        transaction) the job commits or rolls back with the caller's own writes.
        Jobs with the same `partition_key` (in one queue) run one at a time, in enqueue
        order; a job not started by `expires_at` is dead-lettered as expired.
        `requires` replaces the task's required labels for this job; `tenant` names who
        the job is for (fair queues, per-tenant caps)."""
        row = self.build(
            args,
            key=key,
            at=at,
            delay=delay,
            priority=priority,
            queue=queue,
            max_attempts=max_attempts,
            partition_key=partition_key,
            expires_at=expires_at,
            requires=requires,
            tenant=tenant,
        )
        return self.app._insert([row], conn=conn, tasks=[self])[0]

    def enqueue_many(
        self,
        args_list: Iterable[Mapping[str, Any]],
        *,
        at: datetime | None = None,
        delay: float | None = None,
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        partition_key: str | None = None,
        expires_at: datetime | None = None,
        requires: Iterable[str] | None = None,
        tenant: str | None = None,
        conn: Any = None,
    ) -> list[Job]:
        """Store many jobs in one round trip; all are validated before any is written."""
        if isinstance(args_list, Mapping | str | bytes):
            raise ArgumentsError("enqueue_many takes a list of argument dicts")
        fields = self._fields(
            key=None,
            at=at,
            delay=delay,
            priority=priority,
            queue=queue,
            max_attempts=max_attempts,
            partition_key=partition_key,
            expires_at=expires_at,
            requires=requires,
            tenant=tenant,
        )
        rows = []
        for i, args in enumerate(args_list):
            if not isinstance(args, Mapping):
                raise ArgumentsError(f"enqueue_many item {i} is {type(args).__name__}, not a dict")
            try:
                args_json = self._args_json(dict(args))
            except ArgumentsError as exc:
                raise ArgumentsError(f"enqueue_many item {i}: {exc}") from None
            rows.append(JobInsert.restore({**fields, "args_json": args_json}))
        if not rows:
            return []
        return self.app._insert(rows, conn=conn, tasks=[self] * len(rows))

    def build(
        self,
        args: dict[str, Any],
        *,
        key: str | None = None,
        at: datetime | None = None,
        delay: float | None = None,
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        meta: dict[str, Any] | None = None,
        partition_key: str | None = None,
        expires_at: datetime | None = None,
        requires: Iterable[str] | None = None,
        tenant: str | None = None,
    ) -> JobInsert:
        """Validate one job's arguments and options into the row the driver writes.

        `meta` is for rota's own features (a batch index, a workflow step, a trace
        context): it travels with the job and is read back as `ctx.meta`."""
        args_json = self._args_json(args)
        fields = self._fields(
            key=key,
            at=at,
            delay=delay,
            priority=priority,
            queue=queue,
            max_attempts=max_attempts,
            partition_key=partition_key,
            expires_at=expires_at,
            requires=requires,
            tenant=tenant,
        )
        fields["args_json"] = args_json
        if meta:
            fields["meta_json"] = encode(meta, what=f"metadata of {self.name}")
        return JobInsert.restore(fields)

    def _args_json(self, args: dict[str, Any]) -> str:
        """The stored form of one job's arguments: validated, JSON, sealed if encrypted."""
        stored = self.args_model.dump(self.name, args)
        args_json = encode(
            stored, what=f"arguments of {self.name}", limit=self.app.max_payload_bytes
        )
        if self.policy.encrypted:
            sealer = self.app.sealer
            if sealer is None:
                raise ConfigurationError(
                    f"{self.name} stores its arguments encrypted, but no encryption feature "
                    "is plugged into this App (rota.App plugs it in)"
                )
            args_json = sealer.seal(args_json)
        return args_json

    def _fields(
        self,
        *,
        key: str | None,
        at: datetime | None,
        delay: float | None,
        priority: int | None,
        queue: str | None,
        max_attempts: int | None,
        partition_key: str | None,
        expires_at: datetime | None,
        requires: Iterable[str] | None,
        tenant: str | None,
    ) -> dict[str, Any]:
        """The options of a job, validated, as JobInsert fields (all but the arguments):
        checked once for a whole enqueue_many."""
        if queue is not None:
            check_queue_name(queue, ArgumentsError)
        if priority is not None:
            check_priority(priority, ArgumentsError)
        if max_attempts is not None:
            check_max_attempts(max_attempts, ArgumentsError)
        if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH):
            raise ArgumentsError(
                f"key must be a non-empty string of at most {MAX_KEY_LENGTH} chars"
            )
        if key is not None:
            # The same on both dialects: PostgreSQL refuses a NUL that SQLite would keep.
            check_text(key, "key")
        if at is not None and delay is not None:
            raise ArgumentsError("pass at= or delay=, not both")
        if at is not None:
            if not isinstance(at, datetime):
                raise ArgumentsError(f"at= must be a datetime, not {type(at).__name__}")
            if at.tzinfo is None:
                raise ArgumentsError("at= must be timezone-aware (e.g. datetime.now(UTC))")
        if delay is not None and (
            not isinstance(delay, int | float)
            or isinstance(delay, bool)
            or not math.isfinite(delay)
            or delay < 0
        ):
            raise ArgumentsError(f"delay= must be a finite number of seconds >= 0, not {delay!r}")
        check_partition_options(partition_key, expires_at, at)
        needs = (
            self.policy.requires
            if requires is None
            else check_labels(requires, "requires", ArgumentsError)
        )
        check_tenant(tenant)
        return {
            "task": self.name,
            "queue": queue or self.policy.queue,
            "priority": self.policy.priority if priority is None else priority,
            "max_attempts": self.policy.max_attempts if max_attempts is None else max_attempts,
            "key": key,
            "at": at,
            "delay": None if delay is None else float(delay),
            "key_ttl": self.policy.key_ttl,
            "key_states": self._key_states,
            "partition_key": partition_key,
            "expires_at": expires_at,
            "requires": needs or None,
            "tenant": tenant,
        }

    @functools.cached_property
    def _key_states(self) -> tuple[str, ...] | None:
        states = self.policy.key_states
        return None if states is None else tuple(sorted(str(s) for s in states))
