"""`app.schedules`: the schedules the application declares (a mapping by name, filled by
`@app.cron` and `app.schedules.add`), and the run-time actions on the stored ones that
Kubernetes users know from kubectl: list, suspend, resume, trigger, history, delete."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from rota.app import default_task_name
from rota.errors import ArgumentsError, ScheduleError, ScheduleNotFoundError, TaskDefinitionError
from rota.schedules.schedule import Schedule, spec_of
from rota.schedules.spec import ConcurrencyPolicy, ScheduleSpec, check_run_name, parse_choice
from rota.schedules.store import (
    ManualRun,
    ScheduleRecord,
    ScheduleRun,
    ScheduleRunFilter,
    ScheduleStore,
)
from rota.schedules.ticks import DstPolicy
from rota.task import Task

if TYPE_CHECKING:
    from rota.app import App

P = ParamSpec("P")
R = TypeVar("R")


class ScheduleRegistry(Mapping[str, Schedule]):
    """Declared schedules by name (`app.schedules["payout_report"]`), and the stored ones."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._declared: dict[str, Schedule] = {}

    @property
    def store(self) -> ScheduleStore:
        return ScheduleStore(self._app.driver)

    # --- the mapping of declared schedules ----------------------------------------------

    def __getitem__(self, name: str) -> Schedule:
        return self._declared[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._declared)

    def __len__(self) -> int:
        return len(self._declared)

    def __repr__(self) -> str:
        return f"<rota schedules declared={sorted(self._declared)}>"

    # --- declaring ----------------------------------------------------------------------

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
        database by `app.migrate()`, `rota migrate --app ...` and every worker's start."""
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
        app = self._app

        def register(fn: Callable[..., Any]) -> Task[Any, Any]:
            if isinstance(fn, Task):
                if timeout is not None:
                    raise TaskDefinitionError(
                        f"timeout= belongs to the task: set it in @app.task for {fn.name}"
                    )
                self.add(
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
            _schedule_spec(name or default_task_name(fn), expression, policy)
            known = set(app.tasks)
            task: Task[Any, Any] = app.task(
                queue=queue or "default",
                priority=priority or 0,
                max_attempts=max_attempts or 20,
                timeout=timeout,
            )(fn)
            try:
                self.add(task, expression, _stacklevel=3, **policy)
            except Exception:
                if task.name not in known:
                    del app.tasks[task.name]
                raise
            return task

        return register

    def add(
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

            app.schedules.add(send_digest, "*/5 * * * *", args={"team": "ops"},
                              name="digest-ops")

        Everything is validated here: the expression, the zone, the policy and the
        arguments (against the task's signature), before anything is stored."""
        app = self._app
        target = app.get_task(task) if isinstance(task, str) else task
        if not isinstance(target, Task) or app.tasks.get(target.name) is not target:
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
        if spec.name in self._declared:
            raise ScheduleError(
                f"a schedule named {spec.name!r} is already declared: give this one another "
                "name with name=..."
            )
        job = target.build(
            dict(args or {}), queue=queue, priority=priority, max_attempts=max_attempts
        )
        spec.warn_if_unusual(stacklevel=_stacklevel)
        declared = Schedule(self, spec, job)
        self._declared[spec.name] = declared
        return declared

    def sync(self) -> builtins.list[ScheduleRecord]:
        """Store the declared schedules: create them, or update their definitions. What
        the database owns (suspension, last schedule time, history) is kept. Schedules no
        longer declared stay until `rota cron delete`."""
        if not self._declared:
            return []
        rows = [s.upsert_row() for s in self._declared.values()]
        return self.store.upsert_many(rows)

    # --- the stored schedules -----------------------------------------------------------

    def list_stored(self) -> builtins.list[ScheduleRecord]:
        """Every schedule stored in the database, declared by this code or not."""
        return self.store.all()

    def get_stored(self, name: str) -> ScheduleRecord:
        record = self.store.get(name)
        if record is None:
            known = ", ".join(r.name for r in self.store.all()) or "none stored"
            raise ScheduleNotFoundError(f"no schedule named {name!r}; stored: {known}")
        return record

    def suspend(self, name: str) -> ScheduleRecord:
        """No new runs (running ones continue); ticks missed meanwhile count as missed."""
        return self.store.set_suspended(name, True)

    def resume(self, name: str) -> ScheduleRecord:
        """Runs again; the most recent tick missed while suspended starts at once, if it is
        still inside the starting deadline."""
        return self.store.set_suspended(name, False)

    def delete(self, name: str) -> None:
        """Forget a stored schedule and its run records (their jobs are kept)."""
        if not self.store.delete(name):
            raise ScheduleNotFoundError(f"no schedule named {name!r}")

    def trigger(self, schedule: str, *, name: str | None = None) -> ScheduleRun:
        """Run a schedule now, outside its timetable, like `kubectl create job
        --from=cronjob/NAME`: the run does not move its last schedule time, is not active
        for its concurrency policy, and counts for its history limits."""
        record = self.get_stored(schedule)
        run_name = check_run_name(record.name, name)
        spec = spec_of(record)
        driver = self._app.driver
        now = driver.db_now()
        return ScheduleStore(driver).run_trigger(
            ManualRun(
                schedule_id=record.id,
                at=now,
                local=spec.local(now),
                name=run_name,
                scheduler="manual",
                job=record.job_row(),
            )
        )

    def history(self, name: str, *, limit: int = 50) -> builtins.list[ScheduleRun]:
        """The schedule's runs, newest first, with the state of each run's job."""
        if not 1 <= limit <= 10_000:
            raise ArgumentsError("limit must be from 1 to 10000")
        record = self.get_stored(name)
        return self.store.run_list(ScheduleRunFilter(schedule_id=record.id, limit=limit))


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
