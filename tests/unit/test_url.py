"""Database URLs: clear errors for what rota cannot use."""

from __future__ import annotations

from pathlib import Path

import pytest

from rota.drivers.url import parse
from rota.errors import ConfigurationError


def test_sqlite_paths() -> None:
    assert parse("sqlite:///rota.db").path == "rota.db"
    assert parse("sqlite:////tmp/x/rota.db").path == "/tmp/x/rota.db"
    assert parse("sqlite:///r.db?synchronous=NORMAL").options == {"synchronous": "NORMAL"}


def test_postgres_urls() -> None:
    assert parse("postgresql://u@h/db").dialect == "postgres"
    assert parse("postgres://u:secret@h:5432/db").redacted() == "postgres://u:***@h:5432/db"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "no database URL"),
        ("mysql://h/db", "unsupported database URL"),
        ("sqlite://", "needs a file"),
        ("sqlite:///:memory:", "needs a file"),
        ("sqlite://host/x.db", "bad SQLite URL"),
        ("sqlite:///x.db?journal=1", "unknown SQLite URL option"),
        ("rota.db", "unsupported database URL"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse(url)


def test_password_never_shows_in_errors() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse("mysql://user:hunter2@h/db")
    assert "hunter2" not in str(info.value)


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="is a directory"):
        parse(f"sqlite:///{tmp_path}")
