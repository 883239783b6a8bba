"""Workflow and Step: declaring a DAG of tasks in code. Everything is checked here, at
declaration, or in `Workflow.spec()` when a run starts, before anything is written."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Sequence
from typing import Any

from rota.errors import ArgumentsError, PayloadError, WorkflowError
from rota.labels import check_queue_name
from rota.payload import encode
from rota.task import Task, check_max_attempts, check_priority
from rota.workflows.dag import topological_order
from rota.workflows.spec import FailurePolicy, StepSpec, WorkflowSpec

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,99}")
MAX_FAN_OUT = 10_000  # static fan-out; a dynamic one may be larger (see plan.MAX_ELEMENTS)


class Step:
    """One node of a workflow: a task, the steps it runs after, and how many jobs it runs.
    Returned by `Workflow.step()`; pass it to `after=` of later steps."""

    def __init__(
        self,
        workflow: Workflow,
        task: Task[Any, Any],
        name: str,
        after: tuple[Step | str, ...],
        fan_out: int | None,
        each: str | None,
        args: dict[str, Any],
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
    ) -> None:
        self.workflow = workflow
        self.task = task
        self.name = name
        self._after = after
        self.fan_out = fan_out
        self.each = each
        self.args = args
        self.queue = queue
        self.priority = priority
        self.max_attempts = max_attempts

    def __repr__(self) -> str:
        shape = (
            f" fan_out={self.fan_out}"
            if self.fan_out
            else f" each={self.each!r}"
            if self.each
            else ""
        )
        return f"<Step {self.workflow.name}.{self.name} task={self.task.name}{shape}>"

    @property
    def after(self) -> tuple[str, ...]:
        """The names of the steps this one runs after."""
        return tuple(p if isinstance(p, str) else p.name for p in self._after)

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(self.task.args_model.names)

    def required(self) -> set[str]:
        """The task's parameters without a default value."""
        signature = inspect.signature(self.task.func)
        params = list(signature.parameters.values())[1 if self.task.takes_context else 0 :]
        return {p.name for p in params if p.default is p.empty}

    def spec(self) -> StepSpec:
        policy = self.task.policy
        return StepSpec(
            name=self.name,
            task=self.task.name,
            after=self.after,
            fan_out=self.fan_out,
            each=self.each,
            args=self.args,
            params=self.params,
            queue=self.queue or policy.queue,
            priority=policy.priority if self.priority is None else self.priority,
            max_attempts=policy.max_attempts if self.max_attempts is None else self.max_attempts,
        )


class Workflow:
    """A DAG of steps, declared once and started many times:

        wf = rota.Workflow("nightly")
        extract = wf.step(extract_orders)
        process = wf.step(process_shard, after=extract, fan_out=20)
        receipts = wf.step(send_receipt, after=process, each="customer")
        wf.step(summarize, after=receipts)
        app.workflows.start(wf, args={"day": "2026-11-29"}, key="nightly-2026-11-29")

    A job of a step receives the workflow's arguments that its task has parameters for,
    the results of the steps it runs after that its task names as parameters, and with
    `each=` one element of its parent's result list.
    """

    def __init__(self, name: str, *, on_failure: FailurePolicy | str = "fail") -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise WorkflowError(
                f"bad workflow name {name!r}: use 1-100 letters, digits and _ . - "
                "(starting with a letter or _)"
            )
        try:
            self.on_failure = FailurePolicy(on_failure)
        except ValueError:
            known = ", ".join(repr(p.value) for p in FailurePolicy)
            raise WorkflowError(
                f"workflow {name!r}: on_failure must be one of {known}, not {on_failure!r}"
            ) from None
        self.name = name
        self._steps: dict[str, Step] = {}

    def __repr__(self) -> str:
        return f"<Workflow {self.name} steps={list(self._steps)}>"

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps.values())

    def __getitem__(self, name: str) -> Step:
        try:
            return self._steps[name]
        except KeyError:
            known = ", ".join(self._steps) or "none"
            raise WorkflowError(
                f"workflow {self.name!r} has no step {name!r} (steps: {known})"
            ) from None

    def step(
        self,
        task: Task[Any, Any],
        *,
        name: str | None = None,
        after: Step | str | Sequence[Step | str] = (),
        fan_out: int | None = None,
        each: str | None = None,
        args: dict[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
    ) -> Step:
        """Add a step that runs `task` once all of `after` completed.

        `fan_out=N` runs N jobs in parallel (each sees `ctx.workflow.index`); `each="x"`
        runs one job per element of the single parent's result list, passing the element
        as argument `x`. `max_attempts` is the step's own retry budget per job."""
        if not isinstance(task, Task):
            raise WorkflowError(
                f"workflow {self.name!r}: a step runs a task (decorate it with @app.task), "
                f"not {task!r}"
            )
        step_name = task.__name__ if name is None else name
        where = f"workflow {self.name!r}, step {step_name!r}"
        if not isinstance(step_name, str) or not _NAME.fullmatch(step_name):
            raise WorkflowError(
                f"{where}: bad step name; use 1-100 letters, digits and _ . - "
                "(starting with a letter or _)"
            )
        if step_name in self._steps:
            raise WorkflowError(
                f"{where}: a step of that name exists already; give this one name=..."
            )
        parents = _parents(self, where, after)
        params = set(task.args_model.names)
        if fan_out is not None and each is not None:
            raise WorkflowError(f"{where}: pass fan_out= (static) or each= (dynamic), not both")
        if fan_out is not None and (
            not isinstance(fan_out, int) or isinstance(fan_out, bool) or fan_out < 1
        ):
            raise WorkflowError(f"{where}: fan_out must be a positive integer, not {fan_out!r}")
        if fan_out is not None and fan_out > MAX_FAN_OUT:
            raise WorkflowError(f"{where}: fan_out is at most {MAX_FAN_OUT}, not {fan_out}")
        if each is not None:
            if not isinstance(each, str) or each not in params:
                raise WorkflowError(
                    f"{where}: each={each!r} names the argument that receives one element, "
                    f"but {task.name} has no such parameter (it takes: "
                    f"{', '.join(sorted(params)) or 'none'})"
                )
            if len(parents) != 1:
                raise WorkflowError(
                    f"{where}: each= fans out over the result of one step: give exactly one "
                    f"after= step, not {len(parents)}"
                )
        fixed = dict(args or {})
        if args is not None and not isinstance(args, dict):
            raise WorkflowError(f"{where}: args must be a dict, not {type(args).__name__}")
        unknown = sorted(set(fixed) - params)
        if unknown:
            raise WorkflowError(
                f"{where}: args {unknown} are not parameters of {task.name} (it takes: "
                f"{', '.join(sorted(params)) or 'none'})"
            )
        try:
            encode(fixed, what=f"args of {where}")
        except PayloadError as exc:
            raise WorkflowError(str(exc)) from None
        if queue is not None:
            check_queue_name(queue, WorkflowError)
        if priority is not None:
            check_priority(priority, WorkflowError)
        if max_attempts is not None:
            check_max_attempts(max_attempts, WorkflowError)
        created = Step(
            self, task, step_name, parents, fan_out, each, fixed, queue, priority, max_attempts
        )
        self._steps[step_name] = created
        return created

    def spec(self) -> WorkflowSpec:
        """Check the whole DAG (unknown steps, cycles) and snapshot it in run order."""
        if not self._steps:
            raise WorkflowError(f"workflow {self.name!r} has no steps: add some with wf.step()")
        order = topological_order(self.name, {s.name: s.after for s in self._steps.values()})
        return WorkflowSpec(
            name=self.name,
            steps=tuple(self._steps[name].spec() for name in order),
            on_failure=self.on_failure,
        )

    def check_args(self, args: dict[str, Any]) -> None:
        """Refuse workflow arguments no step takes, and steps whose required parameters
        nothing provides (a workflow argument, a fixed arg, a parent's result, each=)."""
        if not isinstance(args, dict):
            raise ArgumentsError(
                f"workflow {self.name!r}: args must be a dict, not {type(args).__name__}"
            )
        taken: set[str] = set()
        for step in self._steps.values():
            taken |= set(step.params)
        unknown = sorted(set(args) - taken)
        if unknown:
            raise ArgumentsError(
                f"workflow {self.name!r}: no step takes the arguments {unknown} (the steps' "
                f"tasks take: {', '.join(sorted(taken)) or 'none'})"
            )
        for step in self._steps.values():
            provided = set(args) | set(step.args) | set(step.after)
            if step.each:
                provided.add(step.each)
            missing = sorted(step.required() - provided)
            if missing:
                raise ArgumentsError(
                    f"workflow {self.name!r}, step {step.name!r}: nothing provides the "
                    f"required arguments {missing} of {step.task.name}; pass them in the "
                    "workflow's args, in step(args=...), or name a step it runs after"
                )


def _parents(
    workflow: Workflow, where: str, after: Step | str | Sequence[Step | str]
) -> tuple[Step | str, ...]:
    items: Iterable[Step | str] = (after,) if isinstance(after, Step | str) else after
    if not isinstance(items, Sequence):
        raise WorkflowError(f"{where}: after= takes a step, a step name or a list of them")
    parents: list[Step | str] = []
    for item in items:
        if isinstance(item, Step):
            if item.workflow is not workflow:
                raise WorkflowError(
                    f"{where}: after={item!r} is a step of workflow {item.workflow.name!r}"
                )
        elif not isinstance(item, str):
            raise WorkflowError(f"{where}: after= takes steps or step names, not {item!r}")
        name = item if isinstance(item, str) else item.name
        if name in [p if isinstance(p, str) else p.name for p in parents]:
            raise WorkflowError(f"{where}: step {name!r} is listed twice in after=")
        parents.append(item)
    return tuple(parents)


def chain(
    *tasks: Task[Any, Any],
    name: str | None = None,
    on_failure: FailurePolicy | str = "fail",
) -> Workflow:
    """A workflow that runs `tasks` one after another: `rota.chain(fetch, parse, store)`.
    Each step runs once the one before completed, and receives its result as the argument
    named after it (as any workflow step does); the run's `args` go to every step that
    takes them. Start it like any workflow: `app.workflows.start(chain(...), args={...})`.
    Steps are named after their tasks (a task chained twice gets `_2`, `_3`)."""
    if not tasks:
        raise WorkflowError("chain() needs at least one task")
    names: list[str] = []
    for task in tasks:
        if not isinstance(task, Task):
            raise WorkflowError(f"chain() takes tasks (decorated with @app.task), not {task!r}")
        base = task.__name__
        step_name, n = base, 1
        while step_name in names:
            n += 1
            step_name = f"{base}_{n}"
        names.append(step_name)
    workflow = Workflow(name or ("chain." + "-".join(names))[:100], on_failure=on_failure)
    previous: Step | None = None
    for task, step_name in zip(tasks, names, strict=True):
        previous = workflow.step(task, name=step_name, after=() if previous is None else previous)
    return workflow
