"""`rota.App`: the engine's App with every standard feature plugged in, and the typed
namespaces and shortcuts users call (`app.batches`, `app.cron`, `app.publish`, ...), each
a delegate to its feature. `rota.App(url, features=[...])` plugs in a chosen set instead;
`rota.app.App` is the engine alone."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar

from rota import app as engine
from rota.auth.feature import TokensFeature
from rota.auth.tokens import TokenRegistry
from rota.batches.feature import BatchesFeature
from rota.batches.registry import BatchRegistry
from rota.batches.status import BatchStatus
from rota.drivers.url import DatabaseURL
from rota.events.bus import EventBus
from rota.events.feature import EventsFeature
from rota.events.store import EventRecord
from rota.ops.bulk import JobControls
from rota.ops.dlq import DeadLetters
from rota.ops.feature import OpsFeature
from rota.ops.queues import QueueControls
from rota.payload import DEFAULT_MAX_PAYLOAD_BYTES
from rota.plugin import Feature
from rota.routing.api import Routing
from rota.routing.feature import RoutingFeature
from rota.sagas.feature import SagasFeature
from rota.sagas.registry import SagaRegistry
from rota.schedules.feature import SchedulesFeature
from rota.schedules.registry import ScheduleRegistry
from rota.schedules.schedule import Schedule
from rota.schedules.store import ScheduleRecord, ScheduleRun
from rota.security.feature import EncryptionFeature
from rota.task import Task
from rota.tenants.api import Tenants
from rota.tenants.feature import TenantsFeature
from rota.workflows.definition import Workflow
from rota.workflows.feature import WorkflowsFeature
from rota.workflows.registry import WorkflowRegistry

P = ParamSpec("P")
R = TypeVar("R")


def standard_features() -> list[Feature]:
    """A fresh instance of every standard feature, in the order they plug in."""
    return [
        SchedulesFeature(),
        BatchesFeature(),
        WorkflowsFeature(),
        SagasFeature(),
        EventsFeature(),
        OpsFeature(),
        RoutingFeature(),
        TenantsFeature(),
        EncryptionFeature(),
        TokensFeature(),
    ]


class App(engine.App):
    """One rota application: a database and the tasks that run against it.

    `url` is `sqlite:///path.db` or `postgresql://...`; by default $ROTA_DATABASE_URL.
    Every standard feature is plugged in unless `features=` names the ones to plug.
    """

    def __init__(
        self,
        url: str | DatabaseURL | None = None,
        *,
        features: Iterable[Feature] | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        pool_size: int = 4,
    ) -> None:
        super().__init__(
            url,
            features=standard_features() if features is None else features,
            max_payload_bytes=max_payload_bytes,
            pool_size=pool_size,
        )

    # --- namespaces ---------------------------------------------------------------------

    @property
    def schedules(self) -> ScheduleRegistry:
        """Schedules: declared ones by name (`app.schedules["payout"]`), and the stored
        ones: `.list_stored()`, `.suspend(name)`, `.resume(name)`, `.trigger(name)`."""
        return self.feature(SchedulesFeature).api

    @property
    def batches(self) -> BatchRegistry:
        """Batches with Kubernetes Job semantics: `app.batches.get("shards")`."""
        return self.feature(BatchesFeature).api

    @property
    def workflows(self) -> WorkflowRegistry:
        """Workflows (DAGs of steps): `app.workflows.start(wf, key=...)`, `.get(id or key)`,
        `.cancel(...)`, `.retry_step(...)`; see docs/workflows.md."""
        return self.feature(WorkflowsFeature).api

    @property
    def sagas(self) -> SagaRegistry:
        """Sagas: `app.sagas.register(saga)`, `.start(saga, key="order-42")`, `.get(key)`."""
        return self.feature(SagasFeature).api

    @property
    def events(self) -> EventBus:
        """Events: `app.events.publish(...)`, `.replay(...)`; see `app.on` and `app.publish`."""
        return self.feature(EventsFeature).api

    @property
    def dlq(self) -> DeadLetters:
        """Dead letters and governed replay: `app.dlq.replay(task=..., reason=...)`."""
        return self.feature(OpsFeature).dlq

    @property
    def jobs(self) -> JobControls:
        """Jobs in bulk: `app.jobs.cancel(queue="mail", reason=..., dry_run=True)`, and the
        audit of purges and bulk cancels: `app.jobs.audit()`."""
        return self.feature(OpsFeature).jobs

    @property
    def queues(self) -> QueueControls:
        """Queue controls: `app.queues.configure("mail", global_limit=3, rate=(100, 60))`."""
        return self.feature(OpsFeature).queues

    @property
    def routing(self) -> Routing:
        """Routing: `app.routing.unroutable()` (jobs no live worker can run), `.workers()`."""
        return self.feature(RoutingFeature).api

    @property
    def tenants(self) -> Tenants:
        """Tenants: `app.tenants.set_fair("reports")`, `.configure("acme", max_running=5)`."""
        return self.feature(TenantsFeature).api

    @property
    def tokens(self) -> TokenRegistry:
        """API tokens for the HTTP API: `app.tokens.create("ops", "operator")`."""
        return self.feature(TokensFeature).api

    # --- shortcuts ------------------------------------------------------------------------

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

        The same as `app.schedules.cron` (docs/schedules.md)."""
        return self.schedules.cron(
            expression,
            tz=tz,
            name=name,
            args=args,
            concurrency=concurrency,
            starting_deadline=starting_deadline,
            successful_history_limit=successful_history_limit,
            failed_history_limit=failed_history_limit,
            dst=dst,
            strict_missed_limit=strict_missed_limit,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout=timeout,
        )

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
    ) -> Schedule:
        """Declare a schedule that enqueues an existing task with `args`:

            app.schedule(send_digest, "*/5 * * * *", args={"team": "ops"}, name="digest-ops")

        The same as `app.schedules.add` (validated before anything is stored)."""
        return self.schedules.add(
            task,
            expression,
            tz=tz,
            name=name,
            args=args,
            concurrency=concurrency,
            starting_deadline=starting_deadline,
            successful_history_limit=successful_history_limit,
            failed_history_limit=failed_history_limit,
            dst=dst,
            strict_missed_limit=strict_missed_limit,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            _stacklevel=3,
        )

    def sync_schedules(self) -> list[ScheduleRecord]:
        """Store the declared schedules (what `app.migrate()` and a worker's start do)."""
        return self.schedules.sync()

    def list_schedules(self) -> list[ScheduleRecord]:
        return self.schedules.list_stored()

    def get_schedule(self, name: str) -> ScheduleRecord:
        return self.schedules.get_stored(name)

    def suspend_schedule(self, name: str) -> ScheduleRecord:
        return self.schedules.suspend(name)

    def resume_schedule(self, name: str) -> ScheduleRecord:
        return self.schedules.resume(name)

    def delete_schedule(self, name: str) -> None:
        self.schedules.delete(name)

    def trigger_schedule(self, schedule: str, *, name: str | None = None) -> ScheduleRun:
        return self.schedules.trigger(schedule, name=name)

    def schedule_history(self, name: str, *, limit: int = 50) -> list[ScheduleRun]:
        return self.schedules.history(name, limit=limit)

    def batch(self, task: Task[Any, Any] | str, **options: Any) -> BatchStatus:
        """Start a batch: `app.batch(resize, items=[...], parallelism=4)` or
        `app.batch(shard, completions=8, indexed=True)`; see docs/batches.md."""
        return self.batches.create(task, **options)

    def schedule_workflow(self, workflow: Workflow, expression: str, **options: Any) -> Schedule:
        """Start `workflow` on a cron schedule, one run per tick (a double tick starts one
        run): `app.schedule_workflow(wf, "0 3 * * *", tz="Europe/Berlin", args={...})`."""
        return self.workflows.schedule(workflow, expression, **options)

    def on(self, event: str, **policy: Any) -> Callable[[Callable[..., Any]], Task[Any, Any]]:
        """Subscribe a function to an event: `@app.on("user.signed_up", max_attempts=5)`.
        Each publish gives it one job (its own retries and dead letters) and a rota.Event."""
        return self.events.on(event, **policy)

    def publish(self, name: str, payload: Any = None, **options: Any) -> EventRecord:
        """Publish an event (`version=`, idempotency `key=`, your transaction `conn=`):
        one job per subscriber, in the same transaction. Returns the event with its id."""
        return self.events.publish(name, payload, **options)
