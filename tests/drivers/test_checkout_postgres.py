"""rota checks a PostgreSQL connection out as the spare or with getconn/putconn, not the
pool's connection() (drivers/postgres/database.py, spare.py): whatever a call does or
fails to do, the connection goes back idle, outside any transaction, and serves the next
call."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import rota
from rota.drivers.postgres.database import QUERIES, SCRIPTS, TUPLE_FETCHED
from rota.worker.fetcher import claim_now
from tests.conftest import PG_URL
from tests.helpers import tickets_app


@pytest.fixture
def app(pg_url: str) -> Iterator[rota.App]:
    with tickets_app(pg_url) as app:
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


def test_the_hot_path_names_its_tuple_rows_as_the_database_does(app: rota.App) -> None:
    # Enqueue and claim fetch tuples and name them (TUPLE_FETCHED); app.get_job reads
    # the same rows through psycopg's dict_row. Every field must agree.
    task = app.get_task("tickets.issue")
    single = task.enqueue(order=1)
    many = task.enqueue_many([{"order": 2}, {"order": 3}])
    for job in (single, *many):
        stored = app.get_job(job.id)
        assert stored is not None
        assert (job.id, job.state, job.args, job.run_at, job.created_at) == (
            stored.id,
            stored.state,
            stored.args,
            stored.run_at,
            stored.created_at,
        )
    claimed = {job.id: job for job in claim_now(app, "default", 10, "w1", 30)}
    assert set(claimed) == {single.id, *(job.id for job in many)}
    for job_id, job in claimed.items():
        stored = app.get_job(job_id)
        assert stored is not None
        for field in ("task", "queue", "args", "attempt", "lease_token", "worker", "run_at"):
            assert getattr(job, field) == getattr(stored, field), field
        assert job.lease_expires_at == stored.lease_expires_at
        assert job.attempted_at == stored.attempted_at


def test_tuple_fetched_statements_are_single_and_spell_out_their_columns() -> None:
    # Named from the first result and kept: only a statement whose text fixes its
    # columns may be read that way, and only single statements take that path.
    for name in TUPLE_FETCHED:
        assert len(SCRIPTS[name]) == 1, name
        text = " ".join(QUERIES[name].split()).upper()
        assert "RETURNING *" not in text and "SELECT * FROM ROTA_" not in text, name
