"""Schema changes that SQL migrations cannot make on SQLite.

SQLite cannot alter a table's CHECK: the documented ways are rebuilding the table (copying
every row, recreating its indexes and triggers, with foreign keys switched off outside any
transaction) or, for a change that leaves every stored row valid and the file's format
unchanged, editing the table's text in `sqlite_master` under `PRAGMA writable_schema` and
bumping `schema_version` so that every connection, in every process, parses it again
(https://www.sqlite.org/lang_altertable.html, "making other kinds of table schema
changes"). An edit here is of the second kind and runs inside the migration's transaction:
it commits with its version's row in `rota_schema_migrations` or not at all.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

JOB_STATES = (
    "scheduled",
    "available",
    "running",
    "retryable",
    "completed",
    "discarded",
    "cancelled",
)

# The CHECK of 0001_core, whitespace as SQLite may have kept it.
_STATE_IN = re.compile(
    r"CHECK \(state IN\s*\(\s*" + r",\s*".join(f"'{s}'" for s in JOB_STATES) + r"\s*\)\)"
)
STATE_OR_CHAIN = "CHECK (" + " OR ".join(f"state = '{s}'" for s in JOB_STATES) + ")"


def state_check_as_or_chain(cursor: sqlite3.Cursor) -> bool:
    """Rewrite rota_jobs' `CHECK (state IN (...))` as an OR chain of the same states.

    SQLite evaluates an IN list by building its constants into a temporary b-tree, and a
    CHECK runs for every row written: each claim and completion rebuilt it per job, inside
    the write lock (migration 0021 did the same for indexes and triggers). Both forms accept
    exactly the same values, so no stored row needs checking, and a connection still holding
    the old text enforces the same rule. Returns whether the table was changed: a schema
    whose text differs (edited by hand) or a build that refuses `writable_schema` (SQLite's
    defensive mode) keeps its CHECK as it is, correct and only slower."""
    found = cursor.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'rota_jobs'"
    ).fetchone()
    if found is None:
        return False
    edited, count = _STATE_IN.subn(STATE_OR_CHAIN, found[0])
    if count != 1:
        return False
    version = int(cursor.execute("PRAGMA schema_version").fetchone()[0])
    cursor.execute("PRAGMA writable_schema = ON")
    try:
        cursor.execute(
            "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'rota_jobs'",
            (edited,),
        )
    except sqlite3.DatabaseError:
        return False  # "table sqlite_master may not be modified": defensive mode
    finally:
        cursor.execute("PRAGMA writable_schema = OFF")
    # A new schema_version makes every connection parse the schema again before its next
    # statement; this one does at once, and a text it could not parse would fail here,
    # inside the transaction, and roll the migration back.
    cursor.execute(f"PRAGMA schema_version = {version + 1}")
    cursor.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return True


# The edit that runs after the SQL of a migration version (which records that version).
EDITS: dict[int, Callable[[sqlite3.Cursor], bool]] = {22: state_check_as_or_chain}
