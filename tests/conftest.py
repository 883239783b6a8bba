"""Shared fixtures: a real SQLite file per test, and a PostgreSQL schema per test on the
server named by $ROTA_TEST_POSTGRES_URL (default: the local `test` database).

PostgreSQL tests skip with a clear message when the server is unreachable, except when
$ROTA_REQUIRE_POSTGRES is set (CI), where they fail instead."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

import rota
from tests.helpers import wait_for

PG_URL = os.environ.get("ROTA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRE_PG = bool(os.environ.get("ROTA_REQUIRE_POSTGRES"))

_pg_state: dict[str, str | None] = {}


def _pg_unreachable() -> str | None:
    """None when the server answers, else why not (checked once per session)."""
    if "error" not in _pg_state:
        try:
            with psycopg.connect(PG_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_state["error"] = None
        except psycopg.Error as exc:
            _pg_state["error"] = str(exc).strip()
    return _pg_state["error"]


def require_postgres() -> None:
    error = _pg_unreachable()
    if error is None:
        return
    message = f"PostgreSQL at {PG_URL} is unreachable: {error}"
    if REQUIRE_PG:
        pytest.fail(message + " (ROTA_REQUIRE_POSTGRES is set: CI must not skip)")
    pytest.skip(message + " (set ROTA_TEST_POSTGRES_URL to test PostgreSQL)")


def end_backend(pid: int) -> None:
    """End PostgreSQL backend `pid` and wait until it is gone: pg_terminate_backend only
    signals it, and its client sees the end once it has exited."""
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)

        def gone() -> bool:
            found = admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))
            return found.fetchone() is None

        wait_for(gone, timeout=10)


def pg_schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL schema for one test, dropped afterwards."""
    require_postgres()
    schema = f"rota_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield pg_schema_url(schema)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'rota.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test using this runs once per dialect."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rota.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def app(database_url: str) -> Iterator[rota.App]:
    """A migrated app on a fresh database (tasks are registered by each test)."""
    instance = rota.App(database_url)
    instance.migrate()
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture
def dialect(database_url: str) -> str:
    return "sqlite" if database_url.startswith("sqlite") else "postgres"
