"""The batch controller's decision for one pass, as a pure function: observe the
attempts that finished, count failures by the rules, then decide the condition, which
attempts to cancel and which indexes to start (SEMANTICS §2, Kubernetes job_controller)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from rota.batches.spec import Action, BatchSpec, FailureRule
from rota.job import JobState


class ItemState(enum.StrEnum):
    """One index (or item) of a batch."""

    PENDING = "pending"  # waiting for an attempt (or for its back-off)
    ACTIVE = "active"  # an attempt (a job) exists and has not been observed finished
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # per-index limit exceeded, or a fail_index rule matched


class Reason(enum.StrEnum):
    BACKOFF_LIMIT = "BackoffLimitExceeded"
    DEADLINE = "DeadlineExceeded"
    POD_FAILURE_POLICY = "PodFailurePolicy"
    FAILED_INDEXES = "FailedIndexes"
    MAX_FAILED_INDEXES = "MaxFailedIndexesExceeded"
    SUCCESS_POLICY = "SuccessPolicy"
    COMPLETIONS_REACHED = "CompletionsReached"
    CANCELLED = "Cancelled"  # ours: `rota batches cancel`


FAILURE_TARGET = "FailureTarget"
SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
COMPLETE = "Complete"
FAILED = "Failed"


@dataclass(frozen=True)
class Attempt:
    """An index's current job as the controller sees it."""

    job_id: int
    state: JobState | None  # None: the job is gone (deleted or pruned)
    cancel_requested: bool = False
    finished_at: datetime | None = None
    error_type: str | None = None
    message: str | None = None
    condition: str | None = None  # DisruptionTarget
    reason: str | None = None  # WorkerLost, WorkerShutdown


@dataclass(frozen=True)
class Item:
    index: int
    state: ItemState = ItemState.PENDING
    failures: int = 0  # counted failures of this index (per-index limit and back-off)
    last_failure_at: datetime | None = None
    attempt: Attempt | None = None  # set while ACTIVE


@dataclass(frozen=True)
class Condition:
    type: str  # FailureTarget / SuccessCriteriaMet (interim), Failed / Complete (final)
    reason: str
    message: str = ""


@dataclass(frozen=True)
class BatchState:
    """The status the controller keeps on the batch row."""

    suspended: bool = False
    start_time: datetime | None = None
    succeeded: int = 0
    failed: int = 0  # counted failed attempts (Kubernetes status.failed)
    ignored: int = 0  # failed attempts an ignore rule excused
    fails_since_success: int = 0  # failuresAfterLastSuccess, for the global back-off
    last_failure_at: datetime | None = None
    interim: Condition | None = None
    final: Condition | None = None


@dataclass(frozen=True)
class Decision:
    state: BatchState
    items: Mapping[int, Item] = field(default_factory=dict)  # changed items, by index
    start: tuple[int, ...] = ()  # indexes to start an attempt for, lowest first
    cancel: tuple[int, ...] = ()  # job ids to cancel
    finished: bool = False  # the final condition was set in this pass

    @property
    def changed(self) -> bool:
        return bool(self.items or self.start or self.cancel or self.finished)


IsSubclass = Callable[[str, str], bool]


def exact(error_type: str, rule_type: str) -> bool:
    return error_type == rule_type


def match(
    rules: Sequence[FailureRule], attempt: Attempt, is_subclass: IsSubclass = exact
) -> Action:
    """The action of the first rule that matches a failed attempt (Count if none does)."""
    for rule in rules:
        error = attempt.error_type
        if error is not None and any(is_subclass(error, name) for name in rule.exceptions):
            return rule.action
        if rule.conditions and (
            attempt.condition in rule.conditions or attempt.reason in rule.conditions
        ):
            return rule.action
    return Action.COUNT


def _after(at: datetime | None, seconds: float) -> datetime | None:
    return None if at is None else at + timedelta(seconds=seconds)


def reconcile(
    spec: BatchSpec,
    state: BatchState,
    items: Sequence[Item],
    now: datetime,
    *,
    is_subclass: IsSubclass = exact,
) -> Decision:
    """One controller pass over one batch at `now` (the database clock)."""
    if state.final is not None:
        return Decision(state)
    current = {item.index: item for item in items}
    changed: dict[int, Item] = {}
    fail_batch: str | None = None

    # 1. Observe the attempts that finished, oldest first, so the back-off state
    # (failures since the last success, last failure time) ends at the newest.
    finished = [
        i
        for i in items
        if i.state is ItemState.ACTIVE
        and i.attempt is not None
        and (i.attempt.state is None or i.attempt.state.finished)
    ]
    finished.sort(key=lambda i: ((i.attempt and i.attempt.finished_at) or now, i.index))
    for item in finished:
        attempt = item.attempt
        assert attempt is not None
        if attempt.state is JobState.COMPLETED:
            new = replace(item, state=ItemState.SUCCEEDED, attempt=None)
            state = replace(state, succeeded=state.succeeded + 1, fails_since_success=0)
        elif attempt.state is JobState.DISCARDED:
            action = match(spec.failure_rules, attempt, is_subclass)
            if action is Action.IGNORE:
                new = replace(item, state=ItemState.PENDING, attempt=None)
                state = replace(state, ignored=state.ignored + 1)
            else:
                at = attempt.finished_at or now
                failures = item.failures + 1
                new = replace(item, failures=failures, last_failure_at=at, attempt=None)
                state = replace(
                    state,
                    failed=state.failed + 1,
                    fails_since_success=state.fails_since_success + 1,
                    last_failure_at=at,
                )
                per_index = spec.backoff_limit_per_index
                if action is Action.FAIL_INDEX or (per_index is not None and failures > per_index):
                    new = replace(new, state=ItemState.FAILED)
                else:
                    new = replace(new, state=ItemState.PENDING)
                if action is Action.FAIL_BATCH and fail_batch is None:
                    fail_batch = (
                        f"index {item.index} failed with {attempt.error_type}: "
                        f"{attempt.message or ''}".rstrip(": ")
                        + " (a fail_batch rule matched)"
                    )
        else:
            # Cancelled (by suspend, by the controller, or by an operator) or gone: the
            # attempt counts as neither failed nor succeeded, and the index runs again.
            new = replace(item, state=ItemState.PENDING, attempt=None)
        changed[item.index] = new
        current[item.index] = new

    # 2. Conditions: terminating causes first; they win over success (SEMANTICS §2.7).
    interim = state.interim
    if interim is None:
        interim = _terminal(spec, state, current, now, fail_batch)
        if interim is not None:
            state = replace(state, interim=interim)

    active = [i for i in current.values() if i.state is ItemState.ACTIVE]
    cancel: list[int] = []
    if interim is not None:
        # 3. Termination flow: cancel what still runs; the final condition waits for it.
        cancel = [i.attempt.job_id for i in active if i.attempt and not i.attempt.cancel_requested]
        if not active:
            kind = FAILED if interim.type == FAILURE_TARGET else COMPLETE
            state = replace(state, final=Condition(kind, interim.reason, interim.message))
            return Decision(state, changed, (), tuple(cancel), True)
        return Decision(state, changed, (), tuple(cancel))
    if state.suspended:
        cancel = [i.attempt.job_id for i in active if i.attempt and not i.attempt.cancel_requested]
        return Decision(state, changed, (), tuple(cancel))

    # 4. Parallelism: cancel the newest attempts beyond it; start the lowest pending
    # indexes whose back-off is over.
    live = [i for i in active if i.attempt is None or not i.attempt.cancel_requested]
    if len(live) > spec.parallelism:
        newest = sorted(live, key=lambda i: -(i.attempt.job_id if i.attempt else 0))
        cancel = [i.attempt.job_id for i in newest[: len(live) - spec.parallelism] if i.attempt]
        return Decision(state, changed, (), tuple(cancel))
    slots = spec.parallelism - len(active)
    start: list[int] = []
    if slots > 0:
        global_ready = _after(state.last_failure_at, spec.delay(state.fails_since_success))
        if spec.backoff_limit_per_index is None and global_ready is not None and global_ready > now:
            return Decision(state, changed)
        for item in sorted(current.values(), key=lambda i: i.index):
            if item.state is not ItemState.PENDING:
                continue
            if spec.backoff_limit_per_index is not None:
                ready = _after(item.last_failure_at, spec.delay(item.failures))
                if ready is not None and ready > now:
                    continue
            start.append(item.index)
            if len(start) >= slots:
                break
    return Decision(state, changed, tuple(start))


def _terminal(
    spec: BatchSpec,
    state: BatchState,
    items: Mapping[int, Item],
    now: datetime,
    fail_batch: str | None,
) -> Condition | None:
    if fail_batch is not None:
        return Condition(FAILURE_TARGET, Reason.POD_FAILURE_POLICY, fail_batch)
    if (
        spec.active_deadline is not None
        and not state.suspended
        and state.start_time is not None
        and now >= state.start_time + timedelta(seconds=spec.active_deadline)
    ):
        # Before the backoff limit: a batch past its deadline starts nothing more.
        return Condition(
            FAILURE_TARGET,
            Reason.DEADLINE,
            f"the batch was active longer than its deadline of {spec.active_deadline:g}s",
        )
    failed_indexes = sum(1 for i in items.values() if i.state is ItemState.FAILED)
    if spec.max_failed_indexes is not None and failed_indexes > spec.max_failed_indexes:
        return Condition(
            FAILURE_TARGET,
            Reason.MAX_FAILED_INDEXES,
            f"{failed_indexes} failed indexes, more than max_failed_indexes "
            f"{spec.max_failed_indexes}",
        )
    limit = spec.effective_backoff_limit
    if state.failed > limit:
        return Condition(
            FAILURE_TARGET,
            Reason.BACKOFF_LIMIT,
            f"{state.failed} failed attempts, more than backoff_limit {limit}",
        )
    succeeded = {i.index for i in items.values() if i.state is ItemState.SUCCEEDED}
    for n, rule in enumerate(spec.success_rules):
        if rule.met(succeeded):
            return Condition(SUCCESS_CRITERIA_MET, Reason.SUCCESS_POLICY, f"success rule {n} met")
    if all(i.state in (ItemState.SUCCEEDED, ItemState.FAILED) for i in items.values()):
        if failed_indexes:
            return Condition(
                FAILURE_TARGET, Reason.FAILED_INDEXES, f"{failed_indexes} indexes failed"
            )
        return Condition(
            SUCCESS_CRITERIA_MET,
            Reason.COMPLETIONS_REACHED,
            f"{len(succeeded)} of {spec.completions} completions succeeded",
        )
    return None
