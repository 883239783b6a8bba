"""Saga definitions: a named, ordered list of steps, each with an optional compensation,
and the plan (task names and job policy) a started saga stores and follows."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from rota.errors import TaskDefinitionError
from rota.labels import check_queue_name
from rota.retry import Backoff
from rota.task import check_max_attempts, check_priority, takes_context

if TYPE_CHECKING:
    from rota.app import App

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")

StepFunc = Callable[..., Any]


def check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise TaskDefinitionError(
            f"bad {kind} name {name!r}: use 1-100 letters, digits and _ . : - "
            "(starting with a letter or digit)"
        )
    return name


def _check_seconds(what: str, value: float | None) -> None:
    if value is not None and (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (value > 0 and math.isfinite(value))
    ):
        raise TaskDefinitionError(f"{what} must be a positive number of seconds or None")


def _check_func(what: str, func: object, *, transaction: bool = False) -> None:
    """A step or compensation takes the saga's data, after an optional ctx, and the
    transaction's connection after the data when it runs in the transaction."""
    if not callable(func):
        raise TaskDefinitionError(f"{what} must be a function, not {func!r}")
    if inspect.iscoroutinefunction(func):
        raise TaskDefinitionError(f"{what} {func!r} is async: saga steps are sync functions")
    params = list(inspect.signature(func).parameters.values())
    expected = (2 if params and takes_context(func) else 1) + (1 if transaction else 0)
    if len(params) != expected:
        shape = "(data, conn) or (ctx, data, conn)" if transaction else "(data) or (ctx, data)"
        raise TaskDefinitionError(
            f"{what} {getattr(func, '__name__', func)!r} must take {shape}: the saga's data "
            "dict, after an optional rota.Context"
            + (", then the transaction's connection" if transaction else "")
        )


@dataclass(frozen=True)
class JobPolicy:
    """How the jobs of one step (or one compensation) are queued and retried."""

    queue: str
    priority: int
    max_attempts: int
    timeout: float | None
    backoff: Backoff
    permanent: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        check_queue_name(self.queue, TaskDefinitionError)
        check_priority(self.priority, TaskDefinitionError)
        check_max_attempts(self.max_attempts, TaskDefinitionError)
        _check_seconds("timeout", self.timeout)


class SagaStep:
    """One step: `func(ctx, data)` does the work and returns what to add to the data;
    `compensate(ctx, data)` undoes it when a later step fails. Call it to run the
    function in-process (tests)."""

    def __init__(
        self,
        saga: Saga,
        func: StepFunc,
        name: str,
        policy: JobPolicy,
        deadline: float | None,
        transaction: bool = False,
    ) -> None:
        self.saga = saga
        self.func = func
        self.name = name
        self.policy = policy
        self.deadline = deadline
        # Run the function inside the transaction that records the move (it gets `conn`).
        self.transaction = transaction
        self.compensate_func: StepFunc | None = None
        self.compensate_policy: JobPolicy | None = None
        self.compensate_transaction = False

    def __repr__(self) -> str:
        return f"<SagaStep {self.saga.name}/{self.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    @property
    def task_name(self) -> str:
        return f"saga:{self.saga.name}/{self.name}"

    @property
    def compensate_task_name(self) -> str:
        return f"saga:{self.saga.name}/{self.name}/compensate"

    @overload
    def compensate(self, func: StepFunc, /) -> StepFunc: ...

    @overload
    def compensate(
        self,
        func: None = None,
        /,
        *,
        queue: str | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        backoff: Backoff | None = None,
        transaction: bool = False,
    ) -> Callable[[StepFunc], StepFunc]: ...

    def compensate(
        self,
        func: StepFunc | None = None,
        /,
        *,
        queue: str | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        backoff: Backoff | None = None,
        transaction: bool = False,
    ) -> Any:
        """Declare how to undo this step: `@reserve_stock.compensate`."""

        def register(fn: StepFunc) -> StepFunc:
            if self.compensate_func is not None:
                raise TaskDefinitionError(f"step {self.name!r} already has a compensation")
            _check_func(f"the compensation of step {self.name!r}", fn, transaction=transaction)
            saga = self.saga
            self.compensate_policy = JobPolicy(
                queue=queue or saga.queue,
                priority=saga.priority,
                max_attempts=saga.compensate_attempts if max_attempts is None else max_attempts,
                timeout=timeout,
                backoff=backoff or saga.backoff,
            )
            self.compensate_func = fn
            self.compensate_transaction = transaction
            saga._added(self, compensation=True)
            return fn

        return register(func) if func is not None else register

    def plan(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            "task": self.task_name,
            "queue": self.policy.queue,
            "priority": self.policy.priority,
            "max_attempts": self.policy.max_attempts,
            "deadline": self.deadline,
            "compensate": None,
        }
        if self.compensate_policy is not None:
            entry["compensate"] = {
                "task": self.compensate_task_name,
                "queue": self.compensate_policy.queue,
                "priority": self.compensate_policy.priority,
                "max_attempts": self.compensate_policy.max_attempts,
            }
        return entry


class Saga:
    """An orchestrated process: ordered steps, each with an optional compensation.

        fulfilment = rota.Saga("order-fulfilment")

        @fulfilment.step(max_attempts=5, timeout=30)
        def reserve_stock(ctx, data): ...

        @reserve_stock.compensate
        def release_stock(ctx, data): ...

        app.sagas.register(fulfilment)

    Defaults for every step's jobs are set here; each step may override them.
    """

    def __init__(
        self,
        name: str,
        *,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = 5,
        compensate_attempts: int = 20,
        timeout: float | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.name = check_name("saga", name)
        check_queue_name(queue, TaskDefinitionError)
        check_priority(priority, TaskDefinitionError)
        check_max_attempts(max_attempts, TaskDefinitionError)
        check_max_attempts(compensate_attempts, TaskDefinitionError)
        _check_seconds("timeout", timeout)
        self.queue = queue
        self.priority = priority
        self.max_attempts = max_attempts
        self.compensate_attempts = compensate_attempts
        self.timeout = timeout
        self.backoff = backoff or Backoff()
        self.steps: list[SagaStep] = []
        self._apps: list[App] = []

    def __repr__(self) -> str:
        return f"<Saga {self.name} steps={[s.name for s in self.steps]}>"

    @overload
    def step(self, func: StepFunc, /, *, compensate: StepFunc | None = None) -> SagaStep: ...

    @overload
    def step(
        self,
        func: None = None,
        /,
        *,
        compensate: StepFunc | None = None,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        backoff: Backoff | None = None,
        permanent: Sequence[type[BaseException]] = (),
        transaction: bool = False,
    ) -> Callable[[StepFunc], SagaStep]: ...

    def step(
        self,
        func: StepFunc | None = None,
        /,
        *,
        compensate: StepFunc | None = None,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        backoff: Backoff | None = None,
        permanent: Sequence[type[BaseException]] = (),
        transaction: bool = False,
    ) -> Any:
        """Add the next step: `@saga.step`, `@saga.step(timeout=30)` or
        `saga.step(reserve_stock, compensate=release_stock)`.

        `timeout` bounds one attempt, `max_attempts` how often it is tried, and
        `deadline` the step in all (from when its first job is queued): a step past
        any of them has failed, and the completed steps are compensated.

        With `transaction=True` the function runs inside the transaction that records
        its result and queues the next step, and gets that transaction's connection
        after the data: its writes to this database happen exactly once."""
        _check_seconds("deadline", deadline)
        policy = JobPolicy(
            queue=queue or self.queue,
            priority=self.priority,
            max_attempts=self.max_attempts if max_attempts is None else max_attempts,
            timeout=self.timeout if timeout is None else timeout,
            backoff=backoff or self.backoff,
            permanent=tuple(permanent),
        )

        def register(fn: StepFunc) -> SagaStep:
            step_name = check_name("step", name or getattr(fn, "__name__", ""))
            _check_func(f"step {step_name!r}", fn, transaction=transaction)
            if any(s.name == step_name for s in self.steps):
                raise TaskDefinitionError(
                    f"saga {self.name!r} already has a step named {step_name!r}"
                )
            added = SagaStep(self, fn, step_name, policy, deadline, transaction)
            self.steps.append(added)
            self._added(added, compensation=False)
            if compensate is not None:
                added.compensate(compensate)
            return added

        return register(func) if func is not None else register

    def get_step(self, name: str) -> SagaStep:
        for step in self.steps:
            if step.name == name:
                return step
        raise TaskDefinitionError(f"saga {self.name!r} has no step {name!r}")

    def plan(self) -> list[dict[str, Any]]:
        """What a started saga stores: its steps with their task names and job policy."""
        if not self.steps:
            raise TaskDefinitionError(f"saga {self.name!r} has no steps: add one with @saga.step")
        return [s.plan() for s in self.steps]

    def _added(self, step: SagaStep, *, compensation: bool) -> None:
        """Steps added after registration are registered on the app(s) too."""
        from rota.sagas.runner import register_step

        for app in self._apps:
            register_step(app, step, compensation=compensation)
