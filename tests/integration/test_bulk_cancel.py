"""Queue purge and filtered bulk cancel (#19), in the Python API and the CLI on both
dialects: a dry run that counts and changes nothing, the cancel itself, running jobs asked
to stop, the permission check and the audit record written with it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result
from starlette.testclient import TestClient

import rota
from rota.cli.main import cli
from rota.web.server import create_app
from rota.worker.fetcher import claim_now
from tests.web.conftest import TEST_HOST

Invoke = Callable[..., Result]


@pytest.fixture
def run(database_url: str) -> Iterator[Invoke]:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        env = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None, "ROTA_TOKEN": None}
        return runner.invoke(cli, list(args), env=env, catch_exceptions=False)

    yield invoke


@pytest.fixture
def jobs(app: rota.App) -> dict[str, list[rota.Job]]:
    @app.task(queue="mail", name="shop.mail")
    def mail(to: str) -> None: ...

    @app.task(queue="billing", name="shop.charge")
    def charge(order: int) -> None: ...

    return {
        "mail": mail.enqueue_many([{"to": f"u{i}@example.com"} for i in range(4)]),
        "later": [mail.enqueue(to="later@example.com", delay=3600)],
        "charge": charge.enqueue_many([{"order": i} for i in range(3)], tenant="acme"),
    }


def states(app: rota.App, found: list[rota.Job]) -> list[str]:
    return [str(app.get_job(j.id).state) for j in found]  # type: ignore[union-attr]


def test_purge_a_queue(app: rota.App, jobs: dict[str, list[rota.Job]]) -> None:
    running = claim_now(app, "mail", 1, "w1", 30)  # one mail job is running
    dry = app.queues.purge("mail", reason="bad template", dry_run=True)
    assert (dry.dry_run, dry.count, dry.matched) == (True, 4, 4)
    assert dry.per_task == {"shop.mail": 4} and dry.audit_id is None
    assert "cancelled" not in states(app, jobs["mail"] + jobs["later"])
    done = app.queues.purge("mail", reason="bad template")
    assert done.count == 4 and done.audit_id is not None
    assert set(done.job_ids) == {j.id for j in jobs["mail"] + jobs["later"]} - {running[0].id}
    assert states(app, jobs["mail"]).count("cancelled") == 3
    assert app.get_job(running[0].id).state is rota.JobState.RUNNING  # type: ignore[union-attr]
    assert states(app, jobs["charge"]) == ["available"] * 3  # other queues untouched
    (record,) = app.jobs.audit()
    assert (record.id, record.action, record.reason, record.count) == (
        done.audit_id,
        "purge",
        "bad template",
        4,
    )
    assert record.selection["queue"] == "mail" and record.principal == done.principal
    # Nothing left to purge: a second purge takes nothing and still leaves a record.
    assert app.queues.purge("mail", reason="again").count == 0
    assert [r.action for r in app.jobs.audit(action="purge")] == ["purge", "purge"]


def test_filtered_bulk_cancel(app: rota.App, jobs: dict[str, list[rota.Job]]) -> None:
    with pytest.raises(rota.ArgumentsError, match="all=True"):
        app.jobs.cancel(reason="everything")
    with pytest.raises(rota.ArgumentsError, match="reason"):
        app.jobs.cancel(queue="mail", reason=" ")
    with pytest.raises(rota.ArgumentsError, match="state"):
        app.jobs.cancel(queue="mail", states=["completed"], reason="x")
    by_tenant = app.jobs.cancel(tenant="acme", reason="account closed", limit=2)
    assert (by_tenant.count, by_tenant.matched) == (2, 3)
    assert states(app, jobs["charge"]) == ["cancelled", "cancelled", "available"]
    running = claim_now(app, "mail", 1, "w1", 30)[0]
    stop = app.jobs.cancel(ids=[running.id], states=["running"], reason="stuck")
    assert stop.job_ids == (running.id,)
    after = app.get_job(running.id)
    assert after is not None and after.state is rota.JobState.RUNNING and after.cancel_requested
    task_only = app.jobs.cancel(task="shop.mail", reason="campaign stopped", dry_run=True)
    assert task_only.count == 4  # three available and one scheduled; the running one is not
    viewer = rota.Principal("viewer", rota.Role.VIEWER, "token")
    assert app.jobs.cancel(task="shop.mail", reason="x", dry_run=True, principal=viewer).count
    with pytest.raises(rota.PermissionDeniedError):
        app.jobs.cancel(task="shop.mail", reason="x", principal=viewer)
    assert [r.action for r in app.jobs.audit()] == ["cancel", "cancel"]


def test_cli_purge_and_cancel_many(
    app: rota.App, jobs: dict[str, list[rota.Job]], run: Invoke
) -> None:
    dry = run("queues", "purge", "mail", "--reason", "bad template", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would cancel 5 of 5" in dry.output and "shop.mail\t5" in dry.output
    assert states(app, jobs["mail"]) == ["available"] * 4
    done = run("queues", "purge", "mail", "--reason", "bad template", "--json")
    report = json.loads(done.output)
    assert (report["action"], report["count"], report["dry_run"]) == ("purge", 5, False)
    many = run(
        "jobs", "cancel-many", "--task", "shop.charge", "--reason", "refunds", "--limit", "1"
    )
    assert many.exit_code == 0 and "cancelled 1 of 3" in many.output
    refused = run("jobs", "cancel-many", "--reason", "x")
    assert refused.exit_code != 0 and "all=True" in refused.output
    audit = json.loads(run("jobs", "audit", "--json").output)
    assert [(a["action"], a["count"]) for a in audit] == [("cancel", 1), ("purge", 5)]
    assert run("jobs", "audit").output.splitlines()[0].split("\t")[2:4] == ["cancel", "1"]


def test_http_purge_cancel_and_audit(app: rota.App, jobs: dict[str, list[rota.Job]]) -> None:
    tokens = {role: app.tokens.create(f"t-{role}", role) for role in ("viewer", "operator")}
    headers = {"X-Rota-Request": "1"}

    def as_(role: str) -> dict[str, str]:
        return {**headers, "Authorization": f"Bearer {tokens[role]}"}

    with TestClient(create_app(app, TEST_HOST)) as client:
        dry = client.post(
            "/api/queues/mail/purge", json={"reason": "bad", "dry_run": True}, headers=as_("viewer")
        )
        assert dry.status_code == 200, dry.text
        assert dry.json()["count"] == 5 and dry.json()["audit_id"] is None
        refused = client.post(
            "/api/queues/mail/purge", json={"reason": "bad"}, headers=as_("viewer")
        )
        assert refused.status_code == 403
        done = client.post(
            "/api/queues/mail/purge", json={"reason": "bad"}, headers=as_("operator")
        )
        assert done.status_code == 200 and done.json()["count"] == 5
        cancel = client.post(
            "/api/jobs/cancel",
            json={"task": "shop.charge", "reason": "refunds", "limit": 2},
            headers=as_("operator"),
        )
        assert cancel.json()["count"] == 2 and cancel.json()["matched"] == 3
        unbounded = client.post("/api/jobs/cancel", json={"reason": "x"}, headers=as_("operator"))
        assert unbounded.status_code == 422 and "all=True" in unbounded.text
        audit = client.get("/api/audit", headers=as_("viewer")).json()
        assert [(a["action"], a["count"]) for a in audit] == [("cancel", 2), ("purge", 5)]
        assert audit[1]["reason"] == "bad" and "t-operator" in audit[1]["principal"]
