"""A password in the database URL never shows: not in CLI output (text or --json), not in
metrics, not in log lines of a worker. The shared test server trusts local connections,
so a URL with a password still connects and every command really runs."""

from __future__ import annotations

import asyncio
import logging

import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from tests.helpers import fast_settings, run_worker_until

SECRET = "Zq9-never-print-me"


@pytest.fixture
def secret_url(pg_url: str) -> str:
    assert pg_url.startswith("postgresql://postgres@")
    return pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@", 1)


def test_no_command_prints_the_password(secret_url: str, sqlite_url: str) -> None:
    rota.App(sqlite_url).migrate()
    runner = CliRunner()
    for extra in (["--dry-run"], ["--dry-run", "--json"]):
        copied = runner.invoke(
            cli, ["db", "copy", "--from", sqlite_url, "--to", secret_url, *extra]
        )
        assert copied.exit_code == 0, copied.output
        assert SECRET not in copied.output and "rota_jobs" in copied.output
    commands = [
        ["migrate"],
        ["migrate", "--check", "--json"],
        ["jobs", "ls"],
        ["jobs", "ls", "--json"],
        ["queues", "ls", "--json"],
        ["cron", "ls"],
        ["dlq", "ls"],
        ["db", "roles", "--prefix", "rota_never_applied"],
        ["metrics", "--once"],
        ["jobs", "show", "12345"],  # an error path
    ]
    for args in commands:
        result = runner.invoke(cli, [*args, "--database-url", secret_url])
        assert SECRET not in result.output, (args, result.output)
        assert result.exception is None or SECRET not in str(result.exception), args
    app = rota.App(secret_url)
    try:
        assert SECRET not in repr(app) and SECRET not in str(app.url)
    finally:
        app.close()


def test_worker_logs_never_carry_the_password(
    secret_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = rota.App(secret_url)
    app.migrate()

    @app.task
    def fail_once(ctx: rota.Context) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("downstream said no")

    try:
        job = fail_once.enqueue()
        with caplog.at_level(logging.DEBUG):
            asyncio.run(
                run_worker_until(
                    rota.Worker(app, fast_settings(queues={"default": 1})),
                    lambda: (j := app.get_job(job.id)) is not None and j.state.finished,
                )
            )
    finally:
        app.close()
    assert caplog.records
    assert all(SECRET not in r.getMessage() for r in caplog.records)
