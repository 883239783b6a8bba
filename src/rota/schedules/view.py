"""JSON views of schedules and their runs: one shape for `rota cron --json` and the HTTP
API. Times are shown in each schedule's own zone; sealed arguments are never shown."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rota.errors import ScheduleError
from rota.job import MASKED_ARGS, SEALED_MARK
from rota.schedules.schedule import spec_of
from rota.schedules.spec import ScheduleSpec
from rota.schedules.store import ScheduleRecord, ScheduleRun
from rota.schedules.words import describe


def local_time(value: datetime | None, spec: ScheduleSpec | None) -> str:
    if value is None:
        return "-"
    if spec is None:
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    here = value.astimezone(spec.zone)
    return f"{here:%Y-%m-%d %H:%M:%S} {here:%Z}"


def iso_time(value: datetime | None, spec: ScheduleSpec | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(spec.zone if spec is not None else UTC).isoformat()


def spec_or_error(record: ScheduleRecord) -> ScheduleSpec | ScheduleError:
    try:
        return spec_of(record)
    except ScheduleError as exc:
        return exc


def next_runs(spec: ScheduleSpec, now: datetime, count: int) -> list[datetime]:
    found: list[datetime] = []
    for tick in spec.ticks.iter_after(now):
        found.append(tick)
        if len(found) >= count:
            break
    return found


def shown_args(args_json: str) -> Any:
    """The template's arguments; sealed ones (an encrypted task's) are never shown."""
    args = json.loads(args_json)
    return MASKED_ARGS if isinstance(args, dict) and SEALED_MARK in args else args


def schedule_json(record: ScheduleRecord, now: datetime, count: int = 1) -> dict[str, Any]:
    spec = spec_or_error(record)
    valid = spec if isinstance(spec, ScheduleSpec) else None
    upcoming = [] if valid is None or record.suspended else next_runs(valid, now, count)
    return {
        "name": record.name,
        "task": record.task,
        "queue": record.queue,
        "args": shown_args(record.args_json),
        "schedule": record.expression,
        "description": describe(record.expression),
        "timezone": record.timezone,
        "dst": record.dst,
        "concurrency": record.concurrency,
        "starting_deadline": record.starting_deadline,
        "successful_history_limit": record.successful_history_limit,
        "failed_history_limit": record.failed_history_limit,
        "strict_missed_limit": record.strict_missed_limit,
        "suspended": record.suspended,
        "active": record.active,
        "next_runs": [iso_time(t, valid) for t in upcoming],
        "next_runs_utc": [t.astimezone(UTC).isoformat() for t in upcoming],
        "last_schedule_time": iso_time(record.last_schedule_time, valid),
        "last_successful_time": iso_time(record.last_successful_time, valid),
        "last_missed_time": iso_time(record.last_missed_time, valid),
        "last_event": record.last_event,
        "last_event_at": iso_time(record.last_event_at, valid),
        "created_at": iso_time(record.created_at, valid),
        "invalid": None if valid is not None else str(spec),
    }


def run_json(run: ScheduleRun) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.name,
        "schedule": run.schedule,
        "trigger": run.trigger,
        "scheduled_at": run.scheduled_local,
        "scheduled_at_utc": run.scheduled_at.astimezone(UTC).isoformat(),
        "job_id": run.job_id,
        "state": None if run.job_state is None else str(run.job_state),
        "scheduler": run.scheduler,
        "created_at": run.created_at.astimezone(UTC).isoformat(),
        "attempted_at": None if run.attempted_at is None else run.attempted_at.isoformat(),
        "finished_at": None if run.finished_at is None else run.finished_at.isoformat(),
    }
