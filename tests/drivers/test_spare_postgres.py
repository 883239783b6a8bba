"""The connection used last is kept aside as the spare (drivers/postgres/spare.py): one
call at a time never goes through the pool, yet a caller waiting for the pool is never left
waiting while a connection idles as the spare, a session the server ended is replaced,
and the spare goes back to the pool in time for its lifetime and drain()."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import rota
from rota.drivers.postgres import spare
from rota.drivers.postgres.database import PostgresDatabase
from tests.conftest import end_backend
from tests.helpers import tickets_app


@pytest.fixture
def app(pg_url: str) -> Iterator[rota.App]:
    with tickets_app(pg_url, pool_size=1) as app:
        yield app


def database(app: rota.App) -> PostgresDatabase:
    db = app.driver.database
    assert isinstance(db, PostgresDatabase)
    return db


def pool_requests(app: rota.App) -> int:
    return int(database(app)._pool.get_stats().get("requests_num", 0))


def test_one_call_at_a_time_keeps_the_spare_and_leaves_the_pool_alone(app: rota.App) -> None:
    issue = app.get_task("tickets.issue")
    issue.enqueue(order=0)
    before = pool_requests(app)
    pids = set()
    for n in range(1, 21):
        issue.enqueue(order=n)
        with app.transaction() as conn:  # a transaction takes the spare as well
            pids.add(conn.info.backend_pid)
    assert pool_requests(app) == before
    assert len(pids) == 1
    assert len(app.list_jobs(limit=100)) == 21


def test_a_caller_waiting_for_the_pool_gets_the_connection_given_back(app: rota.App) -> None:
    """pool_size=1: while one thread holds the only connection, another waits in the pool;
    the connection given back goes to it, not to the spare (it would wait out the pool's
    10 s timeout and fail)."""
    issue = app.get_task("tickets.issue")
    issue.enqueue(order=0)
    holding, took = threading.Event(), []

    def hold() -> None:
        with app.transaction() as conn:
            holding.set()
            conn.execute("SELECT pg_sleep(0.5)")

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(5)
    started = time.monotonic()
    issue.enqueue(order=1)  # waits in the pool until hold() gives the connection back
    took.append(time.monotonic() - started)
    holder.join()
    assert took[0] < 3.0
    # And it is kept again afterwards: one call at a time leaves the pool alone.
    before = pool_requests(app)
    issue.enqueue(order=2)
    assert pool_requests(app) == before


def test_a_spare_whose_session_the_server_ended_is_replaced(app: rota.App) -> None:
    issue = app.get_task("tickets.issue")
    issue.enqueue(order=0)
    with app.transaction() as conn:
        pid = conn.info.backend_pid
    end_backend(pid)
    issue.enqueue(order=1)  # the spare is probed, found ended, and replaced: no error
    with app.transaction() as conn:
        assert conn.info.backend_pid != pid
    assert len(app.list_jobs()) == 2


def test_the_spare_goes_back_to_the_pool_after_its_time(
    app: rota.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    issue = app.get_task("tickets.issue")
    issue.enqueue(order=0)
    monkeypatch.setattr(spare, "SPARE_SECONDS", 0.0)
    before = pool_requests(app)
    for n in range(1, 4):
        issue.enqueue(order=n)
    assert pool_requests(app) >= before + 2  # each call went through the pool again


def test_new_deadlines_reach_the_spare_too(app: rota.App) -> None:
    """A worker sets its deadlines after the app was used: the pool replaces its
    connections, and the spare is one of them."""
    issue = app.get_task("tickets.issue")
    issue.enqueue(order=0)
    with app.transaction() as conn:
        before = conn.info.backend_pid
    db = database(app)
    db.set_deadlines(db.deadlines)
    with app.transaction() as conn:
        assert conn.info.backend_pid != before
