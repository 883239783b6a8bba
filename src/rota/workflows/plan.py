"""The workflow state machine as pure functions: from a snapshot (rows as read) to the one
`Advance` that moves it on. A controller pass, cancel and retry-step all go through here;
the store only applies the result, guarded by the workflow's version."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rota.drivers.base import JobInsert
from rota.errors import RotaError, WorkflowError
from rota.payload import encode
from rota.workflows.dag import descendants
from rota.workflows.records import (
    Advance,
    ElementInsert,
    ElementRow,
    ElementUpdate,
    JobRetry,
    StepRow,
    StepUpdate,
    WorkflowSnapshot,
)
from rota.workflows.spec import FailurePolicy, StepSpec, StepState, WorkflowSpec, WorkflowState

# Turns one job of a step into the row to insert: (step, arguments, meta) -> JobInsert.
# Raises a RotaError when the arguments do not fit the task.
Builder = Callable[[StepSpec, dict[str, Any], dict[str, Any]], JobInsert]

MAX_ELEMENTS = 100_000  # jobs of one dynamic fan-out
_JOB_FAILED = ("discarded", "cancelled")
_JOB_FINISHED = ("completed", "discarded", "cancelled")
_JOB_WAITING = ("available", "scheduled", "retryable")


class _Run:
    """A mutable working copy of one snapshot, recording every change it makes."""

    def __init__(self, snapshot: WorkflowSnapshot) -> None:
        self.snapshot = snapshot
        self.spec = WorkflowSpec.from_json(snapshot.workflow.spec)
        self.steps: dict[str, StepRow] = dict(snapshot.steps)
        self.elements: dict[str, list[ElementRow]] = {s.name: [] for s in self.spec.steps}
        for element in snapshot.elements:
            self.elements.setdefault(element.step, []).append(element)
        for rows in self.elements.values():
            rows.sort(key=lambda e: e.index)
        self.step_updates: dict[str, StepUpdate] = {}
        self.element_updates: list[ElementUpdate] = []
        self.inserts: list[ElementInsert] = []
        self.cancel_jobs: list[int] = []
        self.retry_jobs: list[JobRetry] = []
        self.notes: list[str] = []

    def state(self, step: str) -> StepState:
        return StepState(self.steps[step].state)

    def set_step(
        self,
        step: str,
        state: StepState,
        *,
        total: int | None = None,
        result: Any = None,
        error: str | None = None,
    ) -> None:
        old = self.steps[step]
        total = old.total if total is None else total
        self.steps[step] = StepRow(step, str(state), total, result, error)
        self.step_updates[step] = StepUpdate(
            step,
            str(state),
            total,
            None if result is None else encode(result, what=f"the result of step {step!r}"),
            error,
        )
        self.notes.append(f"step {step} {state}" + (f": {error}" if error else ""))

    def change(self, state: WorkflowState | None = None, error: str | None = None) -> Advance:
        workflow = self.snapshot.workflow
        return Advance(
            workflow_id=workflow.id,
            version=workflow.version,
            state=None if state is None else str(state),
            error=error,
            steps=tuple(self.step_updates.values()),
            elements=tuple(self.element_updates),
            inserts=tuple(self.inserts),
            cancel_jobs=tuple(self.cancel_jobs),
            retry_jobs=tuple(self.retry_jobs),
            notes=tuple(self.notes),
        )


def advance(snapshot: WorkflowSnapshot, build: Builder) -> Advance:
    """The next change of a running workflow: record the jobs that finished, settle the
    steps whose jobs all finished, apply the failure policy, start the steps whose
    parents all completed, and finish the workflow when every step has."""
    if snapshot.workflow.state != WorkflowState.RUNNING:
        return Advance(snapshot.workflow.id, snapshot.workflow.version)
    run = _Run(snapshot)
    _observe(run)
    _settle(run)
    policy = run.spec.on_failure
    if policy is FailurePolicy.FAIL and _failed(run):
        return _fail(run)
    _start_ready(run, build)
    if policy is FailurePolicy.FAIL and _failed(run):
        # A step failed while starting (its input did not fit): nothing started in this
        # pass may run, so drop this pass's inserts with the rest.
        run.inserts.clear()
        return _fail(run)
    if all(run.state(s.name).finished for s in run.spec.steps):
        failed = [s.name for s in run.spec.steps if run.state(s.name) is StepState.FAILED]
        if failed:
            return run.change(WorkflowState.FAILED, _failure_summary(run, failed))
        return run.change(WorkflowState.COMPLETED)
    return run.change()


def cancel(snapshot: WorkflowSnapshot) -> Advance:
    """Cancel a running workflow: its unfinished steps become cancelled, waiting jobs are
    cancelled and running ones asked to stop."""
    if snapshot.workflow.state != WorkflowState.RUNNING:
        raise WorkflowError(
            f"workflow {snapshot.workflow.id} is {snapshot.workflow.state}: only a running "
            "workflow can be cancelled"
        )
    run = _Run(snapshot)
    _stop_unfinished(run)
    return run.change(WorkflowState.CANCELLED, "cancelled by request")


def retry_step(snapshot: WorkflowSnapshot, step: str) -> Advance:
    """Run a failed step's failed jobs again with a fresh retry budget. What the failure
    cancelled or skipped is put back too, and the workflow runs again."""
    workflow = snapshot.workflow
    run = _Run(snapshot)
    spec = run.spec.step(step)
    if workflow.state not in (WorkflowState.RUNNING, WorkflowState.FAILED):
        raise WorkflowError(
            f"workflow {workflow.id} is {workflow.state}: only the steps of a running or "
            "failed workflow can be retried"
        )
    if run.state(step) is not StepState.FAILED:
        raise WorkflowError(
            f"step {step!r} of workflow {workflow.id} is {run.state(step)}: only a failed "
            "step can be retried"
        )
    _revive(run, spec)
    blocked = descendants(run.spec.edges, step)
    for other in run.spec.steps:
        state = run.state(other.name)
        if state is StepState.CANCELLED or (state is StepState.SKIPPED and other.name in blocked):
            _revive(run, other)
    return run.change(WorkflowState.RUNNING)


# --- the passes ------------------------------------------------------------------------------


def _observe(run: _Run) -> None:
    """Record the outcome of every job of a running step that has finished."""
    for spec in run.spec.steps:
        if run.state(spec.name) is not StepState.RUNNING:
            continue
        rows = run.elements[spec.name]
        for i, element in enumerate(rows):
            if element.state != "pending":
                continue
            error: str | None
            if element.job_id is None or element.job_state is None:
                state, result, error = "discarded", None, "its job was deleted before it finished"
            elif element.job_state in _JOB_FINISHED:
                state, result = element.job_state, element.job_result
                error = None if state == "completed" else (element.job_error or state)
            else:
                continue
            rows[i] = ElementRow(
                element.step,
                element.index,
                element.job_id,
                state,
                result,
                error,
                element.job_state,
                element.job_result,
                element.job_error,
                element.attempt,
            )
            run.element_updates.append(
                ElementUpdate(
                    element.step,
                    element.index,
                    state,
                    None if result is None else encode(result, what="a step job's result"),
                    error,
                )
            )


def _settle(run: _Run) -> None:
    """A running step completes when all its jobs completed; it fails when one failed and
    (with on_failure="continue") the rest have finished."""
    for spec in run.spec.steps:
        if run.state(spec.name) is not StepState.RUNNING:
            continue
        rows = run.elements[spec.name]
        failed = [e for e in rows if e.state in _JOB_FAILED]
        unfinished = [e for e in rows if e.state == "pending"]
        if failed and (run.spec.on_failure is FailurePolicy.FAIL or not unfinished):
            first = failed[0]
            where = f"job {first.job_id}" + (f" (element {first.index})" if spec.fans_out else "")
            count = f"{len(failed)} of {len(rows)} jobs failed; " if len(rows) > 1 else ""
            run.set_step(
                spec.name, StepState.FAILED, error=f"{count}{where} {first.state}: {first.error}"
            )
        elif not unfinished:
            results = [e.result for e in rows]
            run.set_step(
                spec.name,
                StepState.COMPLETED,
                result=results if spec.fans_out else (results[0] if results else None),
            )


def _start_ready(run: _Run, build: Builder) -> None:
    """Start every pending step whose parents completed (in topological order, so a step
    that completes at once, an empty fan-out, lets its children start in the same pass)."""
    for spec in run.spec.steps:
        if run.state(spec.name) is not StepState.PENDING:
            continue
        parents = [run.state(p) for p in spec.after]
        blocked = [
            p
            for p, state in zip(spec.after, parents, strict=True)
            if state in (StepState.FAILED, StepState.SKIPPED, StepState.CANCELLED)
        ]
        if blocked:
            if run.spec.on_failure is FailurePolicy.CONTINUE:
                run.set_step(
                    spec.name, StepState.SKIPPED, error=f"step {blocked[0]!r} did not complete"
                )
            continue
        if all(state is StepState.COMPLETED for state in parents):
            _start(run, spec, build)


def _start(run: _Run, spec: StepSpec, build: Builder) -> None:
    workflow = run.snapshot.workflow
    try:
        items = _elements(run, spec)
        args = {k: v for k, v in workflow.args.items() if k in spec.params}
        args.update(spec.args)
        for parent in spec.after:
            if parent in spec.params:
                args[parent] = run.steps[parent].result
        total = len(items) if items is not None else (spec.fan_out or 1)
        rows = []
        for index in range(total):
            job_args = dict(args)
            if items is not None and spec.each is not None:
                job_args[spec.each] = items[index]
            meta = {
                "workflow": {
                    "id": workflow.id,
                    "name": workflow.name,
                    "step": spec.name,
                    "index": index,
                    "total": total,
                }
            }
            rows.append(ElementInsert(spec.name, index, build(spec, job_args, meta)))
    except RotaError as exc:
        run.set_step(spec.name, StepState.FAILED, error=str(exc))
        return
    if not rows:
        run.set_step(spec.name, StepState.COMPLETED, total=0, result=[])
        return
    run.inserts.extend(rows)
    run.elements[spec.name] = [
        ElementRow(spec.name, r.index, None, "pending", job_state="available") for r in rows
    ]
    run.set_step(spec.name, StepState.RUNNING, total=len(rows))


def _elements(run: _Run, spec: StepSpec) -> list[Any] | None:
    """The list a dynamic fan-out runs over (None for other steps). A parent that fanned
    out itself gives one list per job: those are joined in index order."""
    if spec.each is None:
        return None
    parent = run.spec.step(spec.after[0])
    value = run.steps[parent.name].result
    if parent.fans_out:
        items: list[Any] = []
        for i, part in enumerate(value or []):
            if not isinstance(part, list):
                raise WorkflowError(
                    f"step {spec.name!r} runs once per element of {parent.name!r}'s results, "
                    f"but job {i} of {parent.name!r} returned {type(part).__name__}, not a list"
                )
            items.extend(part)
    elif isinstance(value, list):
        items = value
    else:
        raise WorkflowError(
            f"step {spec.name!r} runs once per element of {parent.name!r}'s result, which "
            f"must be a list, not {type(value).__name__}"
        )
    if len(items) > MAX_ELEMENTS:
        raise WorkflowError(
            f"step {spec.name!r} would run {len(items)} jobs, over the limit of {MAX_ELEMENTS}"
        )
    return items


def _failed(run: _Run) -> list[str]:
    return [s.name for s in run.spec.steps if run.state(s.name) is StepState.FAILED]


def _fail(run: _Run) -> Advance:
    failed = _failed(run)
    _stop_unfinished(run)
    return run.change(WorkflowState.FAILED, _failure_summary(run, failed))


def _stop_unfinished(run: _Run) -> None:
    for spec in run.spec.steps:
        if run.state(spec.name).finished:
            continue
        for element in run.elements[spec.name]:
            unfinished = element.job_state not in _JOB_FINISHED
            if element.state == "pending" and element.job_id is not None and unfinished:
                run.cancel_jobs.append(element.job_id)
                if element.job_state in _JOB_WAITING:
                    # Cancelled at once (a running one only when it stops): record it now,
                    # since no pass looks at a finished run's jobs again.
                    run.element_updates.append(
                        ElementUpdate(spec.name, element.index, "cancelled", error="cancelled")
                    )
        run.set_step(spec.name, StepState.CANCELLED)


def _failure_summary(run: _Run, failed: list[str]) -> str:
    first = run.steps[failed[0]]
    more = f" (and {len(failed) - 1} more failed steps)" if len(failed) > 1 else ""
    return f"step {failed[0]!r} failed: {first.error}{more}"


def _revive(run: _Run, spec: StepSpec) -> None:
    """Put a failed, cancelled or skipped step back: its failed jobs run again; a step
    that never got jobs waits for its parents again."""
    rows = run.elements[spec.name]
    if not rows:
        run.set_step(spec.name, StepState.PENDING)
        return
    for element in rows:
        if element.current not in _JOB_FAILED:
            continue
        if element.job_id is None or element.job_state is None:
            raise WorkflowError(
                f"job {element.index} of step {spec.name!r} was deleted; it cannot be retried "
                "(start the workflow again under a new key)"
            )
        run.retry_jobs.append(JobRetry(element.job_id, spec.max_attempts))
        run.element_updates.append(ElementUpdate(spec.name, element.index, "pending"))
    run.set_step(spec.name, StepState.RUNNING)
