"""The saga state machine as pure functions: which step runs next, which compensations
run (newest first, passing over steps without one), and how results join the data."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

import rota
from rota.sagas import engine, machine
from rota.sagas.store import SagaRecord, SagaStatus

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def plan(*steps: tuple[str, bool]) -> list[dict[str, Any]]:
    saga = rota.Saga("s")
    for name, undoable in steps:
        saga.step(
            lambda data: None, name=name, compensate=(lambda data: None) if undoable else None
        )
    return saga.plan()


def record(
    p: list[dict[str, Any]], status: SagaStatus, step: str | None, **data: Any
) -> SagaRecord:
    return SagaRecord(
        id=1, key="k", name="s", status=status, step=step, version=3, job_id=9, plan=p,
        data=data, error=None, history=(), deadline_at=None, created_at=NOW, updated_at=NOW,
    )  # fmt: skip


PLAN = plan(("a", True), ("b", False), ("c", True), ("d", True))


def test_steps_run_in_order_then_the_saga_completes() -> None:
    d = machine.step_completed(record(PLAN, SagaStatus.RUNNING, "a"), {"x": 1})
    assert (d.status, d.step, d.data) == (SagaStatus.RUNNING, "b", {"x": 1})
    assert d.job is not None and d.job.task == "saga:s/b" and d.job.phase is machine.Phase.FORWARD
    d = machine.step_completed(record(PLAN, SagaStatus.RUNNING, "d", x=1), "last")
    assert (d.status, d.step, d.job) == (SagaStatus.COMPLETED, None, None)
    assert d.data == {"x": 1, "d": "last"}


def test_failure_compensates_completed_steps_newest_first_skipping_those_without() -> None:
    d = machine.step_failed(record(PLAN, SagaStatus.RUNNING, "d"), "boom")
    assert (d.status, d.step, d.error) == (SagaStatus.COMPENSATING, "c", "boom")
    assert d.job is not None and d.job.task == "saga:s/c/compensate"
    d = machine.compensation_completed(record(PLAN, SagaStatus.COMPENSATING, "c"))
    assert d.step == "a"  # b has no compensation
    d = machine.compensation_completed(record(PLAN, SagaStatus.COMPENSATING, "a"))
    assert (d.status, d.step, d.job) == (SagaStatus.COMPENSATED, None, None)


def test_failure_of_the_first_step_has_nothing_to_undo() -> None:
    d = machine.step_failed(record(PLAN, SagaStatus.RUNNING, "a"), "boom")
    assert (d.status, d.job, d.entry["event"]) == (SagaStatus.COMPENSATED, None, "step_failed")
    d = machine.step_failed(record(PLAN, SagaStatus.RUNNING, "b"), "stop", aborted=True)
    assert (d.step, d.entry["event"]) == ("a", "aborted")


def test_a_failed_compensation_stops_and_retry_runs_it_again() -> None:
    d = machine.compensation_failed(record(PLAN, SagaStatus.COMPENSATING, "c"), "down")
    assert (d.status, d.step, d.job) == (SagaStatus.FAILED, "c", None)
    assert d.error == "compensation of 'c' failed: down"
    d = machine.retried(record(PLAN, SagaStatus.FAILED, "c"))
    assert (d.status, d.step) == (SagaStatus.COMPENSATING, "c")
    assert d.job is not None and d.job.phase is machine.Phase.COMPENSATE
    d = machine.retried(record(PLAN, SagaStatus.RUNNING, "b"))
    assert d.job is not None and (d.status, d.job.task) == (SagaStatus.RUNNING, "saga:s/b")


@pytest.mark.parametrize(
    ("result", "merged"),
    [({"y": 2}, {"x": 1, "y": 2}), (None, {"x": 1}), (5, {"x": 1, "st": 5}), ({"x": 9}, {"x": 9})],
)
def test_results_join_the_data(result: Any, merged: dict[str, Any]) -> None:
    assert machine.merge({"x": 1}, "st", result) == merged


def test_a_step_job_names_its_saga_and_the_version_it_expects() -> None:
    job = machine.forward_job(PLAN, 2)
    row = engine.job_row(7, "order-7", 4, job)
    assert (row.task, row.queue, row.args_json) == ("saga:s/c", "default", "{}")
    assert json.loads(row.meta_json or "") == {
        "saga": {"id": 7, "key": "order-7", "version": 4, "step": "c", "phase": "forward"}
    }
    assert engine.saga_ref(json.loads(row.meta_json or "")) == (7, 4, "c", machine.Phase.FORWARD)
    assert engine.saga_ref({}) is None and engine.saga_ref({"saga": {"id": "x"}}) is None


def test_plan_keeps_each_steps_policy() -> None:
    saga = rota.Saga("p", queue="q", max_attempts=4, compensate_attempts=9)
    step = saga.step(lambda data: None, name="one", compensate=lambda ctx, data: None)
    saga.step(lambda data: None, name="two", deadline=60, max_attempts=1)
    assert saga.plan() == [
        {
            "name": "one", "task": "saga:p/one", "queue": "q", "priority": 0, "max_attempts": 4,
            "deadline": None,
            "compensate": {"task": "saga:p/one/compensate", "queue": "q", "priority": 0,
                           "max_attempts": 9},
        },
        {
            "name": "two", "task": "saga:p/two", "queue": "q", "priority": 0, "max_attempts": 1,
            "deadline": 60, "compensate": None,
        },
    ]  # fmt: skip
    assert step({"a": 1}) is None  # calling a step runs its function in-process
    with pytest.raises(rota.TaskDefinitionError, match="already has a compensation"):
        step.compensate(lambda data: None)
