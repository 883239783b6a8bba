"""The tasks that perform saga steps and compensations. Each runs the user's function,
then moves the saga on in the same transaction that completes its own job, so a step
that committed is never applied twice, and a job for an older move is a no-op."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rota.context import Context
from rota.errors import Discard, RotaError
from rota.payload import encode
from rota.sagas import engine, machine
from rota.sagas.machine import Phase
from rota.sagas.store import SagaRecord, SagaStatus, SagaStore
from rota.task import takes_context

if TYPE_CHECKING:
    from rota.app import App
    from rota.sagas.definition import JobPolicy, SagaStep

log = logging.getLogger("rota.sagas")


def _call(func: Callable[..., Any], ctx: Context, data: dict[str, Any], *conn: Any) -> Any:
    return func(ctx, data, *conn) if takes_context(func) else func(data, *conn)


def _current(saga: SagaRecord | None, step: str, status: SagaStatus) -> bool:
    return saga is not None and saga.status is status and saga.step == step


def _stopped(ctx: Context, step: SagaStep, phase: Phase) -> None:
    if ctx.cancelled:
        # Timed out, cancelled or shut down while the function ran: the worker has
        # already written this attempt's outcome, so the move must not commit.
        raise RotaError(f"{phase} of {step.name!r} stopped ({ctx.cancel_reason})")


def _runner(step: SagaStep, phase: Phase) -> Callable[[Context], None]:
    forward = phase is Phase.FORWARD
    status = SagaStatus.RUNNING if forward else SagaStatus.COMPENSATING
    func = step.func if forward else step.compensate_func
    in_transaction = step.transaction if forward else step.compensate_transaction
    assert func is not None

    def move(saga: SagaRecord, stored: Any) -> machine.Decision:
        """The move once `func` returned (`stored`: its result as JSON)."""
        if forward:
            return machine.step_completed(saga, stored)
        return machine.compensation_completed(saga)

    def as_json(result: Any) -> Any:
        if not forward:
            return None  # what a compensation returns is not kept
        return json.loads(encode(result, what=f"the result of step {step.name!r}"))

    def run(ctx: Context) -> None:
        ref = engine.saga_ref(ctx.meta)
        if ref is None:
            raise Discard(f"job {ctx.job.id} is not a saga job: its meta names no saga")
        saga_id, version, _, _ = ref
        saga = SagaStore(ctx.driver).get_id(saga_id)
        if saga is None or saga.version != version or not _current(saga, step.name, status):
            # The saga moved on (this step committed already, or it was aborted or
            # retried under another job): running the function again would double it.
            ctx.log.info("saga %s moved on; %s job %s is a no-op", saga_id, phase, ctx.job.id)
            return
        if in_transaction:
            # The function runs on the locked row, in the transaction that records the
            # move and completes this job: its writes commit exactly once, with the move.
            with ctx.transaction() as conn:

                def decide_within(s: SagaRecord) -> machine.Decision | None:
                    if not _current(s, step.name, status):
                        return None
                    result = _call(func, ctx, copy.deepcopy(s.data), conn)
                    _stopped(ctx, step, phase)
                    return move(s, as_json(result))

                moved = engine.apply(
                    ctx.driver, conn, saga_id, version, decide_within, by_job=ctx.job.id
                )
        else:
            result = _call(func, ctx, copy.deepcopy(saga.data))
            _stopped(ctx, step, phase)
            stored = as_json(result)  # a result that is not JSON fails before the transaction

            def decide(s: SagaRecord) -> machine.Decision | None:
                return move(s, stored) if _current(s, step.name, status) else None

            with ctx.transaction() as conn:
                moved = engine.apply(ctx.driver, conn, saga_id, version, decide, by_job=ctx.job.id)
        if moved is None:
            ctx.log.info(
                "saga %s moved on meanwhile; %s job %s changed nothing", saga_id, phase, ctx.job.id
            )

    run.__name__ = run.__qualname__ = f"{step.name}_{phase}"
    run.__doc__ = (func.__doc__ or "").strip() or f"{phase} of saga step {step.name}"
    return run


def _register(app: App, name: str, policy: JobPolicy, func: Callable[[Context], None]) -> None:
    if name in app.tasks:
        raise_duplicate = app.tasks[name].func is not func
        if raise_duplicate:
            from rota.errors import TaskDefinitionError

            raise TaskDefinitionError(f"a task named {name!r} is already registered")
        return
    app.task(
        name=name,
        queue=policy.queue,
        priority=policy.priority,
        max_attempts=policy.max_attempts,
        timeout=policy.timeout,
        backoff=policy.backoff,
        permanent=policy.permanent,
    )(func)


def register_step(app: App, step: SagaStep, *, compensation: bool) -> None:
    """Register the task of a step (or of its compensation) on `app`."""
    if compensation:
        assert step.compensate_policy is not None
        _register(
            app, step.compensate_task_name, step.compensate_policy, _runner(step, Phase.COMPENSATE)
        )
    else:
        _register(app, step.task_name, step.policy, _runner(step, Phase.FORWARD))
