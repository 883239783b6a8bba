"""Replica arithmetic of `rota scale-hint`: KEDA's activation (strictly greater) and the
HPA's ceil(signal / target) within bounds (SEMANTICS §3.1-3.2), and the count the work
needs from the backlog and the mean run time."""

from __future__ import annotations

import pytest

from rota.drivers.base import BacklogReport, DurationReport
from rota.errors import ConfigurationError
from rota.k8s import ScaleHintSettings, Signal, scale_hint
from rota.k8s.scaling import keda_replicas


def hint(backlog: int, running: int = 0, mean: float | None = None, **settings: object):  # type: ignore[no-untyped-def]
    samples = 0 if mean is None else 50
    return scale_hint(
        BacklogReport("tickets", backlog, running, 3.0),
        DurationReport("tickets", 900.0, samples, mean),
        ScaleHintSettings(**settings),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0),  # inactive: the minimum (0)
        (1, 1),  # active from 1 with activation 0
        (20, 1),  # ceil(20 / 20)
        (21, 2),
        (400, 10),  # capped at max
    ],
)
def test_keda_replicas_default_target(value: int, expected: int) -> None:
    assert keda_replicas(value, ScaleHintSettings(concurrency=10, max_replicas=10)) == expected


def test_activation_is_strictly_greater_and_wins_over_the_target() -> None:
    # SEMANTICS §3.2: target 10, activation 50, backlog 40 -> 0, though the HPA wants 4.
    settings = ScaleHintSettings(target=10, activation=50, max_replicas=100)
    assert keda_replicas(40, settings) == 0
    assert keda_replicas(50, settings) == 0  # equal is not above
    assert keda_replicas(51, settings) == 6
    # With a minimum, inactivity means the minimum, and activity at least one.
    assert keda_replicas(0, ScaleHintSettings(min_replicas=2)) == 2
    assert keda_replicas(1, ScaleHintSettings(min_replicas=0)) == 1


def test_demand_counts_running_jobs_and_backlog_does_not() -> None:
    busy = hint(0, running=15, concurrency=10)
    assert busy.value == 15 and busy.active and busy.keda_replicas == 1
    idle = hint(0, running=15, concurrency=10, signal=Signal.BACKLOG)
    # The backlog signal would let KEDA take the last replica from 15 running jobs.
    assert idle.value == 0 and not idle.active and idle.keda_replicas == 0


def test_desired_from_backlog_and_mean_run_time() -> None:
    # 600 jobs of 2 s on 10 slots per replica, done within 60 s: 1200 slot-seconds / 600.
    h = hint(600, mean=2.0, concurrency=10, drain_within=60, max_replicas=50)
    assert h.desired == 2
    assert h.suggested_target == 300.0  # 10 slots x 60 s / 2 s
    assert h.drain_s == pytest.approx(60.0)
    # KEDA with the default target (2 x 10) would ask for far more for these short jobs.
    assert h.keda_replicas == 30


def test_long_jobs_never_get_more_than_a_slot_each() -> None:
    # 5 jobs of 10 minutes: one slot per job is the most that helps.
    h = hint(5, mean=600.0, concurrency=2, drain_within=60, max_replicas=50)
    assert h.suggested_target == 2.0
    assert h.desired == 3  # ceil(5 / 2)
    assert h.drain_s == pytest.approx(600.0)


def test_bounds_and_unknown_run_time() -> None:
    assert hint(10_000, mean=1.0, max_replicas=4).desired == 4
    assert hint(0, mean=1.0, min_replicas=1).desired == 1
    unknown = hint(45, concurrency=10)
    assert unknown.mean_s is None and unknown.suggested_target is None
    assert unknown.desired == unknown.keda_replicas == 3  # ceil(45 / 20)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        ScaleHintSettings(min_replicas=3, max_replicas=2)
    with pytest.raises(ConfigurationError):
        ScaleHintSettings(drain_within=0)
    with pytest.raises(ConfigurationError):
        ScaleHintSettings(target=float("nan"))


def test_an_empty_queue_suggests_no_target() -> None:
    # Quick jobs ran lately, nothing waits now: concurrency x drain / mean would say 2195.51
    # jobs per replica, a number from nothing. The hint keeps KEDA's rule instead (#19).
    empty = hint(0, mean=0.2733, concurrency=10, drain_within=60)
    assert empty.suggested_target is None and empty.drain_s is None
    assert empty.desired == empty.keda_replicas == 0
    assert hint(0, mean=0.2733, min_replicas=2).desired == 2
