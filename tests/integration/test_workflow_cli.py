"""`rota workflows ls|show|cancel|retry-step` in-process (click's CliRunner) on both
dialects, in text and --json, with only --database-url (no app code needed)."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner, Result

import rota
from rota.cli.main import cli
from rota.testing import drain


def invoke(database_url: str, *args: str) -> Result:
    env = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None, "COLUMNS": "200"}
    return CliRunner().invoke(cli, ["workflows", *args], env=env, catch_exceptions=False)


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_workflows_cli(app: rota.App, database_url: str) -> None:
    broken = {"yes": True}

    @app.task
    def load() -> list[int]:
        return [1, 2]

    @app.task
    def check(n: int) -> int:
        if broken["yes"]:
            raise ValueError(f"cannot check {n}")
        return n

    wf = rota.Workflow("audit")
    wf.step(check, after=wf.step(load), each="n", max_attempts=1)
    failed = app.workflows.start(wf, key="2026")  # a key that looks like an id
    for _ in range(3):
        drain(app)
        app.workflows.advance()
    assert app.workflows.get(failed.id).state is rota.workflows.WorkflowState.FAILED
    waiting = app.workflows.start(wf, key="audit-b")

    listed = ok_json(invoke(database_url, "ls", "--json"))
    assert [(r["id"], r["state"]) for r in listed] == [
        (waiting.id, "running"),
        (failed.id, "failed"),
    ]
    assert "jobs" not in listed[1]["steps"][1]
    assert [
        r["key"] for r in ok_json(invoke(database_url, "ls", "--state", "failed", "--json"))
    ] == ["2026"]
    text = invoke(database_url, "ls")
    assert text.exit_code == 0 and "audit-b" in text.output and "1/2" in text.output

    shown = ok_json(invoke(database_url, "show", "2026", "--key", "--json"))
    assert shown["id"] == failed.id and shown["state"] == "failed"
    check_step = shown["steps"][1]
    assert check_step["name"] == "check" and check_step["state"] == "failed"
    assert [j["state"] for j in check_step["jobs"]] == ["discarded", "discarded"]
    assert "ValueError: cannot check 1" in check_step["jobs"][0]["error"]
    assert shown["steps"][0]["result"] == [1, 2]
    text = invoke(database_url, "show", str(failed.id))
    assert text.exit_code == 0
    assert "step 'check' failed" in text.output and "ValueError: cannot check 2" in text.output

    broken["yes"] = False
    retried = ok_json(invoke(database_url, "retry-step", str(failed.id), "check", "--json"))
    assert retried["state"] == "running" and retried["steps"][1]["state"] == "running"
    drain(app)
    app.workflows.advance()
    assert app.workflows.get(failed.id).results["check"] == [1, 2]

    result = invoke(database_url, "cancel", "audit-b")
    assert result.exit_code == 0 and f"workflow {waiting.id} cancelled" in result.output
    again = invoke(database_url, "cancel", "audit-b")
    assert again.exit_code == 1 and "only a running workflow can be cancelled" in again.output
    missing = invoke(database_url, "show", "4242")
    assert missing.exit_code == 1 and "no workflow with id 4242" in missing.output
    bad_step = invoke(database_url, "retry-step", str(failed.id), "nope")
    assert bad_step.exit_code == 1 and "has no step 'nope'" in bad_step.output
