"""The state machine: one table of allowed transitions."""

from __future__ import annotations

import pytest

from rota.errors import InvalidTransitionError
from rota.job import FINISHED_STATES, TRANSITIONS, JobState, check_transition


def test_every_state_has_a_row() -> None:
    assert set(TRANSITIONS) == set(JobState)


def test_only_running_jobs_finish() -> None:
    """Only an attempt completes a job or spends its attempts. The one other way into the
    dead letters is a start deadline (`expires_at`): a waiting job that passed it."""
    waiting = {JobState.SCHEDULED, JobState.AVAILABLE, JobState.RETRYABLE}
    for state, targets in TRANSITIONS.items():
        if state is not JobState.RUNNING:
            assert JobState.COMPLETED not in targets, state
            assert (JobState.DISCARDED in targets) == (state in waiting), state


def test_finished_states_only_restart_by_retry() -> None:
    for state in FINISHED_STATES - {JobState.DISCARDED}:
        assert TRANSITIONS[state] == {JobState.AVAILABLE}
        assert state.finished
    # A dead letter is also replayed paced (scheduled) or dismissed (cancelled): rota.ops.
    assert TRANSITIONS[JobState.DISCARDED] == {
        JobState.AVAILABLE,
        JobState.SCHEDULED,
        JobState.CANCELLED,
    }


def test_illegal_moves_raise() -> None:
    check_transition(JobState.AVAILABLE, JobState.RUNNING)
    with pytest.raises(InvalidTransitionError, match="completed job cannot become running"):
        check_transition(JobState.COMPLETED, JobState.RUNNING)
    with pytest.raises(InvalidTransitionError):
        check_transition(JobState.SCHEDULED, JobState.COMPLETED)
