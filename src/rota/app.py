"""App: settings, the task registry and the enqueue/inspect API; it wires the driver
that every other part (worker, CLI, maintenance) reads and writes through."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from rota.auth import TokenRegistry
from rota.batches.registry import BatchRegistry
from rota.batches.status import BatchStatus
from rota.drivers import Driver, open_driver
from rota.drivers.base import (
    JobFilter,
    JobInsert,
    ManualRun,
    QueueReport,
    ScheduleRecord,
    ScheduleRun,
    ScheduleRunFilter,
)
from rota.drivers.url import DatabaseURL
from rota.drivers.url import from_environment as url_from_environment
from rota.drivers.url import parse as parse_url
from rota.errors import (
    ArgumentsError,
    ScheduleError,
    ScheduleNotFoundError,
    SchemaError,
    TaskDefinitionError,
    UnknownTaskError,
)
from rota.job import Job, JobState
from rota.observe.metrics import ProcessMetrics
from rota.observe.tracing import traced_insert
from rota.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_text
from rota.retry import Backoff
from rota.routing.labels import check_labels
from rota.schedules.schedule import Schedule, spec_of
from rota.schedules.spec import ConcurrencyPolicy, ScheduleSpec, check_run_name, parse_choice
from rota.schedules.ticks import DstPolicy
from rota.task import Task, TaskPolicy, check_queue_name

if TYPE_CHECKING:
    from rota.drivers.base import EventRecord
    from rota.events import EventBus
    from rota.ops.dlq import DeadLetters
    from rota.ops.queues import QueueControls
    from rota.routing.api import Routing
    from rota.sagas import SagaRegistry
    from rota.schedules.schedule import Schedule as _Schedule
    from rota.tenants.api import Tenants
    from rota.workflows.definition import Workflow
    from rota.workflows.registry import WorkflowRegistry

P = ParamSpec("P")
R = TypeVar("R")


class App:
    """One rota application: a database and the tasks that run against it.

    `url` is `sqlite:///path.db` or `postgresql://...`; by default $ROTA_DATABASE_URL.
    """

    def __init__(
        self,
        url: str | DatabaseURL | None = None,
        *,
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
        self.schedules: dict[str, Schedule] = {}
        self._driver: Driver | None = None
        # Set by rota.testing.inline(): enqueue runs the task at once, in-process.
        self._inline_runner: Callable[[list[Job], Any], None] | None = None

    def __repr__(self) -> str:
        return f"<rota.App {self.url.redacted()} tasks={len(self.tasks)}>"

    @property
    def driver(self) -> Driver:
        if self._driver is None:
            self._driver = open_driver(self.url, pool_size=self.pool_size)
        return self._driver

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    @functools.cached_property
    def metrics(self) -> ProcessMetrics:
        """This process's job counters and timings (served by `rota worker --metrics-port`)."""
        return ProcessMetrics()

    @functools.cached_property
    def tokens(self) -> TokenRegistry:
        """API tokens for the HTTP API: `app.tokens.create("ops", "operator")`."""
        return TokenRegistry(self)

    @functools.cached_property
    def sagas(self) -> SagaRegistry:
        """Sagas: `app.sagas.register(saga)`, `.start(saga, key="order-42")`, `.get(key)`."""
        from rota.sagas import SagaRegistry

        return SagaRegistry(self)

    @functools.cached_property
    def events(self) -> EventBus:
        """Events: `app.events.publish(...)`, `.replay(...)`; see `app.on` and `app.publish`."""
        from rota.events import EventBus

        return EventBus(self)

    def on(self, event: str, **policy: Any) -> Callable[[Callable[..., Any]], Task[Any, Any]]:
        """Subscribe a function to an event: `@app.on("user.signed_up", max_attempts=5)`.
        Each publish gives it one job (its own retries and dead letters) and a rota.Event."""
        return self.events.on(event, **policy)

    def publish(self, name: str, payload: Any = None, **options: Any) -> EventRecord:
        """Publish an event (`version=`, idempotency `key=`, your transaction `conn=`):
        one job per subscriber, in the same transaction. Returns the event with its id."""
        return self.events.publish(name, payload, **options)

    @functools.cached_property
    def dlq(self) -> DeadLetters:
        """Dead letters and governed replay: `app.dlq.replay(task=..., reason=...)`."""
        from rota.ops.dlq import DeadLetters

        return DeadLetters(self)

    @functools.cached_property
    def queues(self) -> QueueControls:
        """Queue controls: `app.queues.configure("mail", global_limit=3, rate=(100, 60))`."""
        from rota.ops.queues import QueueControls

        return QueueControls(self)

    @functools.cached_property
    def routing(self) -> Routing:
        """Routing: `app.routing.unroutable()` (jobs no live worker can run), `.workers()`."""
        from rota.routing.api import Routing

        return Routing(self)

    @functools.cached_property
    def tenants(self) -> Tenants:
        """Tenants: `app.tenants.set_fair("reports")`, `.configure("acme", max_running=5)`."""
        from rota.tenants.api import Tenants

        return Tenants(self)

    @functools.cached_property
    def batches(self) -> BatchRegistry:
        """Batches with Kubernetes Job semantics: `app.batches.get("shards")`."""
        return BatchRegistry(self)

    def batch(self, task: Task[Any, Any] | str, **options: Any) -> BatchStatus:
        """Start a batch: `app.batch(resize, items=[...], parallelism=4)` or
        `app.batch(shard, completions=8, indexed=True)`; see docs/batches.md."""
        return self.batches.create(task, **options)

    @functools.cached_property
    def workflows(self) -> WorkflowRegistry:
        """Workflows (DAGs of steps): `app.workflows.start(wf, key=...)`, `.get(id or key)`,
        `.cancel(...)`, `.retry_step(...)`; see docs/workflows.md."""
        from rota.workflows.registry import WorkflowRegistry

        return WorkflowRegistry(self)

    def schedule_workflow(self, workflow: Workflow, expression: str, **options: Any) -> _Schedule:
        """Start `workflow` on a cron schedule, one run per tick (a double tick starts one
        run): `app.schedule_workflow(wf, "0 3 * * *", tz="Europe/Berlin", args={...})`."""
        return self.workflows.schedule(workflow, expression, **options)

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- tasks --------------------------------------------------------------------------

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
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

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
            task_name = check_text(name or _default_name(fn), "task name", TaskDefinitionError)
            if task_name in self.tasks and self.tasks[task_name].func is not fn:
                raise TaskDefinitionError(f"a task named {task_name!r} is already registered")
            task: Task[Any, Any] = Task(self, fn, task_name, policy)
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
        return self.get_task(task_name).enqueue(**options, **(args or {}))

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
        self.driver.holds.hold_put(name, "manual", "paused by an operator", None)

    def resume_queue(self, name: str) -> None:
        """Lift the operator's pause; a closed window or an open breaker still holds it."""
        check_queue_name(name, ArgumentsError)
        self.driver.holds.hold_drop(name, "manual")

    # --- schedules ----------------------------------------------------------------------

    def cron(
        self,
        expression: str,
        *,
        tz: str = "UTC",
        name: str | None = None,
        args: dict[str, Any] | None = None,
        concurrency: str = "allow",
        starting_deadline: float | None = None,
        successful_history_limit: int = 3,
        failed_history_limit: int = 1,
        dst: str = "once",
        strict_missed_limit: bool = False,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Declare a schedule with Kubernetes CronJob semantics on a function (which is
        registered as a task) or on a task (stacked over `@app.task(...)`):

            @app.cron("0 3 * * *", tz="Europe/Berlin", concurrency="forbid",
                      starting_deadline=300)
            def payout_report(ctx: rota.Context) -> None: ...

        The schedule is named after the task unless `name=` is given, and is stored in the
        database when a worker starts (or `rota migrate --app ...` runs)."""

        policy: dict[str, Any] = dict(
            tz=tz,
            name=name,
            args=args,
            concurrency=concurrency,
            starting_deadline=starting_deadline,
            successful_history_limit=successful_history_limit,
            failed_history_limit=failed_history_limit,
            dst=dst,
            strict_missed_limit=strict_missed_limit,
        )

        def register(fn: Callable[..., Any]) -> Task[Any, Any]:
            if isinstance(fn, Task):
                if timeout is not None:
                    raise TaskDefinitionError(
                        f"timeout= belongs to the task: set it in @app.task for {fn.name}"
                    )
                self.schedule(
                    fn,
                    expression,
                    queue=queue,
                    priority=priority,
                    max_attempts=max_attempts,
                    _stacklevel=3,
                    **policy,
                )
                return fn
            # Check the schedule before registering anything, so a bad expression leaves
            # no task behind either.
            _schedule_spec(name or _default_name(fn), expression, policy)
            known = set(self.tasks)
            task = self.task(
                queue=queue or "default",
                priority=priority or 0,
                max_attempts=max_attempts or 20,
                timeout=timeout,
            )(fn)
            try:
                self.schedule(task, expression, _stacklevel=3, **policy)
            except Exception:
                if task.name not in known:
                    del self.tasks[task.name]
                raise
            return task

        return register

    def schedule(
        self,
        task: Task[Any, Any] | str,
        expression: str,
        *,
        tz: str = "UTC",
        name: str | None = None,
        args: dict[str, Any] | None = None,
        concurrency: str = "allow",
        starting_deadline: float | None = None,
        successful_history_limit: int = 3,
        failed_history_limit: int = 1,
        dst: str = "once",
        strict_missed_limit: bool = False,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        _stacklevel: int = 2,
    ) -> Schedule:
        """Declare a schedule that enqueues an existing task with `args`:

            app.schedule(send_digest, "*/5 * * * *", args={"team": "ops"}, name="digest-ops")

        Everything is validated here: the expression, the zone, the policy and the
        arguments (against the task's signature), before anything is stored."""
        target = self.get_task(task) if isinstance(task, str) else task
        if not isinstance(target, Task) or self.tasks.get(target.name) is not target:
            raise TaskDefinitionError(f"{task!r} is not a task of this app: register it first")
        if args is not None and not isinstance(args, dict):
            raise ArgumentsError(f"args must be a dict, not {type(args).__name__}")
        spec = _schedule_spec(
            target.name if name is None else name,
            expression,
            dict(
                tz=tz,
                concurrency=concurrency,
                starting_deadline=starting_deadline,
                successful_history_limit=successful_history_limit,
                failed_history_limit=failed_history_limit,
                dst=dst,
                strict_missed_limit=strict_missed_limit,
            ),
        )
        if spec.name in self.schedules:
            raise ScheduleError(
                f"a schedule named {spec.name!r} is already declared: give this one another "
                "name with name=..."
            )
        job = target.build(
            dict(args or {}), queue=queue, priority=priority, max_attempts=max_attempts
        )
        spec.warn_if_unusual(stacklevel=_stacklevel)
        declared = Schedule(self, spec, job)
        self.schedules[spec.name] = declared
        return declared

    def sync_schedules(self) -> list[ScheduleRecord]:
        """Store the declared schedules: create them, or update their definitions. What
        the database owns (suspension, last schedule time, history) is kept. Workers call
        this when they start; schedules no longer declared stay until `rota cron delete`."""
        if not self.schedules:
            return []
        return self.driver.schedule_upsert_many([s.upsert_row() for s in self.schedules.values()])

    def list_schedules(self) -> list[ScheduleRecord]:
        return self.driver.schedule_list()

    def get_schedule(self, name: str) -> ScheduleRecord:
        record = self.driver.schedule_get(name)
        if record is None:
            known = ", ".join(r.name for r in self.driver.schedule_list()) or "none stored"
            raise ScheduleNotFoundError(f"no schedule named {name!r}; stored: {known}")
        return record

    def suspend_schedule(self, name: str) -> ScheduleRecord:
        """No new runs (running ones continue); ticks missed meanwhile count as missed."""
        return self.driver.schedule_set_suspended(name, True)

    def resume_schedule(self, name: str) -> ScheduleRecord:
        """Runs again; the most recent tick missed while suspended starts at once, if it is
        still inside the starting deadline."""
        return self.driver.schedule_set_suspended(name, False)

    def delete_schedule(self, name: str) -> None:
        """Forget a stored schedule and its run records (their jobs are kept)."""
        if not self.driver.schedule_delete(name):
            raise ScheduleNotFoundError(f"no schedule named {name!r}")

    def trigger_schedule(self, schedule: str, *, name: str | None = None) -> ScheduleRun:
        """Run a schedule now, outside its timetable, like `kubectl create job
        --from=cronjob/NAME`: the run does not move its last schedule time, is not active
        for its concurrency policy, and counts for its history limits."""
        record = self.get_schedule(schedule)
        run_name = check_run_name(record.name, name)
        spec = spec_of(record)
        now = self.driver.db_now()
        return self.driver.schedule_run_trigger(
            ManualRun(
                schedule_id=record.id,
                at=now,
                local=spec.local(now),
                name=run_name,
                scheduler="manual",
                job=record.job_row(),
            )
        )

    def schedule_history(self, name: str, *, limit: int = 50) -> list[ScheduleRun]:
        """The schedule's runs, newest first, with the state of each run's job."""
        if not 1 <= limit <= 10_000:
            raise ArgumentsError("limit must be from 1 to 10000")
        record = self.get_schedule(name)
        return self.driver.schedule_run_list(ScheduleRunFilter(schedule_id=record.id, limit=limit))

    # --- schema -------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations (idempotent; concurrent runs are serialised)."""
        return self.driver.schema_migrate()

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


def _schedule_spec(name: str, expression: str, policy: dict[str, Any]) -> ScheduleSpec:
    return ScheduleSpec(
        name=name,
        expression=expression,
        timezone=policy.get("tz", "UTC"),
        dst=parse_choice(DstPolicy, policy.get("dst", "once"), "dst"),
        concurrency=parse_choice(
            ConcurrencyPolicy, policy.get("concurrency", "allow"), "concurrency"
        ),
        starting_deadline=policy.get("starting_deadline"),
        successful_history_limit=policy.get("successful_history_limit", 3),
        failed_history_limit=policy.get("failed_history_limit", 1),
        strict_missed_limit=policy.get("strict_missed_limit", False),
    )


def _state(value: JobState | str) -> JobState:
    try:
        return JobState(value)
    except ValueError:
        known = ", ".join(s.value for s in JobState)
        raise ArgumentsError(f"unknown job state {value!r}; known: {known}") from None


def _default_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "task"
    if module == "__main__":
        # `python -m pkg.mod` and a worker importing pkg.mod must agree on the name.
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        module = spec.name if spec is not None else module
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"
