"""The pure CronJob decision (SEMANTICS §1.4-§1.7): what one pass decides from the state
and `now`, including the cases the controller gets subtly wrong or leaves implicit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rota.schedules import ActiveRun, EventKind, ScheduleSpec, ScheduleState, reconcile

DAY = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday


def at(hhmm: str, seconds: float = 0.0, days: int = 0) -> datetime:
    hour, minute = map(int, hhmm.split(":"))
    return DAY.replace(hour=hour, minute=minute) + timedelta(days=days, seconds=seconds)


def spec(expression: str = "*/5 * * * *", **policy: object) -> ScheduleSpec:
    return ScheduleSpec("s", expression, **policy)  # type: ignore[arg-type]


def test_nothing_is_due_before_the_first_tick() -> None:
    decision = reconcile(spec(), ScheduleState(created_at=at("10:02")), at("10:04", 59))
    assert decision.start is None and decision.next_at == at("10:05")
    assert decision.events == ()


def test_a_tick_is_due_at_its_own_instant() -> None:
    decision = reconcile(spec(), ScheduleState(created_at=at("10:02")), at("10:05"))
    assert decision.start == at("10:05") and decision.next_at == at("10:10") and decision.due == 1


def test_the_most_recent_time_of_an_irregular_schedule_is_exact() -> None:
    # `30 6-16/4 * * 1-5` fires 06:30, 10:30 and 14:30 on weekdays. Created Thursday 06:00,
    # looked at on Sunday noon: the latest tick is Friday 14:30. Kubernetes steps back from
    # `now` by whole first intervals (4 h) to Sunday 06:30, finds no tick after it, and
    # starts nothing; SEMANTICS §1.4 asks for the latest tick, and that is what runs.
    state = ScheduleState(created_at=at("06:00", days=3))
    decision = reconcile(spec("30 6-16/4 * * 1-5"), state, at("12:00", days=6))
    assert decision.start == at("14:30", days=4)
    assert decision.due == 20  # still the controller's estimate, from the first interval


def test_the_missed_count_is_the_controllers_approximation() -> None:
    state = ScheduleState(created_at=at("08:29"))
    assert reconcile(spec("* * * * *"), state, at("10:21", 0.5)).due == 112
    # 100 exactly is not "more than 100".
    state = ScheduleState(created_at=at("08:40"))
    decision = reconcile(spec("* * * * *"), state, at("10:20", 0.5))
    assert decision.due == 100 and decision.events == ()
    decision = reconcile(spec("* * * * *"), state, at("10:21", 0.5))
    assert decision.due == 101 and decision.events[0].kind is EventKind.TOO_MANY_MISSED


def test_suspended_computes_nothing() -> None:
    state = ScheduleState(created_at=at("09:00"), suspended=True)
    assert reconcile(spec(), state, at("12:00")) == reconcile(spec(), state, at("13:00"))
    assert reconcile(spec(), state, at("12:00")).start is None


def test_an_active_run_for_the_same_tick_is_not_started_again() -> None:
    state = ScheduleState(
        created_at=at("09:58"), active=(ActiveRun(job_id=7, scheduled_at=at("10:00")),)
    )
    assert reconcile(spec(concurrency="replace"), state, at("10:00", 5)).start is None


def test_replace_cancels_every_active_run() -> None:
    active = (ActiveRun(7, at("10:00")), ActiveRun(8, at("10:05")))
    state = ScheduleState(created_at=at("09:58"), last_schedule_time=at("10:05"), active=active)
    decision = reconcile(spec(concurrency="replace"), state, at("10:10", 1))
    assert decision.start == at("10:10") and decision.cancel == (7, 8)
    allow = reconcile(spec(), state, at("10:10", 1))
    assert allow.start == at("10:10") and allow.cancel == ()


def test_forbid_keeps_the_tick_missed_until_the_run_ends() -> None:
    active = (ActiveRun(7, at("10:00")),)
    state = ScheduleState(created_at=at("09:58"), last_schedule_time=at("10:00"), active=active)
    blocked = reconcile(spec(concurrency="forbid"), state, at("10:07"))
    assert blocked.start is None
    assert blocked.events[0].kind is EventKind.JOB_ALREADY_ACTIVE
    assert "job 7 is still active" in blocked.events[0].message
    freed = ScheduleState(created_at=at("09:58"), last_schedule_time=at("10:00"))
    assert reconcile(spec(concurrency="forbid"), freed, at("10:07")).start == at("10:05")


@pytest.mark.parametrize("deadline", [None, 300.0])
def test_ticks_before_the_last_missed_one_are_not_reported_again(deadline: float | None) -> None:
    state = ScheduleState(created_at=at("08:29"), last_missed_time=at("10:21"))
    decision = reconcile(
        spec("* * * * *", strict_missed_limit=True, starting_deadline=deadline),
        state,
        at("10:21", 30),
    )
    assert decision.start is None and decision.events == () and decision.missed_at is None


def test_a_deadline_records_the_latest_tick_that_fell_out_of_it() -> None:
    state = ScheduleState(created_at=at("09:58"), last_schedule_time=at("10:00"))
    decision = reconcile(spec(starting_deadline=120), state, at("10:31"))
    # 10:05 ... 10:25 fell out of [10:29, 10:31]; the latest of them is recorded once.
    assert decision.missed_at == at("10:25")
    assert [e.kind for e in decision.events] == [EventKind.MISSED_SCHEDULE]
    assert decision.start == at("10:30")


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        reconcile(spec(), ScheduleState(created_at=at("10:00")), datetime(2025, 6, 2, 10))
