"""Issue 18, hole 5, on both dialects over real HTTP: tokens with a lifetime and a "last
used" time, and browser sessions of their own (short-lived, ended by sign-out, by the
token's revocation or expiry) instead of a cookie that carries the API token."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from rota.web.settings import WebSettings
from tests.helpers import wait_for
from tests.web.doors import WRITE_HEADERS, bearer, dashboard

PROBLEM = "application/problem+json"


def _login(client: httpx.Client, token: str) -> str:
    answer = client.post("/api/session", json={"token": token}, headers=WRITE_HEADERS)
    assert answer.status_code == 200, answer.text
    return str(client.cookies["rota_session"])


def test_the_cookie_is_a_session_that_sign_out_ends_on_the_server(app: rota.App) -> None:
    token = app.tokens.create("alice", "operator")
    with dashboard(app) as client:
        answer = client.post("/api/session", json={"token": token}, headers=WRITE_HEADERS)
        cookie = answer.headers["set-cookie"]
        session = client.cookies["rota_session"]
        assert token not in cookie and session not in token
        assert "Max-Age=28800" in cookie  # eight hours, not a week
        assert client.get("/api/me").json()["name"] == "alice"
        # The session secret is not an API token.
        assert client.get("/api/me", headers=bearer(session)).status_code == 401
        out = client.delete("/api/session", headers=WRITE_HEADERS)
        assert out.status_code == 204 and 'rota_session=""' in out.headers["set-cookie"]
        # A copy of the cookie taken before sign-out is worth nothing now.
        client.cookies.clear()
        replay = client.get("/api/me", headers={"Cookie": f"rota_session={session}"})
        assert replay.status_code == 401 and replay.headers["content-type"] == PROBLEM
        page = client.get("/jobs", headers={"Cookie": f"rota_session={session}"})
        assert 'data-page="login"' in page.text


def test_revoking_or_expiring_the_token_ends_its_sessions(app: rota.App) -> None:
    token = app.tokens.create("bob", "viewer")
    short = app.tokens.create("carol", "viewer", expires="2s")
    with dashboard(app) as client:
        session = _login(client, token)
        assert client.get("/api/queues").status_code == 200
        app.tokens.revoke("bob")
        assert client.get("/api/queues").status_code == 401
        # A name issued again does not inherit the old sessions.
        app.tokens.create("bob", "admin")
        again = client.get("/api/queues", headers={"Cookie": f"rota_session={session}"})
        assert again.status_code == 401
        client.cookies.clear()
        _login(client, short)
        assert client.get("/api/queues", headers=bearer(short)).status_code == 200
        assert client.get("/api/queues").status_code == 200
        wait_for(lambda: client.get("/api/queues").status_code == 401, timeout=10, interval=0.2)
        expired = client.get("/api/queues", headers=bearer(short))
        assert expired.status_code == 401 and "expired" in expired.json()["detail"]


def test_a_session_is_short_lived(app: rota.App) -> None:
    token = app.tokens.create("dave", "viewer")
    with dashboard(app, settings=WebSettings(session_seconds=1)) as client:
        _login(client, token)
        assert client.get("/api/queues").status_code == 200
        wait_for(lambda: client.get("/api/queues").status_code == 401, timeout=10, interval=0.2)
        assert client.get("/api/queues", headers=bearer(token)).status_code == 200


def test_tokens_show_lifetime_and_last_use(app: rota.App) -> None:
    forever = app.tokens.create("ops", "admin")
    with dashboard(app) as client:
        made = client.post(
            "/api/tokens",
            json={"name": "ci", "role": "viewer", "expires_in": 30 * 86400},
            headers=bearer(forever),
        )
        assert made.status_code == 201, made.text
        listed = {t["name"]: t for t in client.get("/api/tokens", headers=bearer(forever)).json()}
        assert listed["ops"]["expires_at"] is None and listed["ops"]["last_used_at"] is not None
        assert listed["ci"]["last_used_at"] is None and listed["ci"]["expires_at"] is not None
        client.get("/api/me", headers=bearer(made.json()["token"]))
        used = {t["name"]: t for t in client.get("/api/tokens", headers=bearer(forever)).json()}
        assert used["ci"]["last_used_at"] is not None and used["ci"]["expired"] is False
        too_short = client.post(
            "/api/tokens",
            json={"name": "x", "role": "viewer", "expires_in": 5},
            headers=bearer(forever),
        )
        assert too_short.status_code == 422
    # Recorded at most once a minute: a page polling every 3 s costs no write per call.
    first = next(t for t in app.tokens.list() if t.name == "ops").last_used_at
    app.tokens.authenticate(forever)
    assert next(t for t in app.tokens.list() if t.name == "ops").last_used_at == first


def test_tokens_cli_expires_and_lists_lifetime_and_last_use(database_url: str) -> None:
    rota.App(database_url).migrate()
    runner = CliRunner()
    made = runner.invoke(
        cli,
        ["tokens", "create", "nightly", "--role", "viewer", "--expires", "30d", "--json",
         "--database-url", database_url],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    out = json.loads(made.stdout)
    assert out["expires_at"] is not None and out["token"].startswith("rota_")
    with rota.App(database_url) as app:
        app.tokens.authenticate(out["token"])
        short = app.tokens.create("blink", "viewer", expires=1)
        wait_for(lambda: next(t for t in app.tokens.list() if t.name == "blink").expired, 10)
        with pytest.raises(rota.AuthenticationError, match="expired"):
            app.tokens.authenticate(short)
    listed = runner.invoke(cli, ["tokens", "ls", "--database-url", database_url])
    assert listed.exit_code == 0, listed.output
    assert "last used" in listed.output and "expires" in listed.output
    assert "(expired)" in listed.output and "never" in listed.output
    as_json = json.loads(
        runner.invoke(cli, ["tokens", "ls", "--json", "--database-url", database_url]).stdout
    )
    nightly = next(t for t in as_json if t["name"] == "nightly")
    assert nightly["last_used_at"] is not None and nightly["expired"] is False
    bad = runner.invoke(
        cli,
        ["tokens", "create", "x", "--role", "viewer", "--expires", "soon",
         "--database-url", database_url],
    )  # fmt: skip
    assert bad.exit_code == 2 and "--expires" in bad.output
