"""App, the engine's: settings, the task registry, the enqueue/inspect API and the feature
registry; it wires the driver that every other part (worker, CLI, services) reads and
writes through. `rota.App` is this App with every standard feature plugged in
(rota.standard); the engine itself runs with none."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Concatenate, ParamSpec, Protocol, TypeVar, overload

from rota import waiter
from rota.context import Context
from rota.drivers import Driver, open_driver
from rota.drivers.base import CLAIM_QUERIES, JobFilter, JobInsert, QueueReport
from rota.drivers.url import DatabaseURL
from rota.drivers.url import from_environment as url_from_environment
from rota.drivers.url import parse as parse_url
from rota.errors import (
    ArgumentsError,
    ConfigurationError,
    SchemaError,
    TaskDefinitionError,
    UnknownTaskError,
)
from rota.job import Job, JobState
from rota.labels import check_labels, check_queue_name
from rota.maintenance.service import PeriodicService
from rota.payload import DEFAULT_MAX_PAYLOAD_BYTES, ArgsSealer, check_text
from rota.retry import Backoff
from rota.settings import WorkerSettings
from rota.task import ContextTask, Task, TaskPolicy, takes_context
from rota.telemetry.metrics import ProcessMetrics
from rota.telemetry.tracing import traced_insert, traced_insert_async
from rota.waiter import Waiters


@dataclass(frozen=True)
class ServiceContext:
    """What a feature's services are built from, when a worker starts."""

    worker_id: str
    settings: WorkerSettings
    driver: Driver


class Feature:
    """Base class of a capability that plugs into an App. Subclasses set `name` and
    override the hooks they need; every hook has a harmless default.

    `claims` maps a queue mode to the named claim statement for it ("fair" ->
    "job_claim_fair"); the engine brings "plain", and a queue's stored configuration says
    which mode it is in. `commands` and `routes` name, as "package.module:attribute", what
    the interfaces
    mount for this feature: a click command for `rota` (or a function that adds commands
    to the root group), and a `register(api)` function of the HTTP API. They are names,
    not imports, so a feature never depends on the interfaces that show it."""

    name: ClassVar[str] = ""
    commands: ClassVar[tuple[str, ...]] = ()
    routes: ClassVar[tuple[str, ...]] = ()
    # The queue modes this feature brings, each with its named claim statement: a queue
    # whose stored configuration puts it in that mode is claimed with it.
    claims: ClassVar[Mapping[str, str]] = {}

    def __init__(self) -> None:
        self._app: App | None = None

    def __repr__(self) -> str:
        return f"<rota feature {self.name}>"

    @property
    def app(self) -> App:
        if self._app is None:
            raise ConfigurationError(f"the {self.name} feature is not plugged into an App")
        return self._app

    def attach(self, app: App) -> None:
        """Called once by `App.plug`. Overrides call super() first, then set any hooks
        on the app (e.g. an ArgsSealer)."""
        if self._app is not None and self._app is not app:
            raise ConfigurationError(f"the {self.name} feature is plugged into another App")
        self._app = app

    def prepare(self) -> None:
        """Store what the application's code declares (schedules, subscriptions). Called
        by `app.migrate()` and when a worker starts; blocking, and safe to repeat."""

    def services(self, context: ServiceContext) -> Sequence[PeriodicService]:
        """The periodic services this feature needs on a worker: leader-only ones (their
        `leader_only` is True) run on the elected leader alone."""
        return ()

    def database_changed(self) -> None:
        """The app was pointed at another database (`rota ... --app X --database-url Y`):
        forget anything cached from the old one."""


P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Feature)


class TaskDecorator(Protocol):
    """What `@app.task(...)` returns: a function taking the job's Context first becomes a
    ContextTask (its enqueue arguments leave the context out), any other a Task."""

    @overload
    def __call__(self, func: Callable[Concatenate[Context, P], R], /) -> ContextTask[P, R]: ...

    @overload
    def __call__(self, func: Callable[P, R], /) -> Task[P, R]: ...


class App:
    """One rota application: a database and the tasks that run against it.

    `url` is `sqlite:///path.db` or `postgresql://...`; by default $ROTA_DATABASE_URL.
    """

    def __init__(
        self,
        url: str | DatabaseURL | None = None,
        *,
        features: Iterable[Feature] = (),
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        pool_size: int = 4,
    ) -> None:
        # The URL, or $ROTA_DATABASE_URL, or the file named by $ROTA_DATABASE_URL_FILE.
        self.url = parse_url(url) if url is not None else url_from_environment()
        if not isinstance(max_payload_bytes, int) or max_payload_bytes < 1:
            raise TaskDefinitionError("max_payload_bytes must be a positive integer")
        self.max_payload_bytes = max_payload_bytes
        self.pool_size = pool_size
        self.tasks: dict[str, Task[Any, Any]] = {}
        self._driver: Driver | None = None
        # Set by rota.testing.inline(): enqueue runs the task at once, in-process.
        self._inline_runner: Callable[[list[Job], Any], None] | None = None
        # Set by a feature that seals arguments at rest (the encryption feature).
        self.sealer: ArgsSealer | None = None
        self._features: dict[type[Feature], Feature] = {}
        self._waiters: Waiters | None = None
        for feature in features:
            self.plug(feature)

    def __repr__(self) -> str:
        return f"<rota.App {self.url.redacted()} tasks={len(self.tasks)}>"

    @property
    def driver(self) -> Driver:
        if self._driver is None:
            self._driver = open_driver(self.url, pool_size=self.pool_size)
        return self._driver

    def close(self) -> None:
        if self._waiters is not None:
            self._waiters.close()
            self._waiters = None
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    async def aclose(self) -> None:
        """close() from async code (also closes enqueue_async's connections on their loop)."""
        if self._waiters is not None:
            waiters, self._waiters = self._waiters, None
            await asyncio.to_thread(waiters.close)
        if self._driver is not None:
            driver, self._driver = self._driver, None
            await driver.aclose()

    @functools.cached_property
    def metrics(self) -> ProcessMetrics:
        """This process's job counters and timings (served by `rota worker --metrics-port`)."""
        return ProcessMetrics()

    # --- features -----------------------------------------------------------------------

    def plug(self, feature: Feature) -> None:
        """Plug a feature in: it registers its hooks and becomes part of every worker."""
        if not isinstance(feature, Feature):
            raise ConfigurationError(f"{feature!r} is not a rota.plugin.Feature")
        kind = type(feature)
        if kind in self._features or any(f.name == feature.name for f in self._features.values()):
            raise ConfigurationError(f"the {feature.name} feature is already plugged in")
        feature.attach(self)
        self._features[kind] = feature

    def claim_queries(self) -> dict[str, str]:
        """The named claim statement of each queue mode the engine and the plugged
        features know (a mode no plugged feature brings cannot be claimed)."""
        found = dict(CLAIM_QUERIES)
        for feature in self._features.values():
            found.update(feature.claims)
        return found

    @property
    def features(self) -> Mapping[str, Feature]:
        """The plugged features by name, in the order they were plugged."""
        return {f.name: f for f in self._features.values()}

    def feature(self, kind: type[F]) -> F:
        """The plugged feature of this type, or a ConfigurationError naming it."""
        found = self._features.get(kind)
        if found is None:
            for candidate in self._features.values():
                if isinstance(candidate, kind):
                    return candidate
            raise ConfigurationError(
                f"this App has no {kind.name or kind.__name__} feature plugged in "
                "(rota.App plugs in every standard feature)"
            )
        return found  # type: ignore[return-value]

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- tasks --------------------------------------------------------------------------

    @overload
    def task(self, func: Callable[Concatenate[Context, P], R], /) -> ContextTask[P, R]: ...

    @overload
    def task(self, func: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = 20,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        permanent: Sequence[type[BaseException]] = (),
        key_ttl: float | None = 24 * 3600.0,
        key_states: Iterable[JobState | str] | None = None,
        encrypted: bool = False,
        requires: Iterable[str] = (),
    ) -> TaskDecorator: ...

    def task(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = 20,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        permanent: Sequence[type[BaseException]] = (),
        key_ttl: float | None = 24 * 3600.0,
        key_states: Iterable[JobState | str] | None = None,
        encrypted: bool = False,
        requires: Iterable[str] = (),
    ) -> Any:
        """Register a task: `@app.task` or `@app.task(queue="tickets", max_attempts=5)`."""
        policy = TaskPolicy(
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            backoff=backoff or Backoff(),
            timeout=timeout,
            permanent=tuple(permanent),
            key_ttl=key_ttl,
            key_states=None if key_states is None else frozenset(_state(s) for s in key_states),
            encrypted=bool(encrypted),
            requires=check_labels(requires, "requires", TaskDefinitionError),
        )

        def register(fn: Callable[..., Any]) -> Task[Any, Any]:
            if not callable(fn):
                raise TaskDefinitionError(f"@app.task decorates a function, not {fn!r}")
            task_name = check_text(name or default_task_name(fn), "task name", TaskDefinitionError)
            if task_name in self.tasks and self.tasks[task_name].func is not fn:
                raise TaskDefinitionError(f"a task named {task_name!r} is already registered")
            # The same at run time; the subclass only tells a type checker about ctx.
            kind = ContextTask if takes_context(fn) else Task
            task: Task[Any, Any] = kind(self, fn, task_name, policy)
            self.tasks[task_name] = task
            return task

        return register(func) if func is not None else register

    def get_task(self, name: str) -> Task[Any, Any]:
        try:
            return self.tasks[name]
        except KeyError:
            known = ", ".join(sorted(self.tasks)) or "none registered"
            close = [t for t in self.tasks if t.rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1]]
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownTaskError(f"unknown task {name!r}.{hint} Known tasks: {known}") from None

    # --- enqueue ------------------------------------------------------------------------

    def enqueue(self, task_name: str, args: dict[str, Any] | None = None, **options: Any) -> Job:
        """Enqueue by task name (what the CLI and HTTP API use)."""
        if args is not None and not isinstance(args, dict):
            raise ArgumentsError(f"args must be a JSON object (a dict), not {type(args).__name__}")
        return self.get_task(task_name).options(**options).enqueue(**(args or {}))

    def _insert(
        self, rows: list[JobInsert], *, conn: Any, tasks: list[Task[Any, Any]]
    ) -> list[Job]:
        driver = self.driver
        # A producer span around the insert when OpenTelemetry is set up (else a plain call).
        jobs = traced_insert(rows, lambda traced: driver.job_insert_many(traced, conn=conn))
        self.metrics.jobs_enqueued(jobs)
        if self._inline_runner is not None:
            self._inline_runner(jobs, conn)
        return jobs

    async def _insert_async(
        self, rows: list[JobInsert], *, conn: Any, tasks: list[Task[Any, Any]]
    ) -> list[Job]:
        """`_insert` without blocking the loop: the driver's async insert (PostgreSQL's
        AsyncConnection, or a thread on SQLite), the same rows and the same SQL."""
        if self._inline_runner is not None and conn is None:
            # Inline mode runs the task in this thread, as the sync path does.
            return await asyncio.to_thread(self._insert, rows, conn=conn, tasks=tasks)
        driver = self.driver
        jobs = await traced_insert_async(
            rows, lambda traced: driver.job_insert_many_async(traced, conn=conn)
        )
        self.metrics.jobs_enqueued(jobs)
        if self._inline_runner is not None:
            # In the caller's (async) transaction: the runner says why it cannot run it
            # yet, as it does for the sync path (the caller's connection is not ours).
            self._inline_runner(jobs, conn)
        return jobs

    # --- your own transactions and the inbox ------------------------------------------------

    def transaction(self) -> AbstractContextManager[Any]:
        """A connection of the app's database in a transaction that commits when the
        block exits cleanly (psycopg on PostgreSQL, sqlite3 on SQLite). Pass it as
        `conn=` to enqueue, or to `inbox_record`."""
        return self.driver.transaction()

    def inbox_record(self, conn: Any, source: str, message_id: str) -> bool:
        """Record an outside message (a broker delivery) as handled, in `conn`'s
        transaction. False means it was recorded before: skip the effect.

            with app.transaction() as conn:
                if app.inbox_record(conn, "rabbitmq:orders", message_id):
                    apply(conn, message)
        """
        if not isinstance(source, str) or not source or len(source) > 200:
            raise ArgumentsError("inbox source must be a non-empty string (at most 200 chars)")
        if not isinstance(message_id, str) or not message_id or len(message_id) > 512:
            raise ArgumentsError("message_id must be a non-empty string (at most 512 chars)")
        if conn is None:
            raise ArgumentsError("inbox_record needs conn=: the transaction of the effect")
        return self.driver.inbox_record(conn, source, message_id)

    # --- inspect and act ----------------------------------------------------------------

    def get_job(self, job_id: int) -> Job | None:
        return self.driver.job_get(job_id)

    def list_jobs(
        self,
        *,
        state: JobState | str | Sequence[JobState | str] | None = None,
        queue: str | None = None,
        task: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Job]:
        if state is None:
            states: tuple[JobState, ...] = ()
        elif isinstance(state, str):
            states = (_state(state),)
        else:
            states = tuple(_state(s) for s in state)
        if not 1 <= limit <= 10_000:
            raise ArgumentsError("limit must be from 1 to 10000")
        return self.driver.job_list(
            JobFilter(states=states, queue=queue, task=task, limit=limit, before_id=before_id)
        )

    def wait(self, job: Job | int, *, timeout: float | None = None) -> Any:
        """Block until the job finishes and return its result; raise JobFailedError
        (dead-lettered), JobCancelledError, or WaitTimeoutError after `timeout` seconds
        (the job goes on). Wakes on LISTEN/NOTIFY (PostgreSQL) or the change watcher
        (SQLite), and only jobs someone waits for send a notification:

            job = send_invoice.enqueue(order_id=42)
            pdf_url = app.wait(job, timeout=30)
        """
        return waiter.wait(self._waiter_hub(), self.driver, _job_id(job), _timeout(timeout))

    async def wait_async(self, job: Job | int, *, timeout: float | None = None) -> Any:
        """`wait` without blocking the event loop."""
        hub = self._waiter_hub()
        return await waiter.wait_async(hub, self.driver, _job_id(job), _timeout(timeout))

    def _waiter_hub(self) -> Waiters:
        if self._waiters is None:
            self._waiters = Waiters(self.driver)
        return self._waiters

    def cancel_job(self, job_id: int) -> Job:
        """Cancel a waiting job; ask a running one to stop (it sees `ctx.cancelled`)."""
        return self.driver.job_cancel(job_id)

    def retry_job(self, job_id: int) -> Job:
        """Run a finished, discarded or waiting job again now."""
        return self.driver.job_retry(job_id)

    def list_queues(self) -> list[QueueReport]:
        return self.driver.queue_list()

    def pause_queue(self, name: str) -> None:
        check_queue_name(name, ArgumentsError)
        # An operator's pause is one hold among a window's and a breaker's (rota.ops.holds).
        self.driver.queue_hold_put(name, "manual", "paused by an operator", None)

    def resume_queue(self, name: str) -> None:
        """Lift the operator's pause; a closed window or an open breaker still holds it."""
        check_queue_name(name, ArgumentsError)
        self.driver.queue_hold_drop(name, "manual")

    # --- schema -------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations (idempotent; concurrent runs are serialised), then let
        each feature store what the code declares (e.g. `@app.cron` schedules)."""
        applied = self.driver.schema_migrate()
        self.prepare()
        return applied

    def prepare(self) -> None:
        """Store what the application's code declares, feature by feature (schedules,
        event subscriptions): what `app.migrate()` and every worker's start do."""
        for feature in self._features.values():
            feature.prepare()

    def schema_version(self) -> int:
        return self.driver.schema_version()

    def check_schema(self) -> None:
        """Raise SchemaError, naming the fix, unless the schema is exactly current."""
        current = self.driver.schema_version()
        latest = self.driver.latest_schema_version
        if current < latest:
            raise SchemaError(
                f"the database schema is at version {current} but this rota needs {latest}: "
                "run `rota migrate`"
            )
        if current > latest:
            raise SchemaError(
                f"the database schema is at version {current}, newer than this rota knows "
                f"({latest}): upgrade rota on this worker"
            )


def _job_id(job: Job | int) -> int:
    if isinstance(job, Job):
        return job.id
    if isinstance(job, int) and not isinstance(job, bool):
        return job
    raise ArgumentsError(f"wait() takes a Job or a job id, not {type(job).__name__}")


def _timeout(timeout: float | None) -> float | None:
    if timeout is not None and (
        not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout < 0
    ):
        raise ArgumentsError(f"timeout= must be a number of seconds >= 0 or None, not {timeout!r}")
    return timeout


def _state(value: JobState | str) -> JobState:
    try:
        return JobState(value)
    except ValueError:
        known = ", ".join(s.value for s in JobState)
        raise ArgumentsError(f"unknown job state {value!r}; known: {known}") from None


def default_task_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "task"
    if module == "__main__":
        # `python -m pkg.mod` and a worker importing pkg.mod must agree on the name.
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        module = spec.name if spec is not None else module
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"
