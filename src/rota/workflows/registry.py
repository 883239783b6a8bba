"""`app.workflows`: start, inspect, cancel and retry workflow runs, schedule them on cron,
and the controller pass that advances running workflows (run by the leader's service)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rota.context import Context
from rota.drivers.base import Driver, JobInsert
from rota.errors import ArgumentsError, PayloadError, WorkflowError, WorkflowNotFoundError
from rota.payload import check_text, encode
from rota.schedules.feature import SchedulesFeature
from rota.schedules.schedule import Schedule
from rota.task import MAX_KEY_LENGTH, Task
from rota.workflows import plan
from rota.workflows.definition import Workflow
from rota.workflows.records import (
    Advance,
    StepRow,
    WorkflowFilter,
    WorkflowNew,
    WorkflowRow,
    WorkflowSnapshot,
)
from rota.workflows.spec import StepSpec, StepState, WorkflowState
from rota.workflows.status import WorkflowRun
from rota.workflows.store import WorkflowStore

if TYPE_CHECKING:
    from rota.app import App

log = logging.getLogger("rota.workflows")

START_TASK = "rota.workflows.start"  # the built-in task a workflow's cron schedule enqueues
_RACE_RETRIES = 5  # cancel/retry re-read when a controller pass moved the run meanwhile


@dataclass(frozen=True)
class WorkflowReport:
    """What one controller pass did."""

    advanced: int = 0  # workflows changed
    jobs: int = 0  # step jobs inserted
    steps: int = 0  # steps that finished (completed, failed, cancelled, skipped)
    finished: int = 0  # workflows that finished
    stale: int = 0  # changes refused because another writer moved the run first
    errors: int = 0


class WorkflowRegistry:
    """`app.workflows`."""

    def __init__(self, app: App) -> None:
        self._app = app
        self.definitions: dict[str, Workflow] = {}
        self._start_task: Task[Any, Any] | None = None

    @property
    def driver(self) -> Driver:
        return self._app.driver

    # --- declare ----------------------------------------------------------------------------

    def register(self, workflow: Workflow) -> Workflow:
        """Make a definition known by name (what a cron-started run looks up)."""
        if not isinstance(workflow, Workflow):
            raise WorkflowError(f"register takes a rota.Workflow, not {workflow!r}")
        known = self.definitions.get(workflow.name)
        if known is not None and known is not workflow:
            raise WorkflowError(f"another workflow named {workflow.name!r} is registered")
        workflow.spec()
        self._check_tasks(workflow)
        self.definitions[workflow.name] = workflow
        return workflow

    def schedule(
        self,
        workflow: Workflow,
        expression: str,
        *,
        args: dict[str, Any] | None = None,
        name: str | None = None,
        tz: str = "UTC",
        concurrency: str = "allow",
        starting_deadline: float | None = None,
        successful_history_limit: int = 3,
        failed_history_limit: int = 1,
        dst: str = "once",
        strict_missed_limit: bool = False,
        queue: str | None = None,
    ) -> Schedule:
        """Start `workflow` on a cron schedule. Each tick enqueues one job (the tick's
        unique key), and that job starts the run keyed `<schedule>@<tick time>`: a tick
        seen twice, or its job run twice, still starts one run."""
        self.register(workflow)
        workflow.check_args(dict(args or {}))
        return self._app.feature(SchedulesFeature).api.add(
            self._starter(),
            expression,
            args={"workflow": workflow.name, "args": dict(args or {})},
            name=workflow.name if name is None else name,
            tz=tz,
            concurrency=concurrency,
            starting_deadline=starting_deadline,
            successful_history_limit=successful_history_limit,
            failed_history_limit=failed_history_limit,
            dst=dst,
            strict_missed_limit=strict_missed_limit,
            queue=queue,
            _stacklevel=3,
        )

    # --- start ------------------------------------------------------------------------------

    def start(
        self,
        workflow: Workflow,
        *,
        args: dict[str, Any] | None = None,
        key: str | None = None,
        conn: Any = None,
    ) -> WorkflowRun:
        """Start a run of `workflow`; its first steps' jobs are inserted at once. With
        `key`, a second start returns the first run (`.created` is False). With `conn=`,
        the run commits or rolls back with the caller's transaction."""
        if not isinstance(workflow, Workflow):
            raise WorkflowError(f"start takes a rota.Workflow, not {workflow!r}")
        spec = workflow.spec()
        self._check_tasks(workflow)
        values = {} if args is None else args
        workflow.check_args(values)
        if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH):
            raise ArgumentsError(
                f"key must be a non-empty string of at most {MAX_KEY_LENGTH} chars"
            )
        if key is not None:
            check_text(key, "key")
        args_json = encode(
            values, what="the workflow's arguments", limit=self._app.max_payload_bytes
        )
        # A dry run of the first steps refuses arguments their tasks reject, before writing.
        fresh = {s.name: StepRow(s.name, str(StepState.PENDING)) for s in spec.steps}
        dry = WorkflowRow(
            0,
            workflow.name,
            key,
            "running",
            str(spec.on_failure),
            spec.to_json(),
            values,
            0,
            _EPOCH,
        )
        _refuse_failed_start(plan.advance(WorkflowSnapshot(dry, fresh), self._build))
        new = WorkflowNew(
            name=workflow.name,
            key=key,
            on_failure=str(spec.on_failure),
            spec_json=encode(spec.to_json(), what="the workflow's definition"),
            args_json=args_json,
            steps=tuple(s.name for s in spec.steps),
        )
        self.definitions.setdefault(workflow.name, workflow)
        store = WorkflowStore(self._app.driver)
        with self._transaction(conn) as tx:
            row = store.create(new, conn=tx)
            if not row.created and row.name != workflow.name:
                raise WorkflowError(
                    f"key {key!r} belongs to a run of workflow {row.name!r}, not {workflow.name!r}"
                )
            if row.created:
                first = plan.advance(WorkflowSnapshot(row, fresh), self._build)
                store.advance(first, conn=tx)
            snapshot = store.find(row.id, conn=tx)
        assert snapshot is not None
        run = WorkflowRun.of(snapshot)
        if not row.created:
            run = _not_created(run)
        return run

    # --- inspect and act --------------------------------------------------------------------

    def get(self, ref: int | str) -> WorkflowRun:
        """A run by id (int) or key (str), step by step with each step's jobs."""
        return WorkflowRun.of(self._find(ref))

    def all(
        self,
        *,
        state: WorkflowState | str | None = None,
        name: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[WorkflowRun]:
        """Runs, newest first, with their steps' states (without each step's jobs)."""
        states: tuple[str, ...] = ()
        if state is not None:
            try:
                states = (str(WorkflowState(state)),)
            except ValueError:
                known = ", ".join(s.value for s in WorkflowState)
                raise ArgumentsError(f"unknown workflow state {state!r}; known: {known}") from None
        if not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ArgumentsError("limit must be from 1 to 10000")
        found = WorkflowStore(self._app.driver).search(
            WorkflowFilter(states=states, name=name, limit=limit, before_id=before_id)
        )
        return [WorkflowRun.of(s) for s in found]

    def cancel(self, ref: int | str) -> WorkflowRun:
        """Cancel a running workflow: waiting step jobs are cancelled, running ones are
        asked to stop (`ctx.cancelled`), and no further step starts."""
        return self._change(ref, plan.cancel)

    def retry_step(self, ref: int | str, step: str) -> WorkflowRun:
        """Run a failed step's failed jobs again (each with the step's full retry budget);
        steps the failure cancelled or skipped run again too."""
        return self._change(ref, lambda snapshot: plan.retry_step(snapshot, step))

    # --- the controller -----------------------------------------------------------------------

    def advance(self, page: int = 200) -> WorkflowReport:
        """One controller pass over the running workflows: record finished step jobs,
        start the steps that became ready, apply failure policies, finish runs. Safe to
        run concurrently: a change applies only to the version it was computed from.
        Runs are read `page` at a time, oldest first, so every run is visited each pass."""
        totals = dict(advanced=0, jobs=0, steps=0, finished=0, stale=0, errors=0)
        after = 0
        while True:
            snapshots = WorkflowStore(self._app.driver).running(page, after)
            for snapshot in snapshots:
                self._advance_one(snapshot, totals)
            if len(snapshots) < page:
                return WorkflowReport(**totals)
            after = snapshots[-1].workflow.id

    def _advance_one(self, snapshot: WorkflowSnapshot, totals: dict[str, int]) -> None:
        try:
            change = plan.advance(snapshot, self._build)
            if change.empty:
                return
            if not WorkflowStore(self._app.driver).advance(change):
                totals["stale"] += 1
                return
        except Exception as exc:  # one broken run must not stop the others
            totals["errors"] += 1
            log.warning(
                "workflow %s: advancing failed (%s: %s)",
                snapshot.workflow.id,
                type(exc).__name__,
                exc,
            )
            return
        totals["advanced"] += 1
        totals["jobs"] += len(change.inserts)
        totals["steps"] += sum(1 for s in change.steps if StepState(s.state).finished)
        totals["finished"] += change.state is not None
        for note in change.notes:
            log.debug("workflow %s: %s", snapshot.workflow.id, note)
        if change.state is not None:
            log.info(
                "workflow %s (%s) %s", snapshot.workflow.id, snapshot.workflow.name, change.state
            )

    # --- internals ----------------------------------------------------------------------------

    def _find(self, ref: int | str, conn: Any = None) -> WorkflowSnapshot:
        if isinstance(ref, bool) or not isinstance(ref, int | str):
            raise ArgumentsError(f"a workflow is named by its id (int) or key (str), not {ref!r}")
        found = WorkflowStore(self._app.driver).find(ref, conn=conn)
        if found is None:
            what = f"id {ref}" if isinstance(ref, int) else f"key {ref!r}"
            raise WorkflowNotFoundError(f"no workflow with {what}")
        return found

    def _change(self, ref: int | str, decide: Any) -> WorkflowRun:
        for _ in range(_RACE_RETRIES):
            snapshot = self._find(ref)
            change: Advance = decide(snapshot)
            if WorkflowStore(self._app.driver).advance(change):
                return self.get(snapshot.workflow.id)
        raise WorkflowError(f"workflow {ref!r} kept changing under this request; try again")

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Iterator[Any]:
        if conn is not None:
            yield conn
        else:
            with self._app.driver.transaction() as own:
                yield own

    def _check_tasks(self, workflow: Workflow) -> None:
        for step in workflow.steps:
            if self._app.tasks.get(step.task.name) is not step.task:
                raise WorkflowError(
                    f"workflow {workflow.name!r}, step {step.name!r}: {step.task.name} is not "
                    "a task of this app"
                )

    def _build(self, step: StepSpec, args: dict[str, Any], meta: dict[str, Any]) -> JobInsert:
        """One step job's row. The task validates its arguments when this worker knows it;
        a leader that does not (another deploy) stores them as they are, and the worker
        that runs the job validates them then."""
        task = self._app.tasks.get(step.task)
        if task is not None:
            try:
                return task.build(
                    args,
                    queue=step.queue,
                    priority=step.priority,
                    max_attempts=step.max_attempts,
                    meta=meta,
                )
            except (ArgumentsError, PayloadError) as exc:
                raise ArgumentsError(f"step {step.name!r}: {exc}") from None
        return JobInsert(
            task=step.task,
            queue=step.queue,
            args_json=encode(
                args, what=f"arguments of step {step.name!r}", limit=self._app.max_payload_bytes
            ),
            priority=step.priority,
            max_attempts=step.max_attempts,
            meta_json=encode(meta, what="step metadata"),
        )

    def _starter(self) -> Task[Any, Any]:
        """The built-in task a workflow schedule enqueues (registered on first use)."""
        if self._start_task is not None:
            return self._start_task
        registry = self

        def start_workflow(ctx: Context, workflow: str, args: dict[str, Any]) -> None:
            definition = registry.definitions.get(workflow)
            if definition is None:
                raise WorkflowError(
                    f"no workflow named {workflow!r} is registered in this app (known: "
                    f"{', '.join(registry.definitions) or 'none'}); schedule it with "
                    "app.schedule_workflow() in the module the worker imports"
                )
            tick = WorkflowStore(ctx.driver).tick_of_job(ctx.job.id)
            if tick is None:
                key = f"{workflow}@job-{ctx.job.id}"
            elif tick.kind == "scheduled":
                key = f"{tick.schedule}@{tick.scheduled_local}"
            else:
                key = f"{tick.schedule}@{tick.run}"
            # The run and this job's completion commit together: exactly one start.
            with ctx.transaction() as conn:
                registry.start(definition, args=args, key=key, conn=conn)

        task: Task[Any, Any] = self._app.task(name=START_TASK, max_attempts=5)(start_workflow)
        self._start_task = task
        return task


def _refuse_failed_start(change: Advance) -> None:
    for update in change.steps:
        if update.state == StepState.FAILED:
            raise ArgumentsError(f"the workflow cannot start: {update.error}")


def _not_created(run: WorkflowRun) -> WorkflowRun:
    return replace(run, created=False)


_EPOCH = datetime.fromtimestamp(0, UTC)  # the dry run's row is never stored
