"""Progress (ctx.progress) and encrypted arguments, on both dialects with a real worker
in-process: what is stored, what listings show, fencing, rate limiting and key rotation."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from click.testing import CliRunner

import rota
import rota.testing
from rota.cli.main import cli
from rota.drivers.base import ProgressUpdate
from rota.security.encryption import ENV_KEYS, Keyring, generate_key, rotate_stored
from rota.web.models import JobOut
from tests.helpers import fast_settings, run_worker_until, wait_for


def finished(app: rota.App, *ids: int) -> bool:
    return all((j := app.get_job(i)) is not None and j.state.finished for i in ids)


# --- progress --------------------------------------------------------------------------


def test_progress_is_visible_while_running_and_flushed_with_completion(app: rota.App) -> None:
    release = threading.Event()
    calls = 0

    @app.task
    def render(ctx: rota.Context, n: int) -> int:
        nonlocal calls
        for i in range(1, n + 1):
            calls += 1
            ctx.progress(i / n / 2, f"rendered {i} of {n} tickets")
        release.wait(10)
        ctx.progress(1.0, "all rendered")  # the last value: must be written with completion
        return n

    job = render.enqueue(n=1000)
    worker = rota.Worker(app, fast_settings())

    def seen_half() -> bool:
        current = app.get_job(job.id)
        return current is not None and current.progress == 0.5

    async def scenario() -> None:
        task = asyncio.create_task(run_worker_until(worker, lambda: finished(app, job.id)))
        await asyncio.to_thread(wait_for, seen_half, 10)
        running = app.get_job(job.id)
        assert running is not None and running.state is rota.JobState.RUNNING
        assert running.progress_message == "rendered 1000 of 1000 tickets"
        assert running.to_json()["progress"] == 0.5
        release.set()
        await task

    asyncio.run(scenario())
    done = app.get_job(job.id)
    assert done is not None and done.state is rota.JobState.COMPLETED
    assert (done.progress, done.progress_message) == (1.0, "all rendered")
    assert done.progress_at is not None
    # 1001 reports, a handful of writes: the rate limit keeps the hot path clear.
    assert calls == 1000 and worker.progress.writes <= 6


def test_progress_from_an_async_task_and_bad_values(app: rota.App) -> None:
    errors: list[str] = []

    @app.task
    async def crunch(ctx: rota.Context) -> None:
        for bad in (1.5, -0.1, float("nan"), True, "half"):
            try:
                ctx.progress(bad)  # type: ignore[arg-type]
            except rota.RotaError as exc:
                errors.append(str(exc))
        ctx.progress(0.25, "x" * 2000)

    job = crunch.enqueue()
    asyncio.run(run_worker_until(rota.Worker(app, fast_settings()), lambda: finished(app, job.id)))
    done = app.get_job(job.id)
    assert done is not None and done.state is rota.JobState.COMPLETED
    assert done.progress == 0.25 and done.progress_message is not None
    assert len(done.progress_message) == 500  # long messages are cut, not refused
    assert len(errors) == 5 and all("fraction from 0 to 1" in e for e in errors)


def test_progress_writes_are_fenced_by_the_lease_token(app: rota.App) -> None:
    @app.task
    def noop() -> None:
        pass

    job = noop.enqueue()
    claimed = app.driver.job_claim(job.id, "w1", 30.0)
    assert claimed is not None and claimed.lease_token
    stale = ProgressUpdate(job.id, "00000000-0000-0000-0000-000000000000", 0.9, "stale")
    good = ProgressUpdate(job.id, claimed.lease_token, 0.3, "ok")
    assert app.driver.job_progress_record_many([stale]) == set()
    assert app.driver.job_progress_record_many([good]) == {job.id}
    current = app.get_job(job.id)
    assert current is not None and (current.progress, current.progress_message) == (0.3, "ok")


def test_jobs_show_prints_progress(app: rota.App, database_url: str) -> None:
    @app.task
    def noop() -> None:
        pass

    job = noop.enqueue()
    claimed = app.driver.job_claim(job.id, "w1", 30.0)
    assert claimed is not None and claimed.lease_token
    app.driver.job_progress_record_many(
        [ProgressUpdate(job.id, claimed.lease_token, 0.42, "420/1000")]
    )
    out = CliRunner().invoke(cli, ["jobs", "show", str(job.id), "--database-url", database_url])
    assert out.exit_code == 0, out.output
    assert "progress: 42% 420/1000" in out.output


# --- encryption -------------------------------------------------------------------------


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    values = [generate_key(), generate_key()]
    monkeypatch.setenv(ENV_KEYS, values[0])
    return values


def test_encrypted_arguments_are_sealed_at_rest_and_open_in_the_worker(
    app: rota.App, keys: list[str], database_url: str
) -> None:
    seen: list[dict[str, object]] = []

    @app.task(encrypted=True)
    def charge(ctx: rota.Context, card: str, amount: int) -> int:
        seen.append(dict(ctx.args))
        return amount

    job = charge.enqueue(card="4111-1111-1111-1111", amount=42)
    stored = app.get_job(job.id)
    assert stored is not None and stored.args_encrypted
    assert "4111" not in json.dumps(stored.args)  # ciphertext only in the row
    shown = stored.to_json()
    assert shown["args"] == "<encrypted>" and shown["args_encrypted"] is True
    out = CliRunner().invoke(cli, ["jobs", "show", str(job.id), "--database-url", database_url])
    assert out.exit_code == 0 and "4111" not in out.output and "<encrypted>" in out.output
    web = JobOut.of(stored)  # what the HTTP API and the dashboard send
    assert web.args == "<encrypted>" and web.args_encrypted and "4111" not in web.model_dump_json()
    out = CliRunner().invoke(
        cli, ["jobs", "show", str(job.id), "--json", "--database-url", database_url]
    )
    assert "4111" not in out.output and json.loads(out.output)["args"] == "<encrypted>"

    asyncio.run(run_worker_until(rota.Worker(app, fast_settings()), lambda: finished(app, job.id)))
    done = app.get_job(job.id)
    assert done is not None and done.state is rota.JobState.COMPLETED and done.result == 42
    assert seen == [{"card": "4111-1111-1111-1111", "amount": 42}]
    assert done.args_encrypted  # still sealed after the run


def test_enqueue_without_a_key_is_refused_before_anything_is_written(
    app: rota.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_KEYS, raising=False)

    @app.task(encrypted=True)
    def secret(token: str) -> None:
        pass

    with pytest.raises(rota.ConfigurationError, match=ENV_KEYS):
        secret.enqueue(token="s3cr3t")
    monkeypatch.setenv(ENV_KEYS, "not-a-key")
    with pytest.raises(rota.ConfigurationError, match="key 1 of") as info:
        secret.enqueue(token="s3cr3t")
    assert "not-a-key" not in str(info.value)
    assert app.list_jobs() == []


def test_a_worker_without_the_key_retries_and_never_stores_plaintext(
    app: rota.App, keys: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.task(encrypted=True, max_attempts=3, backoff=rota.Backoff(base=0.01, cap=0.02))
    def secret(token: str) -> str:
        return "ran"

    job = secret.enqueue(token="s3cr3t")
    monkeypatch.setenv(ENV_KEYS, keys[1])  # the worker has another key only
    worker = rota.Worker(app, fast_settings())
    asyncio.run(run_worker_until(worker, lambda: finished(app, job.id)))
    done = app.get_job(job.id)
    assert done is not None and done.state is rota.JobState.DISCARDED
    assert all("cannot decrypt" in (a.message or "") for a in done.history)
    assert "s3cr3t" not in json.dumps(done.to_json())


def test_key_rotation_old_key_reads_and_rotate_key_reseals(
    app: rota.App, keys: list[str], monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    old, new = keys

    @app.task(encrypted=True)
    def secret(token: str) -> str:
        return token[::-1]

    jobs = secret.enqueue_many([{"token": f"t{i}"} for i in range(5)])
    app.schedule(secret, "0 3 * * *", args={"token": "nightly-secret"}, name="nightly")
    app.sync_schedules()
    shown = CliRunner().invoke(
        cli, ["cron", "show", "nightly", "--json", "--database-url", database_url]
    )
    assert shown.exit_code == 0, shown.output
    assert (
        "nightly-secret" not in shown.output and json.loads(shown.output)["args"] == "<encrypted>"
    )
    # New key first, old key still accepted for reading.
    monkeypatch.setenv(ENV_KEYS, f"{new},{old}")
    ring = Keyring([new, old])
    report = rotate_stored(app.driver, ring, batch=2)
    assert report.resealed == 6 and report.unreadable == 0  # 5 jobs and the schedule
    assert rotate_stored(app.driver, ring).current == 6  # idempotent
    assert rotate_stored(app.driver, Keyring([generate_key()])).unreadable == 6
    # The old key can go now: everything opens with the new one alone.
    monkeypatch.setenv(ENV_KEYS, new)
    asyncio.run(
        run_worker_until(
            rota.Worker(app, fast_settings()), lambda: finished(app, *(j.id for j in jobs))
        )
    )
    results = sorted(str(j.result) for j in app.list_jobs())
    assert results == [f"{i}t" for i in range(5)]
    # The CLI does the same and says what it did.
    monkeypatch.setenv(ENV_KEYS, f"{old},{new}")
    out = CliRunner().invoke(cli, ["db", "rotate-key", "--json", "--database-url", database_url])
    assert out.exit_code == 0, out.output
    # The worker stored the declared schedule again when it started, sealed under the key
    # that was current when the app declared it (the old one): it is current already.
    assert json.loads(out.output) == {"resealed": 5, "current": 1, "unreadable": 0, "changed": 0}
    # Without a key that opens them, it says so and exits 1.
    monkeypatch.setenv(ENV_KEYS, generate_key())
    out = CliRunner().invoke(cli, ["db", "rotate-key", "--database-url", database_url])
    assert out.exit_code == 1 and "open with none of the configured keys" in out.output


def test_progress_outside_a_worker_is_written_directly(app: rota.App) -> None:
    @app.task
    def steps(ctx: rota.Context) -> None:
        for i in range(1, 101):
            ctx.progress(i / 100, f"{i}%")

    job = steps.enqueue()
    rota.testing.drain(app)
    done = app.get_job(job.id)
    assert done is not None and (done.progress, done.progress_message) == (1.0, "100%")
