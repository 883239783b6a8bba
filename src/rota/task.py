"""Task: a registered function with its policy, and the enqueue API that validates
arguments at the door and writes jobs through the app's driver."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from rota.context import Context
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

    async def _insert_async(
        self, rows: list[JobInsert], *, conn: Any, tasks: list[Task[Any, Any]]
    ) -> list[Job]: ...


P = ParamSpec("P")
Q = ParamSpec("Q")
R = TypeVar("R")

# Options enqueue() accepts beside the task's own arguments. A task may use these names for
# its parameters; it then takes them through `task.options(...).enqueue(...)` only.
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


def takes_context(func: Callable[..., Any]) -> bool:
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


# The name it had before it was public (kept for code written against it).
_takes_context = takes_context


class Task(Generic[P, R]):
    """A function registered with an App. Call it directly to run it in-process;
    `.enqueue(...)` to run it on a worker."""

    def __init__(self, app: TaskOwner, func: Callable[P, R], name: str, policy: TaskPolicy) -> None:
        self.app = app
        self.func = func
        self.name = name
        self.policy = policy
        # The option fields of a job that sets no option: made by the first such enqueue.
        self._default_fields: dict[str, Any] | None = None
        self.is_async = inspect.iscoroutinefunction(func)
        self.takes_context = takes_context(func)
        self.args_model = ArgsModel(func, skip_first=self.takes_context, reserved=frozenset())
        # Parameters named like an enqueue option: `.enqueue(key=...)` would be ambiguous.
        self.shadowed = frozenset(self.args_model.names) & ENQUEUE_OPTIONS
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", name)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.policy.queue}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    # --- enqueue ------------------------------------------------------------------------

    def options(
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
    ) -> TaskOptions[P, R]:
        """The enqueue options of a job, apart from its arguments: the handle's
        `.enqueue(*args, **kwargs)` takes exactly the task's parameters (type-checked
        by mypy against the function's signature), so a parameter named `key`, `queue`,
        `delay` or `tenant` is passed like any other:

            send.options(key="welcome-42", delay=60).enqueue(user_id=42, queue="mail")
        """
        return TaskOptions(
            self,
            {
                "key": key,
                "at": at,
                "delay": delay,
                "priority": priority,
                "queue": queue,
                "max_attempts": max_attempts,
                "partition_key": partition_key,
                "expires_at": expires_at,
                "requires": requires,
                "tenant": tenant,
            },
            conn,
        )

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
        the job is for (fair queues, per-tenant caps).

        Arguments and options share one namespace here: `task.options(...).enqueue(...)`
        keeps them apart and is type-checked."""
        if self.shadowed:  # most tasks have no parameter named like an option
            self._check_shadowed(
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
                conn=conn,
            )
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

    async def enqueue_async(
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
        """`enqueue` without blocking the event loop: on PostgreSQL through psycopg's
        AsyncConnection (`conn=` takes the caller's async connection, or an SQLAlchemy
        AsyncSession), on SQLite in a worker thread."""
        if self.shadowed:  # most tasks have no parameter named like an option
            self._check_shadowed(
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
                conn=conn,
            )
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
        return (await self.app._insert_async([row], conn=conn, tasks=[self]))[0]

    def _check_shadowed(self, **given: Any) -> None:
        """Refuse an option whose name is also one of the task's parameters: the caller
        may have meant the argument (`task.options(...).enqueue(...)` tells them apart)."""
        clash = sorted(name for name in self.shadowed if given[name] is not None)
        if clash:
            raise ArgumentsError(
                f"{self.name} has parameters named like enqueue options ({', '.join(clash)}): "
                f"enqueue it with {self.__name__}.options(...).enqueue(...), which keeps "
                "arguments and options apart"
            )

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
        rows = self._rows_many(
            args_list,
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
        if not rows:
            return []
        return self.app._insert(rows, conn=conn, tasks=[self] * len(rows))

    async def enqueue_many_async(
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
        """`enqueue_many` without blocking the event loop (see `enqueue_async`)."""
        rows = self._rows_many(
            args_list,
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
        if not rows:
            return []
        return await self.app._insert_async(rows, conn=conn, tasks=[self] * len(rows))

    def _rows_many(
        self,
        args_list: Iterable[Mapping[str, Any]],
        *,
        key: str | None = None,
        at: datetime | None,
        delay: float | None,
        priority: int | None,
        queue: str | None,
        max_attempts: int | None,
        partition_key: str | None,
        expires_at: datetime | None,
        requires: Iterable[str] | None,
        tenant: str | None,
    ) -> list[JobInsert]:
        if key is not None:
            raise ArgumentsError("one idempotency key cannot name many jobs: drop key=")
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
        return JobInsert.restore_each(fields, self._each_args(args_list))

    def _each_args(self, args_list: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
        """The stored arguments of each item of an `enqueue_many`, validated in turn."""
        for i, args in enumerate(args_list):
            if not isinstance(args, Mapping):
                raise ArgumentsError(f"enqueue_many item {i} is {type(args).__name__}, not a dict")
            try:
                stored, args_json = self._stored_args(dict(args))
            except ArgumentsError as exc:
                raise ArgumentsError(f"enqueue_many item {i}: {exc}") from None
            yield {"args_json": args_json, "args": stored}

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
        stored, args_json = self._stored_args(args)
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
        fields["args"] = stored
        if meta:
            fields["meta_json"] = encode(meta, what=f"metadata of {self.name}")
        return JobInsert.restore(fields)

    def _stored_args(self, args: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """One job's arguments as stored: validated, as JSON values and as JSON text,
        sealed if encrypted (then only the text: the values stay with the caller)."""
        stored = self.args_model.dump(self.name, args)
        text = self._seal(stored)
        return (None if self.policy.encrypted else stored), text

    def _seal(self, stored: dict[str, Any]) -> str:
        """`stored` (validated JSON values) as the text written to the database."""
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
        defaults = (
            key is None
            and at is None
            and delay is None
            and priority is None
            and queue is None
            and max_attempts is None
            and partition_key is None
            and expires_at is None
            and requires is None
            and tenant is None
        )
        if defaults and self._default_fields is not None:
            return dict(self._default_fields)  # most enqueues: the task's own options
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
        fields = {
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
        if defaults:
            self._default_fields = dict(fields)  # the policy is frozen: made once
        return fields

    @functools.cached_property
    def _key_states(self) -> tuple[str, ...] | None:
        states = self.policy.key_states
        return None if states is None else tuple(sorted(str(s) for s in states))


class ContextTask(Task[Concatenate[Context, P], R]):
    """A task whose function takes the job's `Context` first (`def f(ctx, ...)`). The
    same as Task at run time; for a type checker, `.options()` leaves the context out
    of the arguments `.enqueue()` takes."""

    def options(  # type: ignore[override]  # the enqueued arguments lack the context
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
    ) -> TaskOptions[P, R]:
        return super().options(  # type: ignore[return-value]
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
            conn=conn,
        )


class TaskOptions(Generic[P, R]):
    """A task with its enqueue options set (`task.options(...)`): `.enqueue()` takes the
    task's own arguments, positional or by name, and nothing else."""

    __slots__ = ("_conn", "_options", "task")

    def __init__(self, task: Task[Any, R], options: dict[str, Any], conn: Any) -> None:
        # Checked now, so a bad option fails where it is written.
        task._fields(**options)
        self.task = task
        self._options = options
        self._conn = conn

    def __repr__(self) -> str:
        set_ = {k: v for k, v in self._options.items() if v is not None}
        return f"<TaskOptions {self.task.name} {set_}>"

    def _args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        names = self.task.args_model.names
        if len(args) > len(names):
            raise ArgumentsError(
                f"{self.task.name} takes {len(names)} arguments, {len(args)} were given"
            )
        bound = dict(zip(names, args, strict=False))
        for name in kwargs:
            if name in bound:
                raise ArgumentsError(f"{self.task.name} got argument {name!r} twice")
        bound.update(kwargs)
        return bound

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Store one job with these arguments (see Task.enqueue for the options)."""
        row = self.task.build(self._args(args, kwargs), **self._options)
        return self.task.app._insert([row], conn=self._conn, tasks=[self.task])[0]

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """`enqueue` without blocking the event loop (see Task.enqueue_async)."""
        row = self.task.build(self._args(args, kwargs), **self._options)
        jobs = await self.task.app._insert_async([row], conn=self._conn, tasks=[self.task])
        return jobs[0]

    def enqueue_many(self, args_list: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Store one job per argument dict, with these options, in one round trip."""
        rows = self.task._rows_many(args_list, **self._options)
        if not rows:
            return []
        return self.task.app._insert(rows, conn=self._conn, tasks=[self.task] * len(rows))

    async def enqueue_many_async(self, args_list: Iterable[Mapping[str, Any]]) -> list[Job]:
        """`enqueue_many` without blocking the event loop."""
        rows = self.task._rows_many(args_list, **self._options)
        if not rows:
            return []
        return await self.task.app._insert_async(
            rows, conn=self._conn, tasks=[self.task] * len(rows)
        )
