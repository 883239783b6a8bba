"""SQLite keeps its counts of finished jobs with a trigger on writes of `finished_at`
(migration 0019: a claim, which writes no finished_at, runs no trigger). So every SQLite
statement that moves a job into or out of a finished state must write finished_at, or the
counts drift; this checks each one declared with `-- moves:` (tests/unit/test_transitions).
A job completing from running is the exception (migration 0020): the statement that
completes it counts the plain completions, for the whole batch at once, and a second
trigger, on writes of `result`, counts the others."""

from __future__ import annotations

import re

from tests.unit.test_transitions import blocks, declared

FINISHED = {"completed", "discarded", "cancelled"}
WRITES_FINISHED_AT = re.compile(r"(?:SET|,)\s*finished_at\s*=", re.I)


def _text(name: str, every: dict[str, str]) -> str:
    """A block with its includes (`-- include: name`) spelled out."""
    body = every[name]
    for included in re.findall(r"^--\s*include:\s*(\w+)\s*$", body, re.M):
        body += "\n" + _text(included, every)
    return body


def test_every_sqlite_move_into_or_out_of_a_finished_state_writes_finished_at() -> None:
    every = {name: body for dialect, name, body in blocks() if dialect == "sqlite"}
    checked = 0
    for name, body in every.items():
        moves = declared(body)
        if not any(a in FINISHED or b in FINISHED for a, b in moves if a != b):
            continue
        checked += 1
        assert WRITES_FINISHED_AT.search(_text(name, every)), (
            f"{name} moves jobs into or out of a finished state without writing "
            "finished_at: SQLite's kept counts (0019) would miss it"
        )
    assert checked >= 10  # the rule saw the statements it is about


COUNTS_ITSELF = re.compile(r"INSERT INTO rota_job_counts\b[^;]*'completed'", re.I)
# Writing `result` has the trigger rota_jobs_completed_row count the job (0020).
WRITES_RESULT = re.compile(r"(?:SET|,)\s*result\s*=", re.I)


def test_every_sqlite_move_from_running_to_completed_counts_itself() -> None:
    every = {name: body for dialect, name, body in blocks() if dialect == "sqlite"}
    completing = [
        name for name, body in every.items() if ("running", "completed") in declared(body)
    ]
    for name in completing:
        text = _text(name, every)
        assert COUNTS_ITSELF.search(text) or WRITES_RESULT.search(text), (
            f"{name} moves jobs from running to completed without counting them or writing "
            "result: the finished_at trigger skips that move (migration 0020), so SQLite's "
            "kept counts would miss it"
        )
    # job_complete_many, and the claims that include it (the completions they carry).
    assert {"job_complete_many", "job_claim_plain"} <= set(completing)


def test_the_rule_sees_a_statement_without_finished_at() -> None:
    assert not WRITES_FINISHED_AT.search("UPDATE rota_jobs SET state = 'cancelled' WHERE id = 1")
    assert WRITES_FINISHED_AT.search("UPDATE rota_jobs SET state = 'x',\n finished_at = NULL")
