"""`rota batches ls|show|suspend|resume|cancel` in-process on both dialects, in text and
--json, with only a database URL (everything the CLI shows is stored)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

import rota
from rota.cli.main import cli

Invoke = Callable[..., Result]


@pytest.fixture
def invoke(database_url: str) -> Invoke:
    runner = CliRunner()

    def run(*args: str) -> Result:
        env = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None, "COLUMNS": "200"}
        return runner.invoke(cli, list(args), env=env, catch_exceptions=False)

    return run


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ls_show_suspend_resume_cancel(app: rota.App, invoke: Invoke) -> None:
    @app.task
    def shard(ctx: rota.Context) -> None:
        pass

    first = app.batch(shard, completions=3, indexed=True, parallelism=2, name="shards")
    second = app.batch(shard, completions=2, suspend=True)

    listed = ok_json(invoke("batches", "ls", "--json"))
    assert [b["id"] for b in listed] == [second.id, first.id]
    assert listed[1]["state"] == "running" and listed[1]["active"] == 2
    assert listed[0]["state"] == "suspended"
    text = invoke("batches", "ls")
    assert text.exit_code == 0 and "shards" in text.output and "suspended" in text.output

    shown = ok_json(invoke("batches", "show", "shards", "--json"))
    assert shown["mode"] == "Indexed" and shown["completions"] == 3
    assert [j["index"] for j in shown["jobs"]] == [0, 1]
    assert shown["completed_indexes"] == "" and shown["condition"] is None
    text = invoke("batches", "show", str(first.id))
    assert text.exit_code == 0 and "completions=3" in text.output and "running" in text.output

    assert ok_json(invoke("batches", "resume", str(second.id), "--json"))["state"] == "running"
    assert invoke("batches", "suspend", "shards").output.strip() == (
        f"batch {first.id} suspended: suspended"
    )
    scaled = invoke("batches", "scale", "shards", "3")
    assert scaled.output.strip() == f"batch {first.id} scaled to parallelism 3: suspended"
    assert invoke("batches", "scale", "shards", "-1").exit_code == 2
    assert ok_json(invoke("batches", "cancel", "shards", "--json"))["state"] == "terminating"
    assert ok_json(invoke("batches", "ls", "--open", "--json"))[0]["id"] == second.id

    missing = invoke("batches", "show", "nope")
    assert missing.exit_code == 1 and "no batch with name 'nope'" in missing.output
    again = invoke("batches", "cancel", "shards")
    assert again.exit_code == 1 and "nothing to cancel" in again.output
