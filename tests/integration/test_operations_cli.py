"""`rota dlq ...` and `rota queues set|partitions` in-process on both dialects: what they
print (text and --json), what they change, and bad input refused with a clear message."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import rota
from rota.cli.main import cli
from rota.cli.queues import parse_rate
from rota.drivers.base import Completion
from rota.worker.fetcher import claim_now

Invoke = Callable[..., Result]


@pytest.fixture
def run(database_url: str) -> Iterator[Invoke]:
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
        full_env: dict[str, str | None] = {
            "ROTA_DATABASE_URL": database_url,
            "ROTA_APP": None,
            "ROTA_API_TOKEN": None,
        }
        full_env.update(env or {})
        return runner.invoke(cli, list(args), env=full_env, catch_exceptions=False)

    yield invoke


@pytest.fixture
def dead(app: rota.App) -> list[rota.Job]:
    """Three dead letters: two of ops.charge (one with a partition key), one of ops.mail."""

    @app.task(queue="billing", name="ops.charge")
    def charge(order: int) -> None: ...

    @app.task(queue="mail", name="ops.mail")
    def mail(to: str) -> None: ...

    charge.enqueue(order=1)
    charge.enqueue(order=2, partition_key="cust-7")
    charge.enqueue(order=3, partition_key="cust-7")
    mail.enqueue(to="a@example.com")
    jobs = claim_now(app, "billing", 10, "w", 30)
    jobs += claim_now(app, "mail", 10, "w", 30)
    entries = {
        "ops.charge": {"error_type": "myapp.CardDeclined", "message": "card [declined]"},
        "ops.mail": {"error_type": "TimeoutError", "message": "smtp timed out"},
    }
    app.driver.job_complete_many(
        [
            Completion(
                j.id,
                j.lease_token or "",
                rota.JobState.DISCARDED,
                json.dumps({"outcome": "discarded", **entries[j.task]}),
            )
            for j in jobs
        ]
    )
    return sorted(jobs, key=lambda j: j.id)


def test_dlq_ls_and_show(run: Invoke, dead: list[rota.Job]) -> None:
    result = run("dlq", "ls")
    assert result.exit_code == 0, result.output
    assert "ops.cha" in result.output and "[declined]" in result.output  # markup escaped
    listed = json.loads(run("dlq", "ls", "--task", "ops.charge", "--json").output)
    assert [j["id"] for j in listed] == [dead[1].id, dead[0].id]
    assert listed[0]["history"][-1]["error_type"] == "myapp.CardDeclined"
    assert (
        json.loads(run("dlq", "ls", "--text", "SMTP", "--since", "1h", "--json").output)[0]["task"]
        == "ops.mail"
    )
    assert json.loads(run("dlq", "ls", "--until", "1h", "--json").output) == []
    shown = run("dlq", "show", str(dead[0].id))
    assert shown.exit_code == 0 and "CardDeclined" in shown.output
    assert json.loads(run("dlq", "show", str(dead[0].id), "--json").output)["id"] == dead[0].id
    bad = run("dlq", "ls", "--since", "yesterday")
    assert bad.exit_code == 2 and "ISO 8601" in bad.output
    missing = run("dlq", "show", "999999")
    assert missing.exit_code == 1 and "no job with id 999999" in missing.output


def test_dlq_replay_dry_run_then_replay_then_audit(
    run: Invoke, app: rota.App, dead: list[rota.Job]
) -> None:
    refused = run("dlq", "replay", "--reason", "x")
    assert refused.exit_code == 1 and "refusing to replay every dead letter" in refused.output
    no_reason = run("dlq", "replay", "--task", "ops.charge")
    assert no_reason.exit_code == 2 and "--reason is required" in no_reason.output
    dry = run("dlq", "replay", "--task", "ops.charge", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would replay 2 of 2" in dry.output and "ops.charge" in dry.output
    assert len(app.dlq.list()) == 3
    real = json.loads(
        run(
            "dlq", "replay", "--task", "ops.charge", "--reason", "INC-7", "--rate", "5", "--json"
        ).output
    )
    assert real["count"] == 2 and real["per_task"] == {"ops.charge": 2} and not real["dry_run"]
    again = run("dlq", "replay", "--task", "ops.charge", "--reason", "INC-7")
    assert "replayed 0 of 0" in again.output
    audit = json.loads(run("dlq", "replays", "--json").output)
    assert [a["count"] for a in audit] == [0, 2]
    assert audit[1]["reason"] == "INC-7" and audit[1]["principal"].startswith("direct:")
    assert audit[1]["selection"] == {"task": "ops.charge"} and audit[1]["rate"] == 5.0
    assert "INC-7" in run("dlq", "replays").output
    everything = run("dlq", "replay", "--all", "--reason", "all of it", "--json")
    assert json.loads(everything.output)["count"] == 1


def test_dlq_replay_with_a_token_lacking_the_permission(
    run: Invoke, app: rota.App, dead: list[rota.Job]
) -> None:
    token = app.tokens.create("viewer-bot", "operator")
    denied = run("dlq", "replay", "--id", str(dead[0].id), "--reason", "r", "--token", token)
    assert denied.exit_code == 1 and "lacks the 'replay' permission" in denied.output
    assert app.dlq.replays() == []


def test_dlq_dismiss_unblocks_a_poisoned_partition(
    run: Invoke, app: rota.App, dead: list[rota.Job]
) -> None:
    @app.task(queue="billing", name="ops.charge2")
    def later(order: int) -> None: ...

    later.enqueue(order=9, partition_key="cust-7")
    parts = json.loads(run("queues", "partitions", "--json").output)
    # order 2 died; order 3 and order 9 wait behind it
    assert [(p["partition_key"], p["dead"], p["waiting"]) for p in parts] == [("cust-7", 1, 2)]
    assert "cust-7" in run("queues", "partitions").output
    (head,) = [j for j in dead if j.partition_key == "cust-7"]
    assert parts[0]["dead_job_id"] == head.id
    result = run("dlq", "dismiss", str(head.id), "999999", "--reason", "refunded by hand")
    assert result.exit_code == 0 and f"dismissed 1 dead letter(s): {head.id}" in result.output
    assert json.loads(run("queues", "partitions", "--json").output) == []
    (claimed,) = claim_now(app, "billing", 10, "w", 30)
    assert claimed.args == {"order": 3}  # the key flows again, in order


def test_queues_set_shows_and_clears_limits(run: Invoke, app: rota.App) -> None:
    result = run("queues", "set", "mail", "--global-limit", "3", "--rate", "100/60s")
    assert result.exit_code == 0 and "global 3, 100/60s" in result.output
    control = app.queues.get("mail")
    assert (control.global_limit, control.rate_limit, control.rate_period) == (3, 100, 60.0)
    listed = json.loads(run("queues", "ls", "--json").output)
    assert listed[0]["limits"]["global_limit"] == 3
    assert "glo" in run("queues", "ls").output  # a narrow terminal truncates the column
    cleared = json.loads(run("queues", "set", "mail", "--rate", "none", "--json").output)
    assert cleared["rate"] is None and cleared["global_limit"] == 3
    assert run("queues", "set", "mail").exit_code == 2
    bad = run("queues", "set", "mail", "--rate", "fast")
    assert bad.exit_code == 2 and "JOBS/PERIOD" in bad.output
    zero = run("queues", "set", "mail", "--global-limit", "0")
    assert zero.exit_code == 1 and "global_limit" in zero.output


def test_parse_rate() -> None:
    assert parse_rate("100/60s") == (100, 60.0)
    assert parse_rate("100/1m") == (100, 60.0)
    assert parse_rate("5/s") == (5, 1.0)
    assert parse_rate("10 / 2.5s") == (10, 2.5)
    assert parse_rate("none") is None


def test_enqueue_with_a_partition_key_and_a_start_deadline(
    run: Invoke, app: rota.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "e2e" / "apps"))
    args = ["enqueue", "--app", "e2e_app:app", "greet", "--arg", "name=Ada"]
    result = run(*args, "--partition-key", "cust-1", "--expires-in", "60", "--json")
    assert result.exit_code == 0, result.output
    job = json.loads(result.output)
    assert job["partition_key"] == "cust-1"
    expires = datetime.fromisoformat(job["expires_at"])
    assert timedelta(seconds=55) < expires - app.driver.db_now() <= timedelta(seconds=60)
    bad = run(*args, "--expires-in", "0")
    assert bad.exit_code == 2
