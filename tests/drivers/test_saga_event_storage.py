"""Saga and event storage on both dialects: a saga key is unique, a transition bumps the
version and appends a history entry with the database's time, a locked row makes a second
transition wait (PostgreSQL), stalled sagas are found by their job's state or deadline, and
events are deduplicated by key and filtered by name, id range and time."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import rota
from rota.drivers.base import Completion
from rota.events.store import EventFilter, EventStore, Subscription
from rota.job import JobState
from rota.sagas.store import SagaChange, SagaStatus, SagaStore


def new_saga(app: rota.App, key: str, conn: object = None) -> rota.SagaRecord:
    def insert(c: object) -> rota.SagaRecord:
        saga = SagaStore(app.driver).insert(
            c,
            key=key,
            name="s",
            step="a",
            plan_json=json.dumps([{"name": "a"}]),
            data_json='{"n": 1}',
            entry_json='{"event": "started"}',
        )
        assert saga is not None
        return saga

    if conn is not None:
        return insert(conn)
    with app.transaction() as own:
        return insert(own)


def change(saga_id: int, **fields: object) -> SagaChange:
    values: dict[str, object] = dict(
        saga_id=saga_id,
        status=SagaStatus.RUNNING,
        step="a",
        job_id=None,
        data_json='{"n": 2}',
        error=None,
        entry_json='{"event": "moved"}',
    )
    values.update(fields)
    return SagaChange(**values)  # type: ignore[arg-type]


def test_insert_update_history_and_search(app: rota.App) -> None:
    saga = new_saga(app, "k1")
    assert (saga.version, saga.status, saga.data, saga.job_id) == (1, "running", {"n": 1}, None)
    with app.transaction() as conn:
        again = SagaStore(app.driver).insert(
            conn, key="k1", name="s", step="a", plan_json="[]", data_json="{}", entry_json="{}"
        )
        assert again is None  # the key is taken
        job = app.driver.job_insert_many(
            [rota.App(app.url.raw).task(name="t")(lambda: None).build({})], conn=conn
        )[0]
        linked = SagaStore(app.driver).set_job(conn, saga.id, job.id, 60.0)
    assert linked.job_id == job.id and linked.deadline_at is not None
    assert linked.deadline_at - linked.created_at > timedelta(seconds=59)
    time.sleep(0.01)
    with app.transaction() as conn:
        locked = SagaStore(app.driver).lock(conn, saga.id)
        assert locked is not None and locked.version == 1
        moved = SagaStore(app.driver).update(conn, change(saga.id, status=SagaStatus.COMPLETED))
    assert (moved.version, moved.status, moved.data, moved.deadline_at) == (
        2,
        "completed",
        {"n": 2},
        None,
    )
    assert [h["event"] for h in moved.history] == ["started", "moved"]
    assert moved.history[0]["at"] < moved.history[1]["at"]
    assert (
        SagaStore(app.driver).get("k1") == moved and SagaStore(app.driver).get_id(saga.id) == moved
    )
    new_saga(app, "k2")
    k3 = new_saga(app, "k3")
    assert [s.key for s in SagaStore(app.driver).search(None, None, 10, None)] == ["k3", "k2", "k1"]
    assert [s.key for s in SagaStore(app.driver).search("completed", None, 10, None)] == ["k1"]
    assert [s.key for s in SagaStore(app.driver).search(None, "s", 1, k3.id)] == ["k2"]
    assert SagaStore(app.driver).search(None, "other", 10, None) == []


def test_stalled_sagas_by_job_state_and_deadline(app: rota.App) -> None:
    task = app.task(name="t")(lambda: None)
    found: dict[str, int] = {}
    with app.transaction() as conn:
        for key in ("waiting", "discarded", "cancelled", "overdue", "finished"):
            saga = new_saga(app, key, conn)
            job = app.driver.job_insert_many([task.build({})], conn=conn)[0]
            deadline = 0.01 if key == "overdue" else 3600.0
            SagaStore(app.driver).set_job(conn, saga.id, job.id, deadline)
            found[key] = job.id
        SagaStore(app.driver).update(conn, change(saga.id, status=SagaStatus.COMPENSATED))
    app.cancel_job(found["cancelled"])
    claimed = app.driver.job_claim(found["discarded"], "w", 30)
    assert claimed is not None
    entry = json.dumps({"outcome": "discarded"})
    discard = Completion(claimed.id, claimed.lease_token or "", JobState.DISCARDED, entry)
    assert app.driver.job_complete_many([discard]) == {claimed.id}
    time.sleep(0.05)
    stalled = {
        SagaStore(app.driver).get_id(s.saga_id).key: s for s in SagaStore(app.driver).stalled(10)
    }  # type: ignore[union-attr]
    assert sorted(stalled) == ["cancelled", "discarded", "overdue"]
    assert stalled["discarded"].job_state is JobState.DISCARDED
    assert stalled["cancelled"].job_state is JobState.CANCELLED
    assert stalled["overdue"].overdue and not stalled["discarded"].overdue


def test_the_next_step_deadline_of_running_sagas(app: rota.App) -> None:
    """What a resting saga supervisor sleeps until: the earliest step deadline of a
    running saga; a compensating or finished saga's deadline does not count."""
    store = SagaStore(app.driver)
    assert store.next_deadline() is None
    task = app.task(name="t")(lambda: None)
    with app.transaction() as conn:
        for key, deadline in (("soon", 30.0), ("later", 3600.0), ("undoing", 5.0)):
            saga = new_saga(app, key, conn)
            job = app.driver.job_insert_many([task.build({})], conn=conn)[0]
            store.set_job(conn, saga.id, job.id, deadline)
        store.update(conn, change(saga.id, status=SagaStatus.COMPENSATING))
    due = store.next_deadline()
    assert due is not None and 25.0 < due <= 30.01


def test_a_locked_saga_makes_a_second_transition_wait(pg_url: str) -> None:
    app = rota.App(pg_url)
    app.migrate()
    try:
        saga = new_saga(app, "k")
        first_locked = threading.Event()
        release = threading.Event()
        seen: list[int] = []

        def first() -> None:
            with app.transaction() as conn:
                assert SagaStore(app.driver).lock(conn, saga.id) is not None
                first_locked.set()
                release.wait(5)
                SagaStore(app.driver).update(conn, change(saga.id))

        def second() -> None:
            first_locked.wait(5)
            with app.transaction() as conn:
                locked = SagaStore(app.driver).lock(conn, saga.id)
                assert locked is not None
                seen.append(locked.version)

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        first_locked.wait(5)
        time.sleep(0.2)
        assert seen == []  # waiting on the row lock
        release.set()
        for t in threads:
            t.join(10)
        assert seen == [2]  # it sees the first transition once that one committed
    finally:
        app.close()


def test_events_deduplicated_by_key_and_filtered(app: rota.App) -> None:
    with app.transaction() as conn:
        a = EventStore(app.driver).insert(conn, "a.b", 1, '{"x": 1}', "key-1")
        again = EventStore(app.driver).insert(conn, "a.b", 1, '{"x": 2}', "key-1")
        b = EventStore(app.driver).insert(conn, "a.b", 2, "[1, 2]", None)
    time.sleep(0.01)  # PostgreSQL's now() is the transaction's start
    with app.transaction() as conn:
        c = EventStore(app.driver).insert(conn, "c.d", 1, "null", None)
    assert a.created and not again.created and again.id == a.id and again.payload == {"x": 1}
    assert (b.payload, b.version, c.payload) == ([1, 2], 2, None)
    assert EventStore(app.driver).get(a.id) == a and EventStore(app.driver).get(10_000) is None
    search = EventStore(app.driver).search
    assert [e.id for e in search(EventFilter(name="a.b"))] == [a.id, b.id]
    assert [e.id for e in search(EventFilter(after_id=a.id, until_id=b.id))] == [b.id]
    assert [e.id for e in search(EventFilter(since=c.published_at))] == [c.id]
    assert [e.id for e in search(EventFilter(limit=1))] == [a.id]


def test_subscriptions_keep_their_first_time(app: rota.App) -> None:
    events = EventStore(app.driver)
    events.subscribe_many([Subscription("a.b", "t1", "default", 0, 5)])
    (first,) = events.subscriptions(None, None)
    time.sleep(0.02)
    events.subscribe_many(
        [Subscription("a.b", "t1", "mail", 1, 3), Subscription("a.b", "t2", "default", 0, 5)]
    )
    stored = events.subscriptions(None, "a.b")
    assert [(s.task, s.queue, s.max_attempts) for s in stored] == [
        ("t1", "mail", 3),
        ("t2", "default", 5),
    ]
    assert stored[0].created_at == first.created_at
    assert events.unsubscribe("a.b", "t1") and not events.unsubscribe("a.b", "t1")
    assert [s.task for s in events.subscriptions(None, None)] == ["t2"]
