"""Declaring workflows (pure logic, no database): DAG checks (cycles, unknown and duplicate
steps), fan-out and argument rules, the stored snapshot, and the state machine's
decisions on hand-made snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import rota
from rota.drivers.base import JobInsert
from rota.payload import encode
from rota.workflows import plan
from rota.workflows.dag import descendants, topological_order
from rota.workflows.records import ElementRow, StepRow, WorkflowRow, WorkflowSnapshot
from rota.workflows.spec import StepSpec, StepState, WorkflowSpec


@pytest.fixture
def app(tmp_path: Path) -> Iterator[rota.App]:
    instance = rota.App(f"sqlite:///{tmp_path / 'never-opened.db'}")
    yield instance
    instance.close()


@pytest.fixture
def tasks(app: rota.App) -> dict[str, rota.Task[Any, Any]]:
    @app.task
    def extract(day: str) -> list[int]:
        return []

    @app.task
    def process(ctx: rota.Context, extract: list[int], day: str = "") -> list[str]:
        return []

    @app.task
    def receipt(customer: str) -> None:
        pass

    @app.task
    def summary(receipt: list[Any]) -> None:
        pass

    return {t.__name__: t for t in (extract, process, receipt, summary)}


# --- the DAG --------------------------------------------------------------------------------


def test_topological_order_is_stable_and_follows_dependencies() -> None:
    edges = {"a": (), "b": ("a",), "c": (), "d": ("b", "c"), "e": ("a",)}
    assert topological_order("w", edges) == ["a", "b", "c", "d", "e"]
    assert topological_order("w", {"z": ("y",), "y": ()}) == ["y", "z"]
    assert descendants(edges, "a") == {"b", "d", "e"}
    assert descendants(edges, "d") == set()


def test_a_cycle_is_refused_with_its_path() -> None:
    with pytest.raises(rota.WorkflowError, match=r"has a cycle: a -> b -> c -> a"):
        topological_order("w", {"a": ("c",), "b": ("a",), "c": ("b",), "d": ()})
    with pytest.raises(rota.WorkflowError, match="step 'a' runs after itself"):
        topological_order("w", {"a": ("a",)})
    # A step behind a cycle is blocked too, but the cycle named is the real one.
    with pytest.raises(rota.WorkflowError, match=r"cycle: x -> y -> x; a workflow must be"):
        topological_order("w", {"tail": ("x",), "x": ("y",), "y": ("x",)})


def test_cycles_and_unknown_steps_declared_by_name_are_refused_at_spec(
    tasks: dict[str, rota.Task[Any, Any]],
) -> None:
    wf = rota.Workflow("loop")
    wf.step(tasks["extract"], after="summary")
    wf.step(tasks["summary"], after="extract")
    with pytest.raises(rota.WorkflowError, match="has a cycle: extract -> summary -> extract"):
        wf.spec()

    typo = rota.Workflow("typo")
    typo.step(tasks["extract"])
    typo.step(tasks["summary"], after="extarct")
    with pytest.raises(
        rota.WorkflowError,
        match=r"step 'summary' runs after 'extarct', which is not a step of this workflow "
        r"\(steps: extract, summary\)",
    ):
        typo.spec()
    with pytest.raises(rota.WorkflowError, match="has no steps"):
        rota.Workflow("empty").spec()


def test_duplicate_step_names_are_refused(tasks: dict[str, rota.Task[Any, Any]]) -> None:
    wf = rota.Workflow("dupes")
    wf.step(tasks["extract"])
    with pytest.raises(rota.WorkflowError, match="a step of that name exists already"):
        wf.step(tasks["extract"])
    second = wf.step(tasks["extract"], name="extract-again")
    assert second.name == "extract-again" and wf["extract-again"] is second
    with pytest.raises(rota.WorkflowError, match="listed twice in after="):
        wf.step(tasks["summary"], after=["extract", wf["extract"]])
    with pytest.raises(rota.WorkflowError, match="has no step 'nope'"):
        wf["nope"]


def test_step_options_are_checked_at_declaration(tasks: dict[str, rota.Task[Any, Any]]) -> None:
    wf = rota.Workflow("checks")
    e = wf.step(tasks["extract"])
    p = wf.step(tasks["process"], after=e, fan_out=4)
    with pytest.raises(rota.WorkflowError, match="a step runs a task"):
        wf.step(print)  # type: ignore[arg-type]
    with pytest.raises(rota.WorkflowError, match="bad step name"):
        wf.step(tasks["summary"], name="no spaces")
    with pytest.raises(rota.WorkflowError, match="not both"):
        wf.step(tasks["receipt"], after=p, fan_out=2, each="customer")
    for bad in (0, -1, True, 2.5):
        with pytest.raises(rota.WorkflowError, match="fan_out must be a positive integer"):
            wf.step(tasks["summary"], fan_out=bad)  # type: ignore[arg-type]
    with pytest.raises(rota.WorkflowError, match="fan_out is at most 10000"):
        wf.step(tasks["summary"], fan_out=10_001)
    with pytest.raises(rota.WorkflowError, match=r"has no such parameter \(it takes: customer\)"):
        wf.step(tasks["receipt"], after=p, each="client")
    with pytest.raises(rota.WorkflowError, match="give exactly one after= step, not 0"):
        wf.step(tasks["receipt"], each="customer")
    with pytest.raises(rota.WorkflowError, match="give exactly one after= step, not 2"):
        wf.step(tasks["receipt"], after=[e, p], each="customer")
    with pytest.raises(rota.WorkflowError, match=r"args \['nope'\] are not parameters"):
        wf.step(tasks["summary"], args={"nope": 1})
    with pytest.raises(rota.WorkflowError, match="not JSON"):
        wf.step(tasks["summary"], args={"receipt": {1, 2}})
    with pytest.raises(rota.WorkflowError, match="max_attempts must be an integer"):
        wf.step(tasks["summary"], max_attempts=0)
    with pytest.raises(rota.WorkflowError, match="bad queue name"):
        wf.step(tasks["summary"], queue="a b")
    with pytest.raises(rota.WorkflowError, match="priority must be"):
        wf.step(tasks["summary"], priority=1000)
    other = rota.Workflow("other")
    with pytest.raises(rota.WorkflowError, match="is a step of workflow 'checks'"):
        other.step(tasks["summary"], after=e)
    with pytest.raises(rota.WorkflowError, match="after= takes steps or step names"):
        wf.step(tasks["summary"], after=[3])  # type: ignore[list-item]
    with pytest.raises(rota.WorkflowError, match="on_failure must be one of 'fail', 'continue'"):
        rota.Workflow("x", on_failure="ignore")
    with pytest.raises(rota.WorkflowError, match="bad workflow name"):
        rota.Workflow("")
    assert [s.name for s in wf.steps] == ["extract", "process"]  # nothing half-added


def test_workflow_arguments_must_be_taken_and_required_ones_provided(
    tasks: dict[str, rota.Task[Any, Any]],
) -> None:
    wf = rota.Workflow("args")
    e = wf.step(tasks["extract"])
    p = wf.step(tasks["process"], after=e)  # `extract` comes from the parent's result
    wf.step(tasks["receipt"], after=p, each="customer")
    wf.check_args({"day": "mon"})
    with pytest.raises(rota.ArgumentsError, match=r"no step takes the arguments \['dya'\]"):
        wf.check_args({"day": "mon", "dya": "x"})
    with pytest.raises(rota.ArgumentsError, match=r"step 'extract'.*required arguments \['day'\]"):
        wf.check_args({})
    with pytest.raises(rota.ArgumentsError, match="args must be a dict"):
        wf.check_args(["day"])  # type: ignore[arg-type]


def test_the_snapshot_keeps_the_run_order_and_each_steps_policy(
    tasks: dict[str, rota.Task[Any, Any]],
) -> None:
    wf = rota.Workflow("snap", on_failure="continue")
    s = wf.step(tasks["summary"], after="receipt", queue="reports", priority=-5)
    wf.step(tasks["receipt"], after="process", each="customer", max_attempts=3)
    wf.step(tasks["process"], after="extract", fan_out=2, args={"day": "x"})
    wf.step(tasks["extract"])
    spec = wf.spec()
    assert [st.name for st in spec.steps] == ["extract", "process", "receipt", "summary"]
    assert spec.step("receipt").max_attempts == 3 and spec.step("extract").max_attempts == 20
    assert (spec.step("summary").queue, spec.step("summary").priority) == ("reports", -5)
    assert spec.step("process").params == ("extract", "day") and spec.step("process").fans_out
    assert WorkflowSpec.from_json(spec.to_json()) == spec
    assert repr(s) == f"<Step snap.summary task={tasks['summary'].name}>"
    with pytest.raises(rota.WorkflowError, match="stored workflow definition has version 9"):
        WorkflowSpec.from_json({**spec.to_json(), "version": 9})


# --- the state machine on hand-made snapshots -----------------------------------------------


def _snapshot(
    spec: WorkflowSpec,
    steps: dict[str, tuple[str, Any]],
    elements: tuple[ElementRow, ...] = (),
) -> WorkflowSnapshot:
    row = WorkflowRow(
        1,
        spec.name,
        None,
        "running",
        str(spec.on_failure),
        spec.to_json(),
        {},
        7,
        datetime.now(UTC),
    )
    return WorkflowSnapshot(
        row,
        {n: StepRow(n, state, result=result) for n, (state, result) in steps.items()},
        elements,
    )


def _build(step: StepSpec, args: dict[str, Any], meta: dict[str, Any]) -> JobInsert:
    return JobInsert(
        step.task,
        step.queue,
        encode(args),
        step.priority,
        step.max_attempts,
        meta_json=encode(meta),
    )


def _spec(policy: str = "fail") -> WorkflowSpec:
    from rota.workflows.spec import FailurePolicy

    return WorkflowSpec(
        "hand",
        (
            StepSpec("a", "t.a"),
            StepSpec("b", "t.b", after=("a",), params=("a",)),
            StepSpec("c", "t.c", after=("a",), fan_out=2),
            StepSpec("d", "t.d", after=("b", "c"), params=("b", "c")),
        ),
        FailurePolicy(policy),
    )


def test_a_finished_job_completes_its_step_and_starts_the_children_with_its_result() -> None:
    done = ElementRow("a", 0, 11, "pending", job_state="completed", job_result=[1, 2])
    snap = _snapshot(
        _spec(),
        {
            "a": ("running", None),
            "b": ("pending", None),
            "c": ("pending", None),
            "d": ("pending", None),
        },
        (done,),
    )
    change = plan.advance(snap, _build)
    assert change.version == 7 and change.state is None
    assert [(e.step, e.state, e.result_json) for e in change.elements] == [
        ("a", "completed", "[1,2]")
    ]
    assert [(u.step, u.state, u.total) for u in change.steps] == [
        ("a", "completed", None),
        ("b", "running", 1),
        ("c", "running", 2),
    ]
    assert [(i.step, i.index, i.job.args_json) for i in change.inserts] == [
        ("b", 0, '{"a":[1,2]}'),
        ("c", 0, "{}"),
        ("c", 1, "{}"),
    ]
    assert '"index":1,"total":2' in (change.inserts[2].job.meta_json or "")


def test_nothing_to_do_is_an_empty_change() -> None:
    waiting = ElementRow("a", 0, 11, "pending", job_state="running")
    snap = _snapshot(
        _spec(),
        {
            "a": ("running", None),
            "b": ("pending", None),
            "c": ("pending", None),
            "d": ("pending", None),
        },
        (waiting,),
    )
    assert plan.advance(snap, _build).empty


@pytest.mark.parametrize("policy", ["fail", "continue"])
def test_a_failed_job_under_each_policy(policy: str) -> None:
    elements = (
        ElementRow("b", 0, 21, "pending", job_state="discarded", job_error="ValueError: no"),
        ElementRow("c", 0, 22, "pending", job_state="running"),
        ElementRow("c", 1, 23, "pending", job_state="available"),
    )
    snap = _snapshot(
        _spec(policy),
        {
            "a": ("completed", 1),
            "b": ("running", None),
            "c": ("running", None),
            "d": ("pending", None),
        },
        elements,
    )
    change = plan.advance(snap, _build)
    states = {u.step: u.state for u in change.steps}
    if policy == "fail":
        assert change.state == "failed" and change.cancel_jobs == (22, 23)
        assert states == {"b": "failed", "c": "cancelled", "d": "cancelled"}
        assert change.error == "step 'b' failed: job 21 discarded: ValueError: no"
    else:
        # c runs on; d needs b, so it is skipped; the run is not finished yet.
        assert change.state is None and change.cancel_jobs == ()
        assert states == {"b": "failed", "d": "skipped"}


def test_retry_step_revives_the_failure_and_what_it_cancelled() -> None:
    elements = (
        ElementRow("b", 0, 21, "discarded", job_state="discarded", error="no"),
        ElementRow("c", 0, 22, "completed", job_state="completed"),
        ElementRow("c", 1, 23, "pending", job_state="cancelled"),
    )
    snapshot = _snapshot(
        _spec(),
        {
            "a": ("completed", 1),
            "b": ("failed", None),
            "c": ("cancelled", None),
            "d": ("cancelled", None),
        },
        elements,
    )
    failed = WorkflowSnapshot(
        WorkflowRow(**{**snapshot.workflow.__dict__, "state": "failed"}),
        snapshot.steps,
        snapshot.elements,
    )
    change = plan.retry_step(failed, "b")
    assert change.state == "running"
    assert [(r.job_id, r.budget) for r in change.retry_jobs] == [(21, 20), (23, 20)]
    assert {u.step: u.state for u in change.steps} == {
        "b": "running",
        "c": "running",
        "d": "pending",
    }
    with pytest.raises(rota.WorkflowError, match="step 'c' of workflow 1 is cancelled"):
        plan.retry_step(failed, "c")
    assert StepState.SKIPPED.finished and not StepState.RUNNING.finished
