"""The framework examples (#19) run as a user runs them, against SQLite and PostgreSQL:
enqueue in an SQLAlchemy Session's and AsyncSession's transaction, and in Django's
`transaction.atomic()`; the rolled-back job never exists, the committed one runs."""

from __future__ import annotations

import pytest

from tests.integration.test_examples import run


@pytest.mark.parametrize("example", ["sqlalchemy", "django"])
def test_framework_example(example: str, database_url: str) -> None:
    out = run(["-m", f"examples.{example}_enqueue"], url=database_url, timeout=120)
    if example == "sqlalchemy":
        assert "Session: order 1 and its job committed, the other rolled back" in out
        # PostgreSQL's sequence skips the rolled-back order's id, SQLite reuses it.
        second = 2 if database_url.startswith("sqlite") else 3
        assert f"AsyncSession: order {second} and its job committed" in out
        assert f"drained 2 jobs: receipt for order 1 sent; receipt for order {second} sent" in out
    else:
        assert "atomic(): order 1 and its job committed, the other rolled back" in out
        assert "drained 1 job: receipt for order 1 sent" in out
