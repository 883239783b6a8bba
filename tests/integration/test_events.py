"""Events on both dialects: one job per stored subscriber, delivered by a worker with the
event in ctx.meta; a publish rolled back with the caller's transaction leaves nothing;
a late subscriber gets only new events unless replayed; the idempotency key delivers
once; bad input is refused before anything is written."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from tests.helpers import fast_settings, run_worker_until


def test_one_job_per_subscriber_each_delivered_with_the_event(app: rota.App) -> None:
    received: list[tuple[str, int, str, Any, int]] = []

    @app.on("user.signed_up")
    def send_welcome(event: rota.Event) -> None:
        received.append(("welcome", event.id, event.name, event.payload, event.version))

    @app.on("user.signed_up", queue="crm", max_attempts=3)
    def add_to_crm(ctx: rota.Context, event: rota.Event) -> None:
        assert ctx.meta["event"]["id"] == event.id
        received.append(("crm", event.id, event.name, event.payload, event.version))

    @app.on("order.placed")
    def unrelated(event: rota.Event) -> None:
        received.append(("unrelated", event.id, event.name, event.payload, event.version))

    event = app.publish("user.signed_up", {"user": 7}, version=2)
    assert event.created and event.id > 0 and event.version == 2
    jobs = app.list_jobs()
    assert sorted(j.task for j in jobs) == sorted([send_welcome.name, add_to_crm.name])
    crm_job = next(j for j in jobs if j.task == add_to_crm.name)
    assert (crm_job.queue, crm_job.max_attempts) == ("crm", 3)
    assert crm_job.meta["event"]["id"] == event.id and crm_job.args == {"payload": {"user": 7}}

    worker = rota.Worker(app, fast_settings(queues={"default": 2, "crm": 2}))
    asyncio.run(run_worker_until(worker, lambda: len(received) == 2))
    assert sorted(received) == [
        ("crm", event.id, "user.signed_up", {"user": 7}, 2),
        ("welcome", event.id, "user.signed_up", {"user": 7}, 2),
    ]
    stored = app.events.get(event.id)
    assert stored is not None and stored.payload == {"user": 7} and stored.version == 2


def test_a_failing_subscriber_retries_and_dead_letters_alone(app: rota.App) -> None:
    calls: list[str] = []

    @app.on("invoice.sent", max_attempts=2, backoff=rota.Backoff(base=0.01, cap=0.01))
    def broken(event: rota.Event) -> None:
        calls.append("broken")
        raise RuntimeError("smtp down")

    @app.on("invoice.sent")
    def fine(event: rota.Event) -> None:
        calls.append("fine")

    app.publish("invoice.sent", {"n": 1})
    worker = rota.Worker(app, fast_settings())
    asyncio.run(
        run_worker_until(
            worker, lambda: all(j.state.finished for j in app.list_jobs()) and len(calls) == 3
        )
    )
    states = {j.task: j.state for j in app.list_jobs()}
    assert states == {broken.name: rota.JobState.DISCARDED, fine.name: rota.JobState.COMPLETED}
    assert sorted(calls) == ["broken", "broken", "fine"]


def test_publish_in_a_rolled_back_transaction_leaves_no_event_and_no_jobs(app: rota.App) -> None:
    @app.on("user.signed_up")
    def welcome(event: rota.Event) -> None: ...

    app.events.sync()

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), app.transaction() as conn:
        app.publish("user.signed_up", {"user": 1}, conn=conn)
        raise Rollback
    assert app.list_jobs() == [] and app.events.list(name="user.signed_up") == []

    with app.transaction() as conn:
        committed = app.publish("user.signed_up", {"user": 2}, conn=conn)
    assert [j.meta["event"]["id"] for j in app.list_jobs()] == [committed.id]


def test_late_subscriber_gets_new_events_only_unless_replayed(app: rota.App) -> None:
    @app.on("user.signed_up")
    def early(event: rota.Event) -> None: ...

    old = app.publish("user.signed_up", {"user": 1})

    @app.on("user.signed_up")
    def late(event: rota.Event) -> None: ...

    new = app.publish("user.signed_up", {"user": 2})
    deliveries = sorted((j.task, j.meta["event"]["id"]) for j in app.list_jobs())
    assert deliveries == sorted([(early.name, old.id), (early.name, new.id), (late.name, new.id)])

    replayed = app.events.replay(old.id, subscriber=late)
    assert [(j.task, j.meta["event"]["id"], j.meta["event"]["replay"]) for j in replayed] == [
        (late.name, old.id, True)
    ]
    assert replayed[0].args == {"payload": {"user": 1}}
    everyone = app.events.replay(name="user.signed_up", until_id=old.id)
    assert sorted(j.task for j in everyone) == sorted([early.name, late.name])

    @app.on("other.thing")
    def elsewhere(event: rota.Event) -> None: ...

    with pytest.raises(rota.ArgumentsError, match=r"is not subscribed to 'user\.signed_up'"):
        app.events.replay(old.id, subscriber=elsewhere)
    with pytest.raises(rota.ArgumentsError, match="no event with id"):
        app.events.replay(10_000)
    with pytest.raises(rota.ArgumentsError, match="needs an event id or a filter"):
        app.events.replay()


def test_publish_with_a_key_delivers_once(app: rota.App) -> None:
    @app.on("payment.captured")
    def book(event: rota.Event) -> None: ...

    first = app.publish("payment.captured", {"amount": 10}, key="pay-123")
    second = app.publish("payment.captured", {"amount": 10}, key="pay-123")
    assert first.created and not second.created and second.id == first.id
    assert len(app.list_jobs()) == 1
    third = app.publish("payment.captured", {"amount": 10}, key="pay-124")
    assert third.id != first.id and len(app.list_jobs()) == 2


def test_subscriptions_stored_by_a_worker_reach_a_publisher_without_them(
    app: rota.App, database_url: str
) -> None:
    @app.on("user.signed_up")
    def welcome(event: rota.Event) -> None: ...

    app.events.sync()
    publisher = rota.App(database_url)  # knows no subscribers, like a separate web app
    try:
        event = publisher.publish("user.signed_up", {"user": 3})
        assert [j.task for j in publisher.list_jobs()] == [welcome.name]
        assert event.id == publisher.events.list()[0].id
    finally:
        publisher.close()
    assert app.events.unsubscribe("user.signed_up", welcome)
    app.publish("user.signed_up", {"user": 4})
    assert len(app.list_jobs()) == 1  # no subscriber stored: the event is kept, not delivered
    assert len(app.events.list(name="user.signed_up")) == 2


def test_bad_input_is_refused(app: rota.App) -> None:
    for name in ("", "has space", "x" * 201, 3):
        with pytest.raises(rota.ArgumentsError, match="bad event name"):
            app.publish(name, {})  # type: ignore[arg-type]
    with pytest.raises(rota.ArgumentsError, match="version"):
        app.publish("a.b", {}, version=0)
    with pytest.raises(rota.ArgumentsError, match="key"):
        app.publish("a.b", {}, key="")
    with pytest.raises(rota.ArgumentsError, match="JSON"):
        app.publish("a.b", {"x": object()})
    with pytest.raises(rota.TaskDefinitionError, match="bad event name"):
        app.on("no good")
    with pytest.raises(rota.TaskDefinitionError, match=r"\(event\) or \(ctx, event\)"):
        app.on("a.b")(lambda: None)
    for bad in ({"limit": "10"}, {"limit": 0}, {"after_id": "x"}, {"until_id": 1.5}):
        with pytest.raises(rota.ArgumentsError, match=r"limit|after_id|until_id"):
            app.events.list(**bad)  # type: ignore[arg-type]
    assert app.events.list() == [] and app.list_jobs() == []


def test_cli_ls_subscriptions_replay(app: rota.App, database_url: str) -> None:
    @app.on("user.signed_up")
    def welcome(event: rota.Event) -> None: ...

    event = app.publish("user.signed_up", {"user": 1}, key="u1")
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        env = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None, "COLUMNS": "200"}
        return runner.invoke(cli, ["events", *args], env=env, catch_exceptions=False)

    import json

    listed = json.loads(invoke("ls", "--json").stdout)
    assert [(e["id"], e["name"], e["key"]) for e in listed] == [(event.id, "user.signed_up", "u1")]
    subs = json.loads(invoke("subscriptions", "--json").stdout)
    assert [(s["event"], s["task"]) for s in subs] == [("user.signed_up", welcome.name)]
    replayed = json.loads(invoke("replay", str(event.id), "--json").stdout)
    assert [r["task"] for r in replayed] == [welcome.name]
    assert "user.signed_up" in invoke("ls").stdout
    bad = invoke("replay")
    assert bad.exit_code == 1 and "needs an event id" in bad.stderr


def test_async_subscribers_and_inline_mode(app: rota.App) -> None:
    from rota.testing import drain, inline

    got: list[tuple[str, Any]] = []

    @app.on("order.placed")
    async def confirm(event: rota.Event) -> None:
        await asyncio.sleep(0)
        got.append(("async", event.payload))

    @app.on("order.placed")
    def count(ctx: rota.Context, event: rota.Event) -> None:
        got.append(("sync", event.payload))

    app.publish("order.placed", {"n": 1})
    assert drain(app).ran >= 2
    assert sorted(got) == [("async", {"n": 1}), ("sync", {"n": 1})]

    got.clear()
    with inline(app):
        app.publish("order.placed", {"n": 2})  # delivered before publish returns
        assert sorted(got) == [("async", {"n": 2}), ("sync", {"n": 2})]
        with pytest.raises(rota.RotaError, match="cannot run a job enqueued with conn="):
            with app.transaction() as conn:
                app.publish("order.placed", {"n": 3}, conn=conn)


def test_a_worker_app_loaded_with_a_database_url_keeps_its_subscribers(
    app: rota.App, database_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rota.cli.common import load_app

    (tmp_path / "subscribers_app.py").write_text(
        "import rota\n"
        "app = rota.App('sqlite:///elsewhere.db')\n"
        "saga = rota.Saga('loaded')\n"
        "saga.step(lambda data: None, name='only')\n"
        "app.sagas.register(saga)\n"
        "@app.on('user.signed_up')\n"
        "def welcome(event: rota.Event) -> None: ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    loaded = load_app("subscribers_app:app", database_url)
    try:
        assert loaded.url.raw == database_url
        assert [t.name for t in loaded.events.subscribers["user.signed_up"]] == [
            "subscribers_app.welcome"
        ]
        assert list(loaded.sagas.definitions) == ["loaded"]
        loaded.events.sync()  # what its worker does at start, against this database
        assert [s.task for s in app.events.subscriptions()] == ["subscribers_app.welcome"]
        assert loaded.sagas.start("loaded", key="k").status is rota.SagaStatus.RUNNING
    finally:
        loaded.close()
