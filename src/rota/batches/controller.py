"""One controller step for one batch: read it, decide with the pure reconciler, write the
decision fenced by the batch's version (jobs to start, jobs to cancel, the condition and
the finish callback in one transaction). Used by the maintenance service and at creation."""

from __future__ import annotations

import dataclasses
import json
import sys
from datetime import datetime
from functools import lru_cache
from typing import Any

from rota.batches.reconcile import (
    Attempt,
    BatchState,
    Condition,
    Decision,
    Item,
    ItemState,
    reconcile,
)
from rota.batches.spec import BatchSpec
from rota.batches.status import BatchStatus
from rota.batches.store import BatchApply, BatchItemRecord, BatchRecord, BatchStore, ItemChange
from rota.drivers.base import JobInsert


@lru_cache(maxsize=1024)
def _resolve(name: str) -> type | None:
    """An exception class by its stored name, among modules already imported (the
    worker imported the app, so its exception classes are there)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, -1, -1):
        module = sys.modules.get(".".join(parts[:cut]) if cut else "builtins")
        if module is None:
            continue
        found: Any = module
        for attr in parts[cut:]:
            found = getattr(found, attr, None)
        if isinstance(found, type):
            return found
    return None


def is_subclass(error_type: str, rule_type: str) -> bool:
    """Whether an attempt's error type is the rule's exception type or a subclass of it."""
    if error_type == rule_type:
        return True
    error, rule = _resolve(error_type), _resolve(rule_type)
    return error is not None and rule is not None and issubclass(error, rule)


def _state(record: BatchRecord) -> BatchState:
    interim = (
        Condition(record.interim, record.interim_reason or "", record.interim_message or "")
        if record.interim
        else None
    )
    final = (
        Condition(record.condition, record.reason or "", record.message or "")
        if record.condition
        else None
    )
    return BatchState(
        suspended=record.suspended,
        start_time=record.start_time,
        succeeded=record.succeeded,
        failed=record.failed,
        ignored=record.ignored,
        fails_since_success=record.fails_since_success,
        last_failure_at=record.last_failure_at,
        interim=interim,
        final=final,
    )


def _item(row: BatchItemRecord) -> Item:
    state = ItemState(row.state)
    attempt = None
    if state is ItemState.ACTIVE and row.job_id is not None:
        attempt = Attempt(
            job_id=row.job_id,
            state=row.job_state,
            cancel_requested=row.cancel_requested,
            finished_at=row.job_finished_at,
            error_type=row.error_type,
            message=row.error_message,
            condition=row.condition,
            reason=row.reason,
        )
    return Item(row.index, state, row.failures, row.last_failure_at, attempt)


def _status_params(state: BatchState) -> dict[str, Any]:
    interim, final = state.interim, state.final
    return {
        "succeeded": state.succeeded,
        "failed": state.failed,
        "ignored": state.ignored,
        "fails_since_success": state.fails_since_success,
        "last_failure_at": state.last_failure_at,
        "interim": interim.type if interim else None,
        "interim_reason": interim.reason if interim else None,
        "interim_message": interim.message if interim else None,
        "condition": final.type if final else None,
        "reason": final.reason if final else None,
        "message": final.message if final else None,
    }


def advance(
    store: BatchStore,
    record: BatchRecord,
    rows: list[BatchItemRecord],
    now: datetime,
    *,
    conn: Any = None,
) -> Decision | None:
    """Reconcile one batch and write the result; None when nothing changed or another
    writer changed the batch first (the next pass decides again)."""
    spec = BatchSpec.from_json(record.spec, parallelism=record.parallelism)
    before = _state(record)
    items = [_item(r) for r in rows]
    decision = reconcile(spec, before, items, now, is_subclass=is_subclass)
    if not decision.changed and decision.state == before:
        return None
    args_by_index = {r.index: r.args_json for r in rows}
    last_job = {r.index: r.job_id for r in rows}
    start = [
        (index, _job_row(record, spec, index, args_by_index.get(index))) for index in decision.start
    ]
    callback = None
    if decision.finished and record.on_finish:
        callback = _callback_row(record, decision, rows, now)
    change = BatchApply(
        batch_id=record.id,
        version=record.version,
        status=_status_params(decision.state),
        items=[
            ItemChange(i.index, str(i.state), i.failures, i.last_failure_at, last_job.get(i.index))
            for i in decision.items.values()
        ],
        start=start,
        cancel=decision.cancel,
        finished=decision.finished,
        callback=callback,
    )
    return decision if store.apply(change, conn=conn) else None


def _job_row(record: BatchRecord, spec: BatchSpec, index: int, args_json: str | None) -> JobInsert:
    meta = {
        "batch": {"id": record.id, "name": record.name, "index": index, "total": spec.completions}
    }
    return JobInsert(
        task=record.task,
        queue=record.queue,
        args_json=args_json if args_json is not None else record.args_json,
        priority=record.priority,
        # One job is one attempt (a Kubernetes pod): the controller decides about retries
        # with the batch's limits and rules, and starts a new job for the index.
        max_attempts=1,
        meta_json=json.dumps(meta),
    )


def _callback_row(
    record: BatchRecord, decision: Decision, rows: list[BatchItemRecord], now: datetime
) -> JobInsert:
    final = decision.state.final
    assert final is not None
    states = {r.index: r.state for r in rows}
    states.update({i: str(item.state) for i, item in decision.items.items()})
    finished = dataclasses.replace(
        record,
        succeeded=decision.state.succeeded,
        failed=decision.state.failed,
        ignored=decision.state.ignored,
        condition=final.type,
        reason=final.reason,
        message=final.message,
        interim=decision.state.interim.type if decision.state.interim else None,
        finished_at=now,
        completion_time=now if final.type == "Complete" else None,
    )
    status = BatchStatus.of(finished, states.items()).to_json()
    return JobInsert(
        task=record.on_finish or "",
        queue=record.on_finish_queue or record.queue,
        args_json=json.dumps({"batch": status}),
        priority=record.on_finish_priority,
        max_attempts=record.on_finish_max_attempts,
        meta_json=json.dumps({"batch_callback": record.id}),
    )
