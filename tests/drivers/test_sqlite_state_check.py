"""Migration 0022 on SQLite: rota_jobs' CHECK on `state` becomes an OR chain (its IN list
was built into a temporary b-tree again for every row written), edited in place in the
schema. It must accept and refuse exactly what it did, keep every row, reach connections
that were open before it, and leave a CHECK it does not recognise alone."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

import rota
from rota.drivers import queries
from rota.drivers.sqlite.driver import _statements
from rota.drivers.sqlite.schema_edits import JOB_STATES, STATE_OR_CHAIN, state_check_as_or_chain

_Q = queries.load("sqlite")
_INSERT = (
    "INSERT INTO rota_jobs (task, queue, max_attempts, run_at, created_at, state, lease_token)"
    " VALUES ('t', 'q', 1, 0, 0, ?, ?)"
)
# A list of constants after IN: what SQLite rebuilds per row in a CHECK, index or trigger.
_IN_LIST = re.compile(r"\bIN\s*\(\s*'", re.I)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    return conn


def _at_version(path: Path, last: int) -> sqlite3.Connection:
    """A database migrated up to `last`, as an older rota left it."""
    conn = _connect(path)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(_Q["schema_create_migrations"])
    for version, name, sql in queries.migrations("sqlite")[:last]:
        for statement in _statements(sql):
            conn.execute(statement)
        conn.execute(_Q["schema_record"], {"version": version, "name": name})
    conn.execute("COMMIT")
    return conn


def _table_sql(conn: sqlite3.Connection) -> str:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'rota_jobs'").fetchone()
    return str(row[0])


def _ephemeral_tables_of_an_insert(conn: sqlite3.Connection, tag: str) -> int:
    # EXPLAIN alone is not re-prepared after a schema change: a fresh text each call.
    program = conn.execute(f"EXPLAIN {_INSERT} -- {tag}", ("available", None)).fetchall()
    return [step[1] for step in program].count("OpenEphemeral")


def _insert(conn: sqlite3.Connection, state: str) -> None:
    conn.execute(_INSERT, (state, "token" if state == "running" else None))


def _migrate(path: Path) -> list[int]:
    app = rota.App(f"sqlite:///{path}")
    try:
        return app.migrate()
    finally:
        app.close()


def test_the_states_are_the_job_states() -> None:
    assert JOB_STATES == tuple(state.value for state in rota.JobState)


def test_no_per_row_test_on_rota_jobs_builds_an_in_list(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    _migrate(path)
    conn = _connect(path)
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'rota_jobs' AND sql IS NOT NULL"
    ).fetchall()
    assert {kind for kind, _, _ in rows} == {"table", "index", "trigger"}
    assert [(kind, name) for kind, name, sql in rows if _IN_LIST.search(sql)] == []
    assert STATE_OR_CHAIN in _table_sql(conn)
    assert _ephemeral_tables_of_an_insert(conn, "new") == 0
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_the_check_accepts_and_refuses_what_it_did(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    _migrate(path)
    conn = _connect(path)
    for state in JOB_STATES:
        _insert(conn, state)
    for wrong in ("bogus", "", "Completed", "available ", "'available'"):
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
            _insert(conn, wrong)
    with pytest.raises(sqlite3.IntegrityError, match="NOT NULL"):
        conn.execute(_INSERT, (None, None))
    assert conn.execute("SELECT count(*) FROM rota_jobs").fetchone()[0] == len(JOB_STATES)


def test_an_upgrade_keeps_the_rows_and_reaches_connections_open_before_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    older = _at_version(path, 21)
    for state in JOB_STATES:
        _insert(older, state)
    before = older.execute("SELECT * FROM rota_jobs ORDER BY id").fetchall()
    assert _ephemeral_tables_of_an_insert(older, "before") == 1  # the IN list, per row
    version = older.execute("PRAGMA schema_version").fetchone()[0]

    assert _migrate(path) == [22]

    # The connection an older worker kept open parses the new schema before its next
    # statement, and its writes are checked as before.
    assert older.execute("PRAGMA schema_version").fetchone()[0] > version
    assert older.execute("SELECT * FROM rota_jobs ORDER BY id").fetchall() == before
    assert _ephemeral_tables_of_an_insert(older, "after") == 0
    with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
        _insert(older, "bogus")
    _insert(older, "available")
    assert STATE_OR_CHAIN in _table_sql(older)
    assert older.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert _migrate(path) == []


def test_the_edit_alone_reaches_connections_open_before_it(tmp_path: Path) -> None:
    """The schema_version bump, not the statements beside it, makes others parse again."""
    path = tmp_path / "old.db"
    other = _at_version(path, 21)
    assert _ephemeral_tables_of_an_insert(other, "before") == 1
    editor = _connect(path)
    editor.execute("BEGIN IMMEDIATE")
    assert state_check_as_or_chain(editor.cursor()) is True
    editor.execute("COMMIT")
    other.execute("SELECT count(*) FROM rota_jobs").fetchone()
    assert _ephemeral_tables_of_an_insert(other, "after") == 0
    assert other.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    editor.execute("BEGIN IMMEDIATE")
    assert state_check_as_or_chain(editor.cursor()) is False  # nothing left to edit
    editor.execute("COMMIT")


def test_a_check_spelled_otherwise_is_left_as_it_is(tmp_path: Path) -> None:
    """A schema edited by hand keeps its own CHECK; the version is still recorded."""
    path = tmp_path / "edited.db"
    conn = _at_version(path, 21)
    states = (
        "available",
        "scheduled",
        "running",
        "retryable",
        "completed",
        "discarded",
        "cancelled",
    )
    other = "CHECK (state IN (" + ", ".join(f"'{s}'" for s in states) + "))"
    original = _table_sql(conn)
    edited = re.sub(r"CHECK \(state IN\s*\([^)]*\)\)", other, original)
    assert edited != original
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'rota_jobs'", (edited,))
    conn.execute(f"PRAGMA schema_version = {version + 1}")
    conn.execute("PRAGMA writable_schema = OFF")
    conn.execute("COMMIT")

    assert _migrate(path) == [22]
    assert _table_sql(conn) == edited
    with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
        _insert(conn, "bogus")
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
