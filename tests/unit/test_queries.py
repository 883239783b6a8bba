"""Both dialects define the same named queries, and migrations are numbered 1..n."""

from __future__ import annotations

from rota.drivers import queries


def test_dialects_define_the_same_queries() -> None:
    sqlite, postgres = queries.load("sqlite"), queries.load("postgres")
    assert sorted(sqlite) == sorted(postgres)


def test_migrations_match_across_dialects() -> None:
    sqlite = [(v, n) for v, n, _ in queries.migrations("sqlite")]
    postgres = [(v, n) for v, n, _ in queries.migrations("postgres")]
    assert sqlite == postgres and sqlite[:2] == [(1, "core"), (2, "exactly_once")]


def test_no_sql_outside_drivers() -> None:
    from pathlib import Path

    import rota

    root = Path(rota.__file__).parent
    for path in root.rglob("*.py"):
        if "drivers" in path.parts:
            continue
        text = path.read_text()
        for keyword in ("SELECT ", "UPDATE rota_", "INSERT INTO", "DELETE FROM"):
            assert keyword not in text, f"{path} contains SQL ({keyword!r})"
