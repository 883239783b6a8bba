"""A single enqueue runs on libpq directly (drivers/postgres/lane.py): it must store and
return exactly what psycopg's path does, raise what psycopg's path raises, and leave to
psycopg whatever it cannot send or read as psycopg would."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg.rows import dict_row

import rota
from rota.drivers.postgres import database as pg_database
from rota.drivers.postgres.lane import Lane, _Statement
from rota.errors import RotaError
from tests.conftest import end_backend
from tests.helpers import tickets_app


class Level(enum.IntEnum):
    HIGH = 5


class Queue(enum.StrEnum):
    MAIL = "mail"


TIME_ZONE = "America/Sao_Paulo"  # never UTC (daylight saving time until 2019)


def _with_time_zone(url: str) -> str:
    # The schema's URL already carries `options=-csearch_path=...`: add the time zone to it.
    return url.replace("options=", "options=-cTimeZone%3D" + TIME_ZONE.replace("/", "%2F") + "%20")


@pytest.fixture
def app(pg_url: str) -> Iterator[rota.App]:
    with tickets_app(_with_time_zone(pg_url), pool_size=1) as app:
        yield app


def plain_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "j_task": "tickets.issue",
        "j_queue": "default",
        "j_args": '{"order": 1}',
        "j_priority": 0,
        "j_max_attempts": 20,
        "j_at": None,
        "j_delay": None,
        "j_meta": None,
    }
    params.update(overrides)
    return params


def stored(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    row = conn.execute(
        "SELECT id, state, run_at, created_at, args, priority, max_attempts, meta "
        "FROM rota_jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row is not None
    return dict(row)


@pytest.fixture
def conn(app: rota.App) -> Iterator[psycopg.Connection[Any]]:
    database = app.driver.database
    assert isinstance(database, pg_database.PostgresDatabase)
    with psycopg.connect(database.conninfo(), autocommit=True, row_factory=dict_row) as conn:
        yield conn


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"j_delay": 90.25, "j_priority": -3, "j_meta": '{"trace": "ab"}'},
        {"j_at": datetime(2031, 3, 9, 23, 59, 58, 123456, tzinfo=ZoneInfo("Asia/Kolkata"))},
        {"j_at": datetime(2001, 1, 1, tzinfo=UTC), "j_args": '{"s": "\\u00e9 \\ud83c\\udfab"}'},
        {"j_delay": 1e-06, "j_max_attempts": 1},
    ],
)
def test_the_lane_returns_what_psycopg_reads_back(
    conn: psycopg.Connection[Any], overrides: dict[str, Any]
) -> None:
    lane = Lane(pg_database.QUERIES, frozenset({"job_insert_plain"}))
    params = plain_params(**overrides)
    rows = lane.run(conn, "job_insert_plain", params)
    assert rows is not None and len(rows) == 1
    got = rows[0]
    assert set(got) == {"id", "state", "run_at", "created_at", "notified"}
    again = stored(conn, got["id"])
    for column in ("state", "run_at", "created_at"):
        assert got[column] == again[column]
    # Shown in the session's time zone, as psycopg shows it.
    assert got["run_at"].utcoffset() == again["run_at"].utcoffset() != timedelta(0)
    assert got["created_at"].utcoffset() == again["created_at"].utcoffset()
    assert got["notified"] is None
    if overrides.get("j_at") is not None:
        assert got["run_at"] == overrides["j_at"]
    # What was sent is what is stored.
    assert again["args"] == json.loads(params["j_args"])
    assert (again["priority"], again["max_attempts"]) == (
        params["j_priority"],
        params["j_max_attempts"],
    )
    assert again["meta"] == (None if params["j_meta"] is None else json.loads(params["j_meta"]))
    if params["j_delay"] is not None:
        waited = (again["run_at"] - again["created_at"]).total_seconds()
        assert waited == pytest.approx(params["j_delay"], abs=1e-6)


def test_an_enqueue_through_the_lane_is_the_job_psycopg_would_return(
    app: rota.App, conn: psycopg.Connection[Any]
) -> None:
    issue = app.get_task("tickets.issue")
    at = datetime(2030, 6, 1, 12, 0, 0, 250000, tzinfo=UTC)
    job = issue.options(at=at, priority=5).enqueue(order=7)
    read = app.get_job(job.id)
    assert read is not None
    assert (job.state, job.run_at, job.created_at, job.priority) == (
        read.state,
        read.run_at,
        read.created_at,
        read.priority,
    )
    assert job.run_at.utcoffset() == read.run_at.utcoffset()
    assert stored(conn, job.id)["args"] == {"order": 7}
    with app.transaction() as same:  # the spare: the connection the enqueue ran on
        names = [r["name"] for r in same.execute("SELECT name FROM pg_prepared_statements")]
    assert "rota_job_insert_plain" in names  # it went by the lane


def test_placeholders_are_numbered_once_per_name() -> None:
    statement = _Statement.of("x", "SELECT %(a)s::int + %(b)s::int, %(a)s::int % 2, '%%'")
    assert statement.sql == b"SELECT $1::int + $2::int, $1::int % 2, '%'"
    assert statement.names == ("a", "b")
    with pytest.raises(ValueError, match="only %\\(name\\)s"):
        _Statement.of("y", "SELECT %(a)b::int[]")


def test_what_the_lane_cannot_send_is_left_to_psycopg(conn: psycopg.Connection[Any]) -> None:
    lane = Lane(pg_database.QUERIES, frozenset({"job_insert_plain"}))
    count = "SELECT count(*) AS n FROM rota_jobs"
    before = conn.execute(count).fetchone()
    # libpq's text parameters end at a NUL; a naive datetime has no instant.
    assert lane.run(conn, "job_insert_plain", plain_params(j_queue="a\x00b")) is None
    naive = datetime(2030, 1, 1)  # the case under test
    assert lane.run(conn, "job_insert_plain", plain_params(j_at=naive)) is None
    # A subclass may be sent otherwise by psycopg (an enum by its name).
    assert lane.run(conn, "job_insert_plain", plain_params(j_priority=Level.HIGH)) is None
    assert lane.run(conn, "job_insert_plain", plain_params(j_queue=Queue.MAIL)) is None
    assert conn.execute(count).fetchone() == before


def test_a_result_type_the_lane_cannot_read_is_left_to_psycopg(
    conn: psycopg.Connection[Any],
) -> None:
    lane = Lane({"odd": "SELECT %(x)s::numeric AS n"}, frozenset({"odd"}))
    assert lane.run(conn, "odd", {"x": 1}) is None
    assert lane.run(conn, "odd", {"x": 2}) is None  # decided once, not asked again


def test_a_statement_the_server_forgot_is_prepared_again(conn: psycopg.Connection[Any]) -> None:
    lane = Lane(pg_database.QUERIES, frozenset({"job_insert_plain"}))
    assert lane.run(conn, "job_insert_plain", plain_params()) is not None
    conn.execute("DEALLOCATE ALL")
    rows = lane.run(conn, "job_insert_plain", plain_params())
    assert rows is not None and rows[0]["state"] == "available"


def test_a_statement_prepared_by_another_lane_is_used(conn: psycopg.Connection[Any]) -> None:
    first = Lane(pg_database.QUERIES, frozenset({"job_insert_plain"}))
    second = Lane(pg_database.QUERIES, frozenset({"job_insert_plain"}))
    assert first.run(conn, "job_insert_plain", plain_params()) is not None
    rows = second.run(conn, "job_insert_plain", plain_params())
    assert rows is not None and rows[0]["state"] == "available"


def test_the_lane_raises_what_psycopg_raises(conn: psycopg.Connection[Any]) -> None:
    lane = Lane(pg_database.QUERIES, frozenset({"job_insert_plain"}))
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        conn.execute(pg_database.QUERIES["job_insert_plain"], plain_params(j_priority=40000))
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        lane.run(conn, "job_insert_plain", plain_params(j_priority=40000))
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        lane.run(conn, "job_insert_plain", plain_params(j_args="{not json"))
    # The connection is still usable: autocommit left no failed transaction behind.
    assert lane.run(conn, "job_insert_plain", plain_params()) is not None


def test_a_connection_the_server_ended_raises_operational_error(
    conn: psycopg.Connection[Any],
) -> None:
    lane = Lane(pg_database.QUERIES, frozenset({"job_insert_plain"}))
    assert lane.run(conn, "job_insert_plain", plain_params()) is not None
    end_backend(conn.info.backend_pid)
    with pytest.raises(psycopg.OperationalError):
        lane.run(conn, "job_insert_plain", plain_params())
    assert conn.broken


def test_bad_input_still_gets_rotas_error(app: rota.App) -> None:
    issue = app.get_task("tickets.issue")
    with pytest.raises(RotaError):
        issue.options(queue="a\x00b").enqueue(order=1)
