"""Schedule: a declared schedule (its spec and the job it enqueues) bound to the app that
declared it, with the run-time actions Kubernetes users know from kubectl."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rota.drivers.base import JobInsert
from rota.payload import decode
from rota.schedules.spec import ConcurrencyPolicy, ScheduleSpec, parse_choice
from rota.schedules.store import ScheduleRecord, ScheduleRun, ScheduleUpsert
from rota.schedules.ticks import DstPolicy

if TYPE_CHECKING:
    from rota.schedules.registry import ScheduleRegistry


class Schedule:
    """`app.schedules[name]`: what `@app.cron` and `app.schedules.add()` declare."""

    def __init__(self, registry: ScheduleRegistry, spec: ScheduleSpec, job: JobInsert) -> None:
        self.registry = registry
        self.spec = spec
        self.job = job  # the job template: task, queue, priority, attempts, arguments

    def __repr__(self) -> str:
        return (
            f"<Schedule {self.spec.name} {self.spec.expression!r} tz={self.spec.timezone} "
            f"task={self.job.task}>"
        )

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def task(self) -> str:
        return self.job.task

    @property
    def args(self) -> dict[str, Any]:
        value = decode(self.job.args_json)
        assert isinstance(value, dict)
        return value

    def upsert_row(self) -> ScheduleUpsert:
        """The row `app.schedules.sync()` writes: definition fields only, never the status
        (suspension, last times) that belongs to the database."""
        spec, job = self.spec, self.job
        return ScheduleUpsert(
            name=spec.name,
            task=job.task,
            queue=job.queue,
            priority=job.priority,
            max_attempts=job.max_attempts,
            args_json=job.args_json,
            expression=spec.expression,
            timezone=spec.timezone,
            dst=str(spec.dst),
            concurrency=str(spec.concurrency),
            starting_deadline=spec.starting_deadline,
            successful_history_limit=spec.successful_history_limit,
            failed_history_limit=spec.failed_history_limit,
            strict_missed_limit=spec.strict_missed_limit,
        )

    # --- run-time actions on the stored schedule (like kubectl) ---------------------------

    def trigger(self, name: str | None = None) -> ScheduleRun:
        """Run it now, outside the schedule (`kubectl create job --from=cronjob/...`)."""
        return self.registry.trigger(self.spec.name, name=name)

    def suspend(self) -> ScheduleRecord:
        return self.registry.suspend(self.spec.name)

    def resume(self) -> ScheduleRecord:
        return self.registry.resume(self.spec.name)

    def history(self, limit: int = 50) -> list[ScheduleRun]:
        return self.registry.history(self.spec.name, limit=limit)


def spec_of(record: ScheduleRecord) -> ScheduleSpec:
    """The spec a stored row describes (ScheduleError if it is no longer valid here, e.g.
    its time zone is missing from this host's tz database)."""
    return ScheduleSpec(
        name=record.name,
        expression=record.expression,
        timezone=record.timezone,
        dst=parse_choice(DstPolicy, record.dst, "dst"),
        concurrency=parse_choice(ConcurrencyPolicy, record.concurrency, "concurrency"),
        starting_deadline=record.starting_deadline,
        successful_history_limit=record.successful_history_limit,
        failed_history_limit=record.failed_history_limit,
        strict_missed_limit=record.strict_missed_limit,
    )
