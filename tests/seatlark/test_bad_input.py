"""Bad input through rota's own enqueue API, from Python and the CLI: unknown tasks,
malformed or oversized arguments, injection-like strings in arguments and search fields.
Each is refused with a RotaError (or a usage error) and leaves the database as it was; a
free-text argument that merely looks like SQL is stored verbatim and harms nothing."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli

INJECTIONS = [
    "1; DROP TABLE rota_jobs; --",
    "' OR '1'='1",
    "x'); DELETE FROM rota_jobs WHERE ('a'='a",
    "1 UNION SELECT * FROM rota_jobs",
]


def register(app: rota.App) -> tuple[rota.Task[..., object], rota.Task[..., object]]:
    @app.task(name="tickets.make", queue="tickets")
    def make(order_id: int) -> None: ...

    @app.task(name="mail.note")
    def note(text: str) -> None: ...

    return make, note


def total(app: rota.App) -> int:
    return sum(sum(q.counts.values()) for q in app.list_queues())


def test_unknown_tasks_are_refused(app: rota.App) -> None:
    register(app)
    for name in ["tickets.mak", "", "tickets.make'; DROP TABLE rota_jobs; --", "x" * 10_000]:
        with pytest.raises(rota.UnknownTaskError, match="unknown task"):
            app.enqueue(name, {"order_id": 1})
    with pytest.raises(rota.UnknownTaskError, match=r"Did you mean 'tickets\.make'"):
        app.enqueue("other.make", {"order_id": 1})
    assert total(app) == 0


@pytest.mark.parametrize("value", INJECTIONS)
def test_injection_in_a_typed_argument_is_refused(app: rota.App, value: str) -> None:
    make, _ = register(app)
    with pytest.raises(rota.ArgumentsError, match="order_id"):
        make.enqueue(order_id=value)
    with pytest.raises(rota.ArgumentsError):
        app.enqueue("tickets.make", {"order_id": value})
    assert total(app) == 0


def test_injection_in_a_text_argument_is_stored_verbatim(app: rota.App) -> None:
    _, note = register(app)
    jobs = [note.enqueue(text=value) for value in INJECTIONS]
    assert [app.get_job(j.id).args["text"] for j in jobs] == INJECTIONS  # type: ignore[union-attr]
    assert total(app) == len(INJECTIONS)  # the table is still there, with exactly these jobs


def test_malformed_arguments_are_refused(app: rota.App) -> None:
    make, note = register(app)
    with pytest.raises(rota.ArgumentsError, match="unexpected argument 'order'"):
        make.enqueue(order=1)
    with pytest.raises(rota.ArgumentsError, match="missing argument 'order_id'"):
        make.enqueue()
    with pytest.raises(rota.ArgumentsError, match="must be a JSON object"):
        app.enqueue("tickets.make", [1])  # type: ignore[arg-type]
    with pytest.raises(rota.ArgumentsError, match="text"):
        note.enqueue(text={"$ne": None})
    with pytest.raises(rota.ArgumentsError, match="key must be"):
        make.enqueue(order_id=1, key="k" * 513)
    with pytest.raises(rota.ArgumentsError, match="bad queue name"):
        make.enqueue(order_id=1, queue="tickets'; DROP TABLE rota_jobs; --")
    with pytest.raises(rota.ArgumentsError, match="enqueue_many item 1"):
        make.enqueue_many([{"order_id": 1}, {"order_id": "two"}])
    assert total(app) == 0


def test_oversized_and_non_json_payloads_are_refused(database_url: str) -> None:
    app = rota.App(database_url, max_payload_bytes=1024)
    app.migrate()
    try:
        _, note = register(app)
        with pytest.raises(rota.PayloadError, match="over the 1024-byte limit"):
            note.enqueue(text="x" * 2000)
        with pytest.raises(rota.PayloadError, match="over the 1024-byte limit"):
            note.enqueue(text="é" * 600)  # 1200 bytes in UTF-8, 600 characters
        with pytest.raises(rota.RotaError):
            app.enqueue("mail.note", {"text": math.nan})
        # PostgreSQL cannot store U+0000 in JSON: refused on both dialects, before writing.
        with pytest.raises(rota.PayloadError, match="NUL character"):
            note.enqueue(text="abc\x00def")
        assert note.enqueue(text="a\\u0000b").args == {"text": "a\\u0000b"}  # just text
        assert total(app) == 1
    finally:
        app.close()


def test_search_fields_treat_injection_as_data(app: rota.App) -> None:
    _, note = register(app)
    note.enqueue(text="hello")
    for value in INJECTIONS:
        assert app.list_jobs(task=value) == []
        assert app.list_jobs(queue=value) == []
        with pytest.raises(rota.ArgumentsError, match="unknown job state"):
            app.list_jobs(state=value)
        with pytest.raises(rota.ArgumentsError, match="bad queue name"):
            app.pause_queue(value)
    with pytest.raises(rota.ArgumentsError, match="limit"):
        app.list_jobs(limit=10**9)
    assert [j.args for j in app.list_jobs()] == [{"text": "hello"}]


@pytest.fixture
def cli_app(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable app module for the CLI, on a SQLite file."""
    import sys
    from pathlib import Path

    folder = Path(str(tmp_path))
    (folder / "badinput_app.py").write_text(
        "import rota\n"
        f"app = rota.App('sqlite:///{folder / 'cli.db'}')\n"
        "@app.task(name='tickets.make', queue='tickets')\n"
        "def make(order_id: int) -> None: ...\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delenv("ROTA_DATABASE_URL", raising=False)
    sys.modules.pop("badinput_app", None)
    runner = CliRunner()
    assert runner.invoke(cli, ["migrate", "--app", "badinput_app:app"]).exit_code == 0
    return "badinput_app:app"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tickets.make", "--args", "{bad json"], "not JSON"),
        (["tickets.make", "--args", "[1, 2]"], "must be a JSON object"),
        (["tickets.make", "--arg", "order_id=1; DROP TABLE rota_jobs"], "order_id"),
        (["tickets.make", "--arg", "no-equals-sign"], "name=value"),
        (["tickets.nope", "--arg", "order_id=1"], "unknown task"),
        (["tickets.make", "--arg", "order_id=1", "--queue", "a'; --"], "bad queue name"),
        (["tickets.make", "--arg", "order_id=1", "--at", "tomorrow"], "ISO 8601"),
    ],
)
def test_the_cli_refuses_bad_input(cli_app: str, args: list[str], message: str) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["enqueue", "--app", cli_app, *args])
    assert result.exit_code != 0
    assert message in result.output
    listed = runner.invoke(cli, ["jobs", "ls", "--app", cli_app, "--json"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.strip() in ("[]", "")
