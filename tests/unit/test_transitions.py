"""Every statement that moves jobs between states declares its moves (`-- moves: a -> b`),
every declared move is in rota.job.TRANSITIONS, and every state a statement can set is
among its declared targets: a query cannot invent a transition silently."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rota.job import TRANSITIONS, JobState

QUERIES = Path(__file__).resolve().parents[2] / "src" / "rota" / "drivers"
NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
MOVES = re.compile(r"^--\s*moves:\s*(.+?)\s*->\s*(.+?)\s*$", re.MULTILINE)
STATES = {s.value for s in JobState}


def blocks() -> list[tuple[str, str, str]]:
    """(dialect, query name, its text) of every named query."""
    found = []
    for path in sorted(QUERIES.glob("*/queries/*.sql")):
        parts = NAME.split(path.read_text(encoding="utf-8"))
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            found.append((path.parent.parent.name, name, body))
    return found


def declared(body: str) -> set[tuple[str, str]]:
    edges = set()
    for sources, targets in MOVES.findall(body):
        for source in sources.split(","):
            for target in targets.split(","):
                edges.add((source.strip(), target.strip()))
    return edges


def set_states(body: str) -> set[str]:
    """The states a block's own statements (not its includes) can assign to rota_jobs."""
    sql = "\n".join(ln for ln in body.splitlines() if not ln.lstrip().startswith("--"))
    found: set[str] = set()
    for update in re.finditer(r"UPDATE\s+rota_jobs\b(.*?)(?:;|\Z)", sql, re.S | re.I):
        # The assignment `state = <expression>` up to the next top-level assignment.
        for assignment in re.finditer(
            r"(?:SET|,)\s*state\s*=\s*(.+?)(?=,\s*\n\s*\w+\s*=|\n\s*(?:FROM|WHERE|RETURNING)\b)",
            update.group(1),
            re.S | re.I,
        ):
            found |= set(re.findall(r"'(\w+)'", assignment.group(1))) & STATES
    return found


def test_the_rule_sees_the_states_a_statement_sets() -> None:
    """The checker itself reads a CASE and a plain literal (a test that cannot fail is none)."""
    body = """
UPDATE rota_jobs
SET state = CASE WHEN attempt >= max_attempts THEN 'discarded' ELSE 'available' END,
    finished_at = now()
WHERE state = 'running'
"""
    assert set_states(body) == {"discarded", "available"}
    assert set_states("UPDATE rota_jobs SET state = 'cancelled'\nWHERE id = 1") == {"cancelled"}
    assert set_states("UPDATE rota_jobs SET checkpoint = 1\nWHERE id = 1") == set()


@pytest.mark.parametrize(("dialect", "name", "body"), blocks(), ids=lambda v: str(v)[:40])
def test_moves_are_declared_and_allowed(dialect: str, name: str, body: str) -> None:
    edges = declared(body)
    for source, target in edges:
        assert source in STATES and target in STATES, f"{name}: unknown state in {source}->{target}"
        if source != target:  # staying put (a running job asked to stop) is no move
            assert JobState(target) in TRANSITIONS[JobState(source)], (
                f"{dialect} {name} moves {source} -> {target}, which rota.job.TRANSITIONS "
                "does not allow: add the edge there (with why) or change the statement"
            )
    targets = set_states(body)
    undeclared = targets - {t for _, t in edges}
    assert not undeclared, (
        f"{dialect} {name} sets state to {sorted(undeclared)} without declaring the move "
        "(`-- moves: source -> target` under its name)"
    )
