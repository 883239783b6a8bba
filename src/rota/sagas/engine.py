"""Saga transitions in one transaction each (the outbox discipline): lock the saga row,
check it is still where the caller thinks (its version), record the move and queue the
job that performs the next one. A caller holding an old version changes nothing."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from rota.drivers.base import Driver, JobInsert
from rota.job import Job
from rota.sagas.machine import Decision, NextJob, Phase
from rota.sagas.store import SagaChange, SagaRecord, SagaStore

log = logging.getLogger("rota.sagas")

# What a transition decides, given the locked saga (None: nothing to do).
Decide = Callable[[SagaRecord], Decision | None]


def job_row(saga_id: int, key: str, version: int, job: NextJob) -> JobInsert:
    """The job of one saga move. Its meta names the saga and the version the move
    expects, which fences it: once the saga moved on, the job is a no-op."""
    meta = {
        "saga": {
            "id": saga_id,
            "key": key,
            "version": version,
            "step": job.step,
            "phase": str(job.phase),
        }
    }
    return JobInsert(
        task=job.task,
        queue=job.queue,
        args_json="{}",
        priority=job.priority,
        max_attempts=job.max_attempts,
        meta_json=json.dumps(meta),
    )


def apply(
    driver: Driver,
    conn: Any,
    saga_id: int,
    version: int | None,
    decide: Decide,
    *,
    by_job: int | None = None,
    wait: bool = True,
) -> SagaRecord | None:
    """Lock saga `saga_id` in `conn`'s transaction and apply `decide` to it, unless its
    version is no longer `version` (None: any). Returns the saga after the move, or
    None when nothing changed (or, with `wait=False`, when another transaction holds
    the row)."""
    saga = (
        SagaStore(driver).lock(conn, saga_id) if wait else SagaStore(driver).try_lock(conn, saga_id)
    )
    if saga is None or (version is not None and saga.version != version):
        return None
    decision = decide(saga)
    if decision is None:
        return None
    entry = dict(decision.entry)
    if by_job is not None:
        entry["job_id"] = by_job
    job_id: int | None = saga.job_id
    if decision.job is not None:
        row = job_row(saga.id, saga.key, saga.version + 1, decision.job)
        job_id = driver.job_insert_many([row], conn=conn)[0].id
        entry["next_job_id"] = job_id
    change = SagaChange(
        saga_id=saga.id,
        status=decision.status,
        step=decision.step,
        job_id=job_id,
        data_json=json.dumps(decision.data),
        error=decision.error,
        entry_json=json.dumps(entry),
        deadline=(
            decision.job.deadline
            if decision.job is not None and decision.job.phase is Phase.FORWARD
            else None
        ),
    )
    return SagaStore(driver).update(conn, change)


def start(
    driver: Driver,
    conn: Any,
    *,
    name: str,
    key: str,
    plan: list[dict[str, Any]],
    data: dict[str, Any],
    first: NextJob,
    insert: Callable[[list[JobInsert], Any], list[Job]],
) -> SagaRecord | None:
    """Store a new saga and the job of its first step together; None if `key` is taken."""
    entry = {"event": "started", "step": first.step, "status": "running"}
    saga = SagaStore(driver).insert(
        conn,
        key=key,
        name=name,
        step=first.step,
        plan_json=json.dumps(plan),
        data_json=json.dumps(data),
        entry_json=json.dumps(entry),
    )
    if saga is None:
        return None
    job = insert([job_row(saga.id, key, saga.version, first)], conn)[0]
    return SagaStore(driver).set_job(conn, saga.id, job.id, first.deadline)


def saga_ref(meta: dict[str, Any]) -> tuple[int, int, str, Phase] | None:
    """(saga id, version, step, phase) from a step job's meta."""
    ref = meta.get("saga")
    if not isinstance(ref, dict):
        return None
    try:
        return int(ref["id"]), int(ref["version"]), str(ref["step"]), Phase(ref["phase"])
    except (KeyError, TypeError, ValueError):
        return None
