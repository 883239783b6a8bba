"""Poison-proof workers (#17), on both dialects with a real worker: bad input is refused
the same way on SQLite and PostgreSQL, and no value a task raises or returns can stall
the worker, jam its completions or lose an outcome."""

from __future__ import annotations

from typing import Any

import pytest

import rota


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _finished(app: rota.App, *ids: int) -> bool:
    return all((j := app.get_job(i)) is not None and j.state.finished for i in ids)


# --- case 3 and 4: the same clear error on both dialects, before anything is written ---


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"x": "a\ud800b"}, r"arguments of .* contains a lone surrogate \(\\ud800\)"),
        ({"x": nested(10_000)}, "arguments of .* is nested too deeply"),
        ({"x": "a\x00b"}, "arguments of .* contains a NUL character"),
        ({"key": "order\x00-1"}, "key contains a NUL character"),
        ({"key": "order-\udc80"}, r"key contains a lone surrogate \(\\udc80\)"),
        ({"partition_key": "p\x00"}, "partition_key contains a NUL character"),
        ({"partition_key": "p\ud800"}, "partition_key contains a lone surrogate"),
    ],
)
def test_unstorable_arguments_and_keys_are_a_payload_error_on_both_dialects(
    app: rota.App, options: dict[str, Any], message: str
) -> None:
    @app.task(name="poison.take")
    def take(x: Any = None) -> None: ...

    with pytest.raises(rota.PayloadError, match=message):
        take.enqueue(**options)
    if "key" not in options:  # enqueue_many has no per-job key; all or nothing is written
        with pytest.raises(rota.PayloadError, match=message):
            take.enqueue_many([{"x": 1}, {"x": options.get("x")}], **_partition(options))
    assert app.list_jobs() == []


def _partition(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k == "partition_key"}


def test_other_keys_and_names_refuse_unstorable_text(app: rota.App) -> None:
    with pytest.raises(rota.TaskDefinitionError, match="task name contains a NUL"):
        app.task(name="bad\x00name")(lambda: None)
    assert "bad\x00name" not in app.tasks
    with pytest.raises(rota.PayloadError, match="key contains a NUL"):
        app.publish("order.placed", {"id": 1}, key="k\x00")
    with pytest.raises(rota.ArgumentsError, match=r"payload .* contains a lone surrogate"):
        app.publish("order.placed", {"id": "\ud800"})


# --- case 10: the pool checks a connection before handing it out -----------------------


def test_after_the_server_drops_a_connection_the_next_enqueue_succeeds(pg_url: str) -> None:
    """A PostgreSQL restart ends every session (FATAL 57P01, then the socket closes); here
    the app's pooled session is ended the same way, with pg_terminate_backend. The next
    enqueue gets a fresh connection instead of failing on the dead one (#17, case 10).
    (SQLite has no server and no pool of sessions to go stale.)"""
    import psycopg

    from tests.conftest import PG_URL
    from tests.helpers import wait_for

    app = rota.App(pg_url)
    app.migrate()
    try:

        @app.task(name="poison.note")
        def note(n: int) -> None: ...

        note.enqueue(n=0)
        with app.transaction() as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)

            def gone() -> bool:
                found = admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))
                return found.fetchone() is None

            wait_for(gone, timeout=10)
        jobs = [note.enqueue(n=n) for n in range(1, 4)]  # none of them fails
        assert [j.args["n"] for j in jobs] == [1, 2, 3]
        assert len(app.list_jobs()) == 4
    finally:
        app.close()
