"""rota checks a PostgreSQL connection out with getconn/putconn, not the pool's
connection() (drivers/postgres/database.py): whatever a call does or fails to do, the
connection goes back idle, outside any transaction, and serves the next call."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import rota
from tests.conftest import PG_URL


@pytest.fixture
def app(pg_url: str) -> Iterator[rota.App]:
    app = rota.App(pg_url)

    @app.task(name="tickets.issue")
    def issue(order: int) -> None:
        return None

    app.migrate()
    with app:
        yield app


def pooled_pid(app: rota.App) -> int:
    """The backend of the connection the pool hands out next (the one used last)."""
    with app.transaction() as conn:
        pid: int = conn.info.backend_pid
    return pid


def state_of(pid: int) -> str | None:
    with psycopg.connect(PG_URL, autocommit=True) as watcher:
        row = watcher.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,))
        found = row.fetchone()
    return None if found is None else str(found[0])


def test_single_statements_leave_the_connection_idle_and_reuse_it(app: rota.App) -> None:
    task = app.get_task("tickets.issue")
    pid = pooled_pid(app)
    jobs = [task.enqueue(order=order) for order in range(20)]
    assert app.get_job(jobs[-1].id) is not None
    # The calls, one after another, kept to one connection and left no transaction open.
    assert pooled_pid(app) == pid
    assert state_of(pid) == "idle"


def test_a_failed_transaction_is_rolled_back_and_the_connection_serves_again(
    app: rota.App,
) -> None:
    task = app.get_task("tickets.issue")
    pid = pooled_pid(app)
    with pytest.raises(RuntimeError), app.transaction() as conn:
        task.enqueue(order=1, conn=conn)
        raise RuntimeError("the order was not saved")
    with pytest.raises(psycopg.errors.DivisionByZero), app.transaction() as conn:
        conn.execute("SELECT 1/0")
    job = task.enqueue(order=2)
    # Neither the rolled-back job nor an open transaction is left behind.
    assert [j.id for j in app.list_jobs()] == [job.id]
    assert pooled_pid(app) == pid
    assert state_of(pid) == "idle"
