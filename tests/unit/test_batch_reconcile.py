"""The batch controller's pure decision (rota.batches.reconcile) on a fake clock, walking
the Kubernetes Job conformance cases of SEMANTICS §2.12 and the validation rules."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta

import pytest

from rota.batches import BatchError, BatchSpec, FailureRule, SuccessRule
from rota.batches.reconcile import (
    Attempt,
    BatchState,
    Decision,
    Item,
    ItemState,
    match,
    reconcile,
)
from rota.batches.spec import Action, format_indexes, parse_indexes
from rota.job import JobState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Sim:
    """Applies decisions the way the store does: started indexes get a job, cancelled
    jobs end cancelled when the test says so."""

    def __init__(self, spec: BatchSpec, state: BatchState | None = None) -> None:
        self.spec = spec
        self.state = state or BatchState(start_time=T0)
        self.items = {i: Item(i) for i in range(spec.completions)}
        self.now = T0
        self.next_job = 1
        self.starts: list[tuple[datetime, int]] = []  # (when, index)
        self.cancelled: set[int] = set()

    def step(self, seconds: float = 0.0) -> Decision:
        self.now += timedelta(seconds=seconds)
        decision = reconcile(self.spec, self.state, list(self.items.values()), self.now)
        self.state = decision.state
        self.items.update(decision.items)
        for job_id in decision.cancel:
            self.cancelled.add(job_id)
            for index, item in self.items.items():
                if item.attempt and item.attempt.job_id == job_id:
                    self.items[index] = dataclasses.replace(
                        item, attempt=dataclasses.replace(item.attempt, cancel_requested=True)
                    )
        for index in decision.start:
            attempt = Attempt(self.next_job, JobState.AVAILABLE)
            self.next_job += 1
            self.items[index] = dataclasses.replace(
                self.items[index], state=ItemState.ACTIVE, attempt=attempt
            )
            self.starts.append((self.now, index))
        return decision

    def active(self) -> list[int]:
        return [i for i, item in self.items.items() if item.state is ItemState.ACTIVE]

    def end(self, index: int, state: JobState, error: str | None = None, **extra: str) -> None:
        item = self.items[index]
        assert item.attempt is not None, f"index {index} is not active"
        self.items[index] = dataclasses.replace(
            item,
            attempt=dataclasses.replace(
                item.attempt, state=state, finished_at=self.now, error_type=error, **extra
            ),
        )

    def fail(self, index: int, error: str = "ValueError", **extra: str) -> None:
        self.end(index, JobState.DISCARDED, error, **extra)

    def succeed(self, index: int) -> None:
        self.end(index, JobState.COMPLETED)

    def indexes(self, state: ItemState) -> str:
        return format_indexes(i for i, item in self.items.items() if item.state is state)


def test_parallelism_caps_active_attempts_and_all_completions_complete() -> None:
    sim = Sim(BatchSpec(completions=10, parallelism=3))
    sim.step()
    while sim.state.final is None:
        assert len(sim.active()) <= 3
        for index in sim.active():
            sim.succeed(index)
        sim.step(1)
    assert sim.state.succeeded == 10 and sim.state.final is not None
    assert (sim.state.final.type, sim.state.final.reason) == ("Complete", "CompletionsReached")
    assert len(sim.starts) == 10


def test_indexed_starts_lowest_indexes_first() -> None:
    sim = Sim(BatchSpec(completions=5, parallelism=2, indexed=True))
    order = []
    sim.step()
    while sim.state.final is None:
        order.extend(sorted(sim.active()))
        for index in sim.active():
            sim.succeed(index)
        sim.step()
    assert order == [0, 1, 2, 3, 4]
    assert sim.indexes(ItemState.SUCCEEDED) == "0-4"


def test_backoff_limit_two_gives_three_failures_spaced_by_the_backoff() -> None:
    sim = Sim(BatchSpec(completions=1, backoff_limit=2))
    sim.step()
    for _ in range(40):
        if sim.state.final is not None:
            break
        for index in sim.active():
            sim.fail(index)
        sim.step(1)
    assert sim.state.failed == 3
    assert sim.state.final is not None and sim.state.final.reason == "BackoffLimitExceeded"
    times = [t for t, _ in sim.starts]
    assert len(times) == 3
    # Each attempt fails as it starts; the next start waits 10 s, then 20 s.
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(times)] == [10, 20]


def test_backoff_limit_zero_fails_on_the_first_failure() -> None:
    sim = Sim(BatchSpec(completions=3, parallelism=3, backoff_limit=0))
    sim.step()
    sim.fail(1)
    decision = sim.step()
    assert sim.state.interim is not None and sim.state.interim.reason == "BackoffLimitExceeded"
    assert sorted(decision.cancel) == [1, 3]  # the two other jobs
    assert sim.state.final is None  # they are still running
    sim.end(0, JobState.CANCELLED)
    sim.end(2, JobState.CANCELLED)
    sim.step()
    assert sim.state.final is not None and sim.state.final.type == "Failed"
    assert sim.state.failed == 1


def test_a_success_resets_the_delay_but_not_the_failure_count() -> None:
    sim = Sim(BatchSpec(completions=3, parallelism=1, backoff_limit=6))
    sim.step()
    sim.fail(0)  # t = 0
    sim.step(1)
    assert sim.active() == []
    sim.step(9)  # t = 10: the first back-off is over
    assert sim.active() == [0]
    sim.succeed(0)
    sim.step(1)  # t = 11: the success resets n, and index 1 starts at once
    assert sim.active() == [1]
    sim.fail(1)
    failed_at = sim.now
    sim.step(1)
    assert sim.state.failed == 2 and sim.state.fails_since_success == 1
    sim.step(8.5)
    assert sim.active() == []
    sim.step(0.5)  # 10 s after the failure, not 20 s
    assert sim.active() == [1] and sim.starts[-1][0] == failed_at + timedelta(seconds=10)


@pytest.mark.parametrize("cap", [360.0, 600.0])
def test_the_delay_is_capped(cap: float) -> None:
    spec = BatchSpec(completions=1, backoff_cap=cap, backoff_limit=20)
    assert [spec.delay(n) for n in range(0, 8)][:7] == [0, 10, 20, 40, 80, 160, 320]
    assert spec.delay(7) == min(640, cap) and spec.delay(50) == cap
    assert BatchSpec(completions=1, backoff_delay=0).delay(5) == 0


def test_per_index_limits_docs_example() -> None:
    spec = BatchSpec(
        completions=10,
        parallelism=10,
        indexed=True,
        backoff_limit_per_index=1,
        max_failed_indexes=5,
        backoff_delay=0,
    )
    sim = Sim(spec)
    sim.step()
    for _ in range(10):
        for index in sim.active():
            if index % 2:
                sim.succeed(index)
            else:
                sim.fail(index)
        sim.step(1)
    assert sim.indexes(ItemState.SUCCEEDED) == "1,3,5,7,9"
    assert sim.indexes(ItemState.FAILED) == "0,2,4,6,8"
    assert (sim.state.failed, sim.state.succeeded) == (10, 5)
    assert sim.state.final is not None
    assert (sim.state.final.type, sim.state.final.reason) == ("Failed", "FailedIndexes")


def test_max_failed_indexes_exceeded_cancels_the_rest() -> None:
    spec = BatchSpec(
        completions=6,
        parallelism=6,
        indexed=True,
        backoff_limit_per_index=0,
        max_failed_indexes=2,
    )
    sim = Sim(spec)
    sim.step()
    for index in (0, 1, 2):
        sim.fail(index)
    decision = sim.step()
    assert sim.state.interim is not None
    assert sim.state.interim.reason == "MaxFailedIndexesExceeded"
    assert sorted(decision.cancel) == [4, 5, 6]


def test_fail_batch_rule_wins_over_a_large_backoff_limit() -> None:
    rule = FailureRule("fail_batch", on=[KeyError])
    sim = Sim(BatchSpec(completions=2, parallelism=2, failure_rules=(rule,)))
    sim.step()
    sim.fail(1, "KeyError")
    sim.step()
    assert sim.state.interim is not None and sim.state.interim.reason == "PodFailurePolicy"
    assert "index 1 failed with KeyError" in sim.state.interim.message


def test_ignore_rule_on_lost_workers_never_exhausts_the_limit() -> None:
    rule = FailureRule("ignore", conditions=["DisruptionTarget"])
    sim = Sim(BatchSpec(completions=1, backoff_limit=1, failure_rules=(rule,)))
    sim.step()
    for _ in range(10):
        sim.fail(0, "LeaseExpired", condition="DisruptionTarget", reason="WorkerLost")
        sim.step(1)
        assert sim.active() == [0]  # a replacement at once: ignored failures add no delay
    assert (sim.state.failed, sim.state.ignored) == (0, 10)
    sim.succeed(0)
    sim.step()
    assert sim.state.final is not None and sim.state.final.type == "Complete"


def test_fail_index_fails_one_index_without_retry() -> None:
    rule = FailureRule("FailIndex", on="ExitCode42")
    spec = BatchSpec(
        completions=2,
        parallelism=2,
        indexed=True,
        backoff_limit_per_index=1,
        failure_rules=(rule,),
        backoff_delay=0,
    )
    sim = Sim(spec)
    sim.step()
    sim.fail(1, "ExitCode42")
    sim.fail(0, "ValueError")
    sim.step()
    assert sim.active() == [0]  # index 0 retries once; index 1 is failed
    assert sim.indexes(ItemState.FAILED) == "1"
    sim.fail(0)
    sim.step()
    assert sim.indexes(ItemState.FAILED) == "0-1"
    assert sim.state.final is not None and sim.state.final.reason == "FailedIndexes"


def test_success_policy_completes_early_and_cancels_the_rest() -> None:
    rule = SuccessRule(succeeded_indexes="0,2-3", succeeded_count=1)
    sim = Sim(BatchSpec(completions=5, parallelism=5, indexed=True, success_rules=(rule,)))
    sim.step()
    sim.succeed(4)  # not among the listed indexes
    sim.step()
    assert sim.state.interim is None
    sim.succeed(2)
    decision = sim.step()
    assert sim.state.interim is not None and sim.state.interim.type == "SuccessCriteriaMet"
    assert sorted(decision.cancel) == [1, 2, 4]
    for index in (0, 1, 3):
        sim.end(index, JobState.CANCELLED)
    sim.step()
    assert sim.state.final is not None
    assert (sim.state.final.type, sim.state.final.reason) == ("Complete", "SuccessPolicy")


def test_a_terminating_cause_beats_the_success_policy() -> None:
    rule = SuccessRule(succeeded_count=1)
    spec = BatchSpec(
        completions=2, parallelism=2, indexed=True, success_rules=(rule,), backoff_limit=0
    )
    sim = Sim(spec)
    sim.step()
    sim.succeed(0)
    sim.fail(1)
    sim.step()
    assert sim.state.final is not None and sim.state.final.reason == "BackoffLimitExceeded"


def test_deadline_beats_pending_backoff() -> None:
    sim = Sim(BatchSpec(completions=1, active_deadline=30, backoff_limit=6))
    sim.step()
    sim.step(20)
    sim.fail(0)  # t = 20: the retry may start at t = 30
    sim.step(5)
    assert sim.active() == []
    sim.step(5)  # t = 30: the deadline comes first
    assert sim.state.final is not None
    assert (sim.state.final.type, sim.state.final.reason) == ("Failed", "DeadlineExceeded")
    assert len(sim.starts) == 1


def test_deadline_cancels_running_attempts_and_fails_after_they_stop() -> None:
    sim = Sim(BatchSpec(completions=2, parallelism=2, active_deadline=5))
    sim.step()
    decision = sim.step(5)
    assert sorted(decision.cancel) == [1, 2] and sim.state.final is None
    sim.end(0, JobState.CANCELLED)
    assert sim.step().cancel == ()  # asked once
    sim.end(1, JobState.CANCELLED)
    sim.step()
    assert sim.state.final is not None and sim.state.final.reason == "DeadlineExceeded"


def test_suspended_batches_cancel_and_start_nothing_and_have_no_deadline() -> None:
    sim = Sim(BatchSpec(completions=2, parallelism=2, active_deadline=5))
    sim.step()
    sim.succeed(0)
    sim.state = dataclasses.replace(sim.state, suspended=True)
    decision = sim.step()
    assert decision.cancel == (2,)
    sim.end(1, JobState.CANCELLED)
    sim.step(100)
    assert sim.state.final is None and sim.active() == []
    assert (sim.state.succeeded, sim.state.failed) == (1, 0)  # cancelled counts as neither
    sim.state = dataclasses.replace(sim.state, suspended=False, start_time=sim.now)
    sim.step()
    assert sim.active() == [1]


def test_lower_parallelism_cancels_the_newest_attempts() -> None:
    sim = Sim(BatchSpec(completions=4, parallelism=4))
    sim.step()
    sim.spec = dataclasses.replace(sim.spec, parallelism=1)
    assert sorted(sim.step().cancel) == [2, 3, 4]


def test_a_gone_or_cancelled_job_reruns_its_index_uncounted() -> None:
    sim = Sim(BatchSpec(completions=1))
    sim.step()
    sim.end(0, JobState.CANCELLED)
    sim.step()
    assert sim.active() == [0] and sim.state.failed == 0
    item = sim.items[0]
    assert item.attempt is not None
    sim.items[0] = dataclasses.replace(item, attempt=dataclasses.replace(item.attempt, state=None))
    sim.step()
    assert sim.active() == [0] and len(sim.starts) == 3


def test_empty_batches_complete_at_once_and_finished_ones_stay() -> None:
    sim = Sim(BatchSpec(completions=0))
    decision = sim.step()
    assert decision.finished and sim.state.final is not None
    assert not sim.step().changed


def test_rules_match_in_order_and_by_subclass_through_the_resolver() -> None:
    rules = (FailureRule("ignore", on=[LookupError]), FailureRule("fail_batch", on=[KeyError]))
    attempt = Attempt(1, JobState.DISCARDED, error_type="KeyError")
    assert match(rules, attempt) is Action.FAIL_BATCH  # exact names only
    assert match(rules, attempt, lambda e, r: r == "LookupError") is Action.IGNORE
    assert match((), attempt) is Action.COUNT


def test_indexes_parse_and_format() -> None:
    assert parse_indexes("1,3-5, 7") == {1, 3, 4, 5, 7}
    assert format_indexes([7, 1, 3, 4, 5]) == "1,3-5,7"
    assert format_indexes([]) == ""
    for bad in ("", "a", "3-1", "1,,2", "-1"):
        with pytest.raises(BatchError):
            parse_indexes(bad)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"completions": -1}, "completions"),
        ({"parallelism": -1}, "parallelism"),
        ({"backoff_limit_per_index": 1}, "indexed=True"),
        ({"indexed": True, "max_failed_indexes": 1}, "needs backoff_limit_per_index"),
        ({"indexed": True, "backoff_limit_per_index": 0, "max_failed_indexes": 9}, "max_failed"),
        ({"failure_rules": (FailureRule("fail_index", on=[ValueError]),)}, "fail_index"),
        ({"success_rules": (SuccessRule(succeeded_count=1),)}, "indexed=True"),
        ({"indexed": True, "success_rules": (SuccessRule("0-9"),)}, "past the last index"),
        ({"indexed": True, "success_rules": (SuccessRule("0-1", 3),)}, "more than the 2"),
        ({"active_deadline": 0}, "active_deadline"),
        ({"ttl_after_finished": -1}, "ttl_after_finished"),
    ],
)
def test_bad_specs_are_refused(kwargs: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"completions": 3}
    values.update(kwargs)
    with pytest.raises(BatchError, match=message):
        BatchSpec(**values)  # type: ignore[arg-type]


def test_bad_rules_are_refused() -> None:
    with pytest.raises(BatchError, match="unknown failure action"):
        FailureRule("explode", on=[ValueError])
    with pytest.raises(BatchError, match="exactly one"):
        FailureRule("ignore")
    with pytest.raises(BatchError, match="unknown attempt condition"):
        FailureRule("ignore", conditions=["Evicted"])
    with pytest.raises(BatchError, match="exception classes"):
        FailureRule("ignore", on=[42])  # type: ignore[list-item]
    with pytest.raises(BatchError, match="needs"):
        SuccessRule()
    assert FailureRule("FailJob", on=ValueError).exceptions == ("ValueError",)
    spec = BatchSpec(completions=2, indexed=True, backoff_limit_per_index=1)
    assert spec.effective_backoff_limit == 2_147_483_647
    assert BatchSpec(completions=2).effective_backoff_limit == 6
    assert BatchSpec.from_json(spec.to_json()) == spec
