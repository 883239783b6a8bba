"""Enqueue: validation at the door, bulk, scheduling, keys and the caller's transaction."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

import rota


def test_enqueue_validates_and_stores(app: rota.App) -> None:
    @app.task(queue="tickets", priority=3, max_attempts=5)
    def make_ticket(order_id: int, seats: list[str] | None = None) -> None: ...

    job = make_ticket.enqueue(order_id=7)
    assert job.created and job.state is rota.JobState.AVAILABLE
    assert (job.queue, job.priority, job.max_attempts) == ("tickets", 3, 5)
    assert job.args == {"order_id": 7, "seats": None}
    assert app.get_job(job.id) == job

    override = make_ticket.enqueue(order_id=8, queue="vip", priority=-5, max_attempts=1)
    assert (override.queue, override.priority, override.max_attempts) == ("vip", -5, 1)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, rota.ArgumentsError, "missing argument 'order_id'"),
        ({"order_id": "x"}, rota.ArgumentsError, "order_id"),
        ({"order_id": 1, "extra": 2}, rota.ArgumentsError, "unexpected argument 'extra'"),
        ({"order_id": 1, "priority": 1000}, rota.ArgumentsError, "priority"),
        ({"order_id": 1, "queue": "bad queue"}, rota.ArgumentsError, "bad queue name"),
        ({"order_id": 1, "delay": -1}, rota.ArgumentsError, "delay"),
        ({"order_id": 1, "delay": float("inf")}, rota.ArgumentsError, "delay"),
        ({"order_id": 1, "at": datetime(2030, 1, 1)}, rota.ArgumentsError, "timezone-aware"),
        ({"order_id": 1, "at": datetime.now(UTC), "delay": 1}, rota.ArgumentsError, "not both"),
        ({"order_id": 1, "key": ""}, rota.ArgumentsError, "key"),
        ({"order_id": 1, "max_attempts": 0}, rota.ArgumentsError, "max_attempts"),
    ],
)
def test_bad_enqueues_are_refused_and_store_nothing(
    app: rota.App, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    @app.task
    def make_ticket(order_id: int) -> None: ...

    with pytest.raises(error, match=message):
        make_ticket.enqueue(**kwargs)
    assert app.list_jobs() == []


def test_payload_limit_and_non_json(database_url: str) -> None:
    with rota.App(database_url, max_payload_bytes=1000) as app:
        app.migrate()

        @app.task
        def store(blob: str = "", data: object = None) -> None: ...

        with pytest.raises(rota.PayloadError, match="over the 1000-byte limit"):
            store.enqueue(blob="x" * 2000)
        with pytest.raises(rota.ArgumentsError):
            store.enqueue(data={1, 2})
        assert app.list_jobs() == []


def test_unknown_task_by_name_suggests(app: rota.App) -> None:
    @app.task(name="shop.make_ticket")
    def make_ticket(order_id: int) -> None: ...

    with pytest.raises(rota.UnknownTaskError, match=r"Did you mean 'shop\.make_ticket'"):
        app.enqueue("make_ticket", {"order_id": 1})
    job = app.enqueue("shop.make_ticket", {"order_id": 1}, priority=2)
    assert job.priority == 2


def test_enqueue_many_is_all_or_nothing(app: rota.App) -> None:
    @app.task
    def make_ticket(order_id: int) -> None: ...

    jobs = make_ticket.enqueue_many([{"order_id": i} for i in range(500)])
    assert [j.args["order_id"] for j in jobs] == list(range(500))
    assert len({j.id for j in jobs}) == 500
    with pytest.raises(rota.ArgumentsError, match="item 2"):
        make_ticket.enqueue_many([{"order_id": 1}, {"order_id": 2}, {"order_id": "x"}])
    assert len(app.list_jobs(limit=1000)) == 500
    assert make_ticket.enqueue_many([]) == []


def test_each_job_of_a_bulk_enqueue_is_the_one_stored_under_its_id(app: rota.App) -> None:
    """The plain bulk insert (no keys) maps the returned ids back to the inputs by the
    order it drew them in: a wrong map would hand out jobs with another job's arguments."""

    @app.task
    def make_ticket(order_id: int) -> None: ...

    jobs = make_ticket.enqueue_many([{"order_id": i} for i in range(300)])
    later = make_ticket.options(delay=3600).enqueue_many([{"order_id": -i} for i in range(3)])
    # A tenant or a partition key takes the full insert (conflict arbiter, queue gate).
    tenants = make_ticket.options(tenant="acme").enqueue_many(
        [{"order_id": 1000 + i} for i in range(200)]
    )
    partitioned = make_ticket.options(partition_key="p").enqueue_many(
        [{"order_id": 2000 + i} for i in range(5)]
    )
    for batch in (jobs, tenants, partitioned):
        assert [j.id for j in batch] == sorted(j.id for j in batch)
    for job in [*jobs, *later, *tenants, *partitioned]:
        stored = app.get_job(job.id)
        assert stored is not None
        assert (stored.args, stored.state, stored.run_at) == (job.args, job.state, job.run_at)
    assert {j.state for j in later} == {rota.JobState.SCHEDULED}


def test_bulk_enqueues_running_at_once_each_get_their_own_ids(app: rota.App) -> None:
    """Two bulk enqueues at the same time draw ids from one sequence (interleaved on
    PostgreSQL): each still hands back, under every id, the job it stored there."""

    @app.task
    def make_ticket(order_id: int, seat: str = "") -> None: ...

    def enqueue(offset: int) -> list[rota.Job]:
        jobs: list[rota.Job] = []
        for round_ in range(4):
            first = offset + round_ * 1000
            jobs += make_ticket.enqueue_many(
                [{"order_id": first + i, "seat": f"s{first + i}"} for i in range(1000)]
            )
        return jobs

    with ThreadPoolExecutor(2) as pool:
        batches = list(pool.map(enqueue, (0, 100_000)))
    jobs = [job for batch in batches for job in batch]
    assert len({job.id for job in jobs}) == 8000
    stored = {job.id: job for job in app.list_jobs(task=make_ticket.name, limit=10_000)}
    assert len(stored) == 8000
    for job in jobs:
        assert (
            stored[job.id].args
            == job.args
            == {
                "order_id": job.args["order_id"],
                "seat": f"s{job.args['order_id']}",
            }
        )
        assert (stored[job.id].state, stored[job.id].run_at) == (job.state, job.run_at)


def test_scheduled_jobs(app: rota.App) -> None:
    @app.task
    def later() -> None: ...

    at = datetime.now(UTC) + timedelta(days=1)
    a = later.enqueue(at=at)
    b = later.enqueue(delay=3600)
    c = later.enqueue(delay=0)
    assert a.state is rota.JobState.SCHEDULED and abs((a.run_at - at).total_seconds()) < 0.01
    assert b.state is rota.JobState.SCHEDULED
    assert c.state is rota.JobState.AVAILABLE


def test_same_key_gives_the_same_job(app: rota.App) -> None:
    @app.task
    def make_ticket(order_id: int) -> None: ...

    first = make_ticket.enqueue(order_id=1049, key="order-1049")
    second = make_ticket.enqueue(order_id=1049, key="order-1049")
    assert first.created and not second.created and second.id == first.id
    assert len(app.list_jobs()) == 1


# --- the caller's own transaction ------------------------------------------------------


def test_sqlite_transaction_commit_and_rollback(sqlite_url: str) -> None:
    with rota.App(sqlite_url) as app:
        app.migrate()

        @app.task
        def make_ticket(order_id: int) -> None: ...

        path = app.url.path
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")

        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO orders (id) VALUES (1)")
        kept = make_ticket.enqueue(order_id=1, conn=conn)
        conn.execute("INSERT INTO orders (id) VALUES (10)")  # a rowid of the caller's
        many = make_ticket.enqueue_many([{"order_id": 3}, {"order_id": 4}], conn=conn)
        conn.execute("COMMIT")

        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO orders (id) VALUES (2)")
        make_ticket.enqueue(order_id=2, conn=conn)
        conn.execute("ROLLBACK")

        stored = {j.id: j.args for j in app.list_jobs()}
        assert stored == {kept.id: {"order_id": 1}, **{j.id: j.args for j in many}}
        assert [j.args for j in many] == [{"order_id": 3}, {"order_id": 4}]
        assert conn.execute("SELECT id FROM orders").fetchall() == [(1,), (10,)]
        assert conn.row_factory is None  # rota did not change the caller's connection
        conn.close()


def test_sqlite_default_python_transactions(sqlite_url: str) -> None:
    """The stdlib default (implicit BEGIN before DML) also works."""
    with rota.App(sqlite_url) as app:
        app.migrate()

        @app.task
        def make_ticket(order_id: int) -> None: ...

        with sqlite3.connect(app.url.path) as conn:  # commits on success
            make_ticket.enqueue(order_id=1, conn=conn)
        conn.close()
        conn = sqlite3.connect(app.url.path)
        make_ticket.enqueue(order_id=2, conn=conn)
        conn.rollback()
        conn.close()
        assert [j.args for j in app.list_jobs()] == [{"order_id": 1}]


def test_postgres_transaction_commit_and_rollback(pg_url: str) -> None:
    with rota.App(pg_url) as app:
        app.migrate()

        @app.task
        def make_ticket(order_id: int) -> None: ...

        with psycopg.connect(pg_url) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
            conn.commit()
            conn.execute("INSERT INTO orders VALUES (1)")
            kept = make_ticket.enqueue(order_id=1, conn=conn)
            many = make_ticket.enqueue_many([{"order_id": 10}, {"order_id": 11}], conn=conn)
            conn.commit()
            conn.execute("INSERT INTO orders VALUES (2)")
            make_ticket.enqueue(order_id=2, conn=conn)
            assert len(app.list_jobs()) == 3  # not visible outside the open transaction
            conn.rollback()
            ids = sorted(j.id for j in app.list_jobs())
            assert ids == sorted([kept.id, *(j.id for j in many)])
            assert conn.execute("SELECT id FROM orders").fetchall() == [(1,)]


def test_conn_of_the_wrong_kind_is_refused(database_url: str, tmp_path: object) -> None:
    with rota.App(database_url) as app:
        app.migrate()

        @app.task
        def noop() -> None: ...

        with pytest.raises(rota.ConfigurationError, match="conn= must be"):
            noop.enqueue(conn=object())


def test_sqlite_write_inside_a_transaction_without_conn_fails_fast(sqlite_url: str) -> None:
    with rota.App(sqlite_url) as app:
        app.migrate()

        @app.task
        def noop(n: int) -> None: ...

        started = time.monotonic()
        with pytest.raises(rota.ConfigurationError, match="pass conn="), app.transaction():
            noop.enqueue(n=1)  # forgot conn=: would wait on its own lock
        assert time.monotonic() - started < 2
        with app.transaction() as conn:
            noop.enqueue(n=2, conn=conn)
        assert [j.args for j in app.list_jobs()] == [{"n": 2}]
