"""Backoff: exponential growth, a hard cap, and full jitter within [0, ceiling]."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rota


def test_ceiling_doubles_then_caps() -> None:
    backoff = rota.Backoff(base=1.0, factor=2.0, cap=10.0)
    assert [backoff.ceiling(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert backoff.ceiling(0) == 0


def test_without_jitter_the_delay_is_the_ceiling() -> None:
    backoff = rota.Backoff(base=0.5, factor=3.0, cap=100.0, jitter=False)
    assert backoff.delay(3) == 4.5


def test_full_jitter_spreads_over_the_whole_window() -> None:
    backoff = rota.Backoff(base=1.0, factor=2.0, cap=60.0)
    rng = random.Random(7)
    samples = [backoff.delay(4, rng) for _ in range(2000)]
    assert min(samples) >= 0 and max(samples) <= 8
    assert min(samples) < 0.5 and max(samples) > 7.5  # not clustered at the top


@given(st.integers(min_value=1, max_value=10_000), st.floats(0, 100), st.floats(1, 10))
def test_delay_never_exceeds_the_cap(attempt: int, base: float, factor: float) -> None:
    backoff = rota.Backoff(base=base, factor=factor, cap=300.0)
    assert 0 <= backoff.delay(attempt) <= 300.0


@pytest.mark.parametrize("kwargs", [{"base": -1}, {"cap": -1}, {"factor": 0.5}])
def test_bad_backoff_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(rota.TaskDefinitionError):
        rota.Backoff(**kwargs)
