"""Storage for exactly-once effects, on both dialects: releasable keys, fenced steps
and checkpoints, the inbox, and completion inside a caller's transaction."""

from __future__ import annotations

import json
import time

import rota
from rota.drivers.base import Completion, JobInsert
from rota.job import JobState
from rota.worker.fetcher import claim_now


def row(key: str | None = None, **kw: object) -> JobInsert:
    values: dict[str, object] = dict(
        task="t", queue="q", args_json="{}", priority=0, max_attempts=3, key=key
    )
    values.update(kw)
    return JobInsert(**values)  # type: ignore[arg-type]


def test_key_is_released_after_its_window(app: rota.App) -> None:
    d = app.driver
    (first,) = d.job_insert_many([row("k", key_ttl=0.3)])
    (same,) = d.job_insert_many([row("k", key_ttl=0.3)])
    assert not same.created and same.id == first.id
    time.sleep(0.4)
    (fresh,) = d.job_insert_many([row("k", key_ttl=0.3)])
    assert fresh.created and fresh.id != first.id
    # The old job keeps its key for display; only the new one holds it.
    assert d.job_get(first.id).key == "k"  # type: ignore[union-attr]
    (again,) = d.job_insert_many([row("k", key_ttl=0.3)])
    assert again.id == fresh.id


def test_key_guards_only_the_chosen_states(app: rota.App) -> None:
    d = app.driver
    waiting = ("available", "scheduled", "running", "retryable")
    (first,) = d.job_insert_many([row("k", key_states=waiting)])
    (same,) = d.job_insert_many([row("k", key_states=waiting)])
    assert same.id == first.id
    (job,) = claim_now(app, "q", 1, "w", 30)
    d.job_complete_many([Completion(job.id, job.lease_token or "", JobState.COMPLETED, "{}")])
    (after,) = d.job_insert_many([row("k", key_states=waiting)])
    assert after.created and after.id != first.id


def test_same_key_twice_in_one_batch(app: rota.App) -> None:
    a, b, c = app.driver.job_insert_many([row("x"), row("x"), row("y")])
    assert a.created and not b.created and b.id == a.id and c.created


def test_steps_and_checkpoints_are_fenced(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row()])
    (first,) = claim_now(app, "q", 1, "w1", 0.05)
    token1 = first.lease_token or ""
    assert d.step_record(first.id, token1, "charge", json.dumps({"charge_id": "ch_1"}))
    assert d.job_checkpoint(first.id, token1, json.dumps({"done": 10}))
    time.sleep(0.15)
    d.job_rescue_expired(10)
    (second,) = claim_now(app, "q", 1, "w2", 30)
    assert second.checkpoint == {"done": 10}
    assert d.step_list(second.id) == {"charge": {"charge_id": "ch_1"}}
    # The stale first attempt can no longer record anything.
    assert not d.step_record(first.id, token1, "ship", "{}")
    assert not d.job_checkpoint(first.id, token1, json.dumps({"done": 99}))
    assert d.job_checkpoint(second.id, second.lease_token or "", json.dumps({"done": 20}))
    assert d.job_get(second.id).checkpoint == {"done": 20}  # type: ignore[union-attr]


def test_inbox_records_each_message_once(app: rota.App) -> None:
    with app.transaction() as conn:
        assert app.inbox_record(conn, "rabbit:orders", "m-1")
        assert not app.inbox_record(conn, "rabbit:orders", "m-1")
        assert app.inbox_record(conn, "rabbit:refunds", "m-1")
    with app.transaction() as conn:
        assert not app.inbox_record(conn, "rabbit:orders", "m-1")
    time.sleep(0.05)
    assert app.driver.inbox_prune(3600, 100) == 0
    assert app.driver.inbox_prune(0.01, 100) == 2


def test_inbox_rolls_back_with_the_effect(app: rota.App) -> None:
    try:
        with app.transaction() as conn:
            assert app.inbox_record(conn, "src", "m-2")
            raise RuntimeError("effect failed")
    except RuntimeError:
        pass
    with app.transaction() as conn:
        assert app.inbox_record(conn, "src", "m-2")  # the failed delivery left no trace


def test_completion_inside_a_caller_transaction(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row(), row()])
    a, b = claim_now(app, "q", 2, "w", 30)
    try:
        with d.transaction() as conn:
            assert d.job_complete_many(
                [Completion(a.id, a.lease_token or "", JobState.COMPLETED, "{}")], conn=conn
            ) == {a.id}
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    assert d.job_get(a.id).state is JobState.RUNNING  # type: ignore[union-attr]
    with d.transaction() as conn:
        d.job_complete_many(
            [Completion(b.id, b.lease_token or "", JobState.COMPLETED, "{}")], conn=conn
        )
    assert d.job_get(b.id).state is JobState.COMPLETED  # type: ignore[union-attr]


def test_pruning_a_job_removes_its_steps(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row()])
    (job,) = claim_now(app, "q", 1, "w", 30)
    d.step_record(job.id, job.lease_token or "", "s", "1")
    d.job_complete_many([Completion(job.id, job.lease_token or "", JobState.COMPLETED, "{}")])
    time.sleep(0.05)
    assert d.job_prune_finished(0.01, 0.01, 10) == 1
    assert d.step_list(job.id) == {}
