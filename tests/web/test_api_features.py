"""The API of the optional sections on both dialects: batches, workflows and sagas, the
Prometheus endpoint, and the CLI commands `rota tokens` and `rota dashboard`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from tests.helpers import wait_for
from tests.web import browser
from tests.web.conftest import Site
from tests.web.features_demo import seed_features

PROBLEM = "application/problem+json"


@pytest.fixture
def features(site: Site) -> Site:
    seed_features(site.app)
    return site


def test_batches(features: Site) -> None:
    h = features.as_("viewer")
    listed = {b["name"]: b for b in features.client.get("/api/batches", headers=h).json()}
    assert listed["thumbnails"]["state"] == "complete" and listed["thumbnails"]["succeeded"] == 12
    assert listed["avatars"]["state"] == "running"
    running = features.client.get("/api/batches?state=running", headers=h).json()
    assert [b["name"] for b in running] == ["avatars"]
    one = features.client.get("/api/batches/thumbnails", headers=h).json()
    assert one["completed_indexes"] == "0-11" and len(one["jobs"]) == 12
    by_id = features.client.get(f"/api/batches/{one['id']}", headers=h).json()
    assert by_id["name"] == "thumbnails"
    assert features.client.get("/api/batches/nope", headers=h).status_code == 404
    op = features.as_("operator")
    assert features.client.post("/api/batches/avatars/suspend", headers=h).status_code == 403
    suspended = features.client.post("/api/batches/avatars/suspend", headers=op).json()
    assert suspended["state"] == "suspended"
    assert (
        features.client.post("/api/batches/avatars/resume", headers=op).json()["suspended"] is False
    )
    done = features.client.post("/api/batches/thumbnails/suspend", headers=op)
    assert done.status_code == 409 and done.headers["content-type"] == PROBLEM
    cancelled = features.client.post("/api/batches/avatars/cancel", headers=op)
    assert cancelled.status_code == 200, cancelled.text


def test_workflows(features: Site) -> None:
    h = features.as_("viewer")
    runs = features.client.get("/api/workflows", headers=h).json()
    assert {r["key"]: r["state"] for r in runs} == {
        "etl-2026-11-28": "failed",
        "etl-2026-11-29": "completed",
        "etl-2026-11-30": "running",
    }
    assert [
        r["key"] for r in features.client.get("/api/workflows?state=failed", headers=h).json()
    ] == ["etl-2026-11-28"]
    failed = features.client.get("/api/workflows/etl-2026-11-28", headers=h).json()
    steps = {s["name"]: s for s in failed["steps"]}
    assert steps["load"]["state"] == "failed" and steps["report"]["after"] == ["load", "extract"]
    assert failed["error"] == "<hidden>"  # a job's error is payload: viewers do not see it
    full = features.client.get("/api/workflows/etl-2026-11-28", headers=features.as_("operator"))
    assert "warehouse did not answer" in full.json()["error"]
    assert (
        features.client.get(f"/api/workflows/{failed['id']}", headers=h).json()["key"]
        == failed["key"]
    )
    assert features.client.get("/api/workflows/etl-1999", headers=h).status_code == 404
    bad = features.client.get("/api/workflows?state=exploded", headers=h)
    assert bad.status_code == 422
    op = features.as_("operator")
    retried = features.client.post("/api/workflows/etl-2026-11-28/steps/load/retry", headers=op)
    assert retried.status_code == 200, retried.text
    assert retried.json()["state"] == "running"
    unknown = features.client.post("/api/workflows/etl-2026-11-28/steps/nope/retry", headers=op)
    assert unknown.status_code == 409
    cancelled = features.client.post("/api/workflows/etl-2026-11-30/cancel", headers=op).json()
    assert cancelled["state"] == "cancelled"


def test_sagas(features: Site) -> None:
    h = features.as_("viewer")
    listed = {s["key"]: s["status"] for s in features.client.get("/api/sagas", headers=h).json()}
    assert listed["order-42"] == "compensated" and listed["order-41"] == "completed"
    assert listed["order-44"] == "running"
    saga = features.client.get("/api/sagas/order-42", headers=h).json()
    assert saga["steps"] == ["reserve_stock", "take_payment", "book_shipping"]
    assert [e["event"] for e in saga["history"]][-1] == "compensation_completed"
    assert saga["error"] == "<hidden>" and saga["data"] == "<hidden>"
    full = features.client.get("/api/sagas/order-42", headers=features.as_("operator")).json()
    assert "card declined" in full["error"] and full["data"]["order"] == 42
    assert features.client.get("/api/sagas/order-0", headers=h).status_code == 404
    only = features.client.get("/api/sagas?state=compensated", headers=h).json()
    assert [s["key"] for s in only] == ["order-42"]
    op = features.as_("operator")
    nothing = features.client.post("/api/sagas/order-41/retry", headers=op)
    assert nothing.status_code == 409
    aborted = features.client.post(
        "/api/sagas/order-44/abort", json={"reason": "customer cancelled"}, headers=op
    )
    assert aborted.status_code == 200 and aborted.json()["status"] in (
        "compensating",
        "compensated",
    )


def test_me_lists_the_features_of_the_app(site: Site) -> None:
    me = site.client.get("/api/me", headers=site.as_("viewer")).json()
    assert set(me["features"]) == {"dlq", "batches", "workflows", "sagas"}
    assert me["permissions"] == ["read"]


def test_prometheus_metrics_need_a_token(site: Site) -> None:
    site.app.enqueue("shop.email", {"to": "x"})
    assert site.client.get("/metrics").status_code == 401
    scraped = site.client.get("/metrics", headers=site.as_("viewer"))
    assert scraped.status_code == 200
    assert 'rota_queue_jobs{queue="mail",state="available"} 1.0' in scraped.text


def test_tokens_cli(sqlite_url: str) -> None:
    runner = CliRunner()
    rota.App(sqlite_url).migrate()
    made = runner.invoke(
        cli, ["tokens", "create", "ops-bot", "--role", "operator", "--database-url", sqlite_url]
    )
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip().splitlines()[0]
    assert secret.startswith("rota_")
    with rota.App(sqlite_url) as app:
        assert app.tokens.authenticate(secret).role is rota.Role.OPERATOR
    listed = runner.invoke(cli, ["tokens", "ls", "--json", "--database-url", sqlite_url])
    assert '"ops-bot"' in listed.stdout and secret not in listed.stdout
    dup = runner.invoke(
        cli, ["tokens", "create", "ops-bot", "--role", "viewer", "--database-url", sqlite_url]
    )
    assert dup.exit_code == 1 and "exists already" in dup.output
    bad = runner.invoke(
        cli, ["tokens", "create", "x", "--role", "emperor", "--database-url", sqlite_url]
    )
    assert bad.exit_code == 2
    revoked = runner.invoke(cli, ["tokens", "revoke", "ops-bot", "--database-url", sqlite_url])
    assert revoked.exit_code == 0 and "revoked" in revoked.output
    again = runner.invoke(cli, ["tokens", "revoke", "ops-bot", "--database-url", sqlite_url])
    assert again.exit_code == 1 and "no live token" in again.output
    listed = runner.invoke(cli, ["tokens", "ls", "--json", "--database-url", sqlite_url])
    assert "ops-bot" not in listed.stdout
    everything = runner.invoke(cli, ["tokens", "ls", "--all", "--database-url", sqlite_url])
    assert "ops-bot" in everything.stdout


def test_dashboard_refuses_no_auth_off_loopback(sqlite_url: str) -> None:
    runner = CliRunner()
    for host in ("0.0.0.0", "192.0.2.7", "example.com", "::"):
        out = runner.invoke(
            cli, ["dashboard", "--no-auth", "--host", host, "--database-url", sqlite_url]
        )
        assert out.exit_code == 2 and "bind it to 127.0.0.1" in out.output, host


def test_dashboard_command_serves_with_uvicorn(sqlite_url: str) -> None:
    with rota.App(sqlite_url) as app:
        app.migrate()
        token = app.tokens.create("cli", "viewer")
    port = browser.free_port()
    env = {**os.environ, "ROTA_DATABASE_URL": sqlite_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rota", "dashboard", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(base + "/api/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None

    try:
        wait_for(up, timeout=20, interval=0.1)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert httpx.get(base + "/api/queues").status_code == 401
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.get(base + "/api/queues", headers=auth).json() == []
        login = httpx.post(
            base + "/api/session", json={"token": token}, headers={"X-Rota-Request": "1"}
        )
        assert login.status_code == 200 and "rota_session=" in login.headers["set-cookie"]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
