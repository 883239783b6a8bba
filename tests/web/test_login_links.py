"""Issue 22, a safe link login, over real HTTP: `?token=` never signs in any more; a
login link (`rota dashboard login-url`) is single-use and short-lived, signs in only a
navigation the user made, and a cross-site request, a used or an expired link get a clear
page, not a session."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from tests.helpers import wait_for
from tests.web.doors import EVIL, WRITE_HEADERS, dashboard

NAVIGATED = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}  # typed or pasted
CROSS_SITE = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}


def _link(database_url: str, name: str, *extra: str) -> str:
    out = CliRunner().invoke(
        cli,
        ["dashboard", "login-url", "--token-name", name, "--url", "http://dash.invalid/",
         "--json", "--database-url", database_url, *extra],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    url = json.loads(out.stdout)["url"]
    assert url.startswith("http://dash.invalid/login/link?code=rotalink_")
    return url


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def _session(answer: httpx.Response) -> bool:
    return any(
        c.startswith("rota_session=") and not c.startswith('rota_session=""')
        for c in answer.headers.get_list("set-cookie")
    )


def test_a_token_in_the_url_never_signs_in(app: rota.App) -> None:
    token = app.tokens.create("ops", "admin")
    with dashboard(app) as client:
        for headers in (NAVIGATED, CROSS_SITE, {}):
            answer = client.get(f"/jobs?q=x&token={token}", headers=headers)
            assert answer.status_code == 303 and not _session(answer), headers
            target = answer.headers["location"]
            assert token not in target  # cleaned from the URL at once
            assert target.startswith("/login?") and "notice=token-in-url" in target
            assert parse_qs(urlsplit(target).query)["next"] == ["/jobs?q=x"]
        page = client.get("/login?notice=token-in-url&next=/jobs")
        assert "no longer signs in" in page.text and "rota dashboard login-url" in page.text
        assert client.get("/api/me").status_code == 401
        # An unknown token gets the same answer: the URL is no oracle for tokens.
        assert (
            client.get("/?token=rota_bogus").headers["location"]
            == (client.get(f"/?token={token}").headers["location"])
        )


def test_a_login_link_signs_in_once_and_only_when_the_user_opened_it(
    app: rota.App, database_url: str
) -> None:
    app.tokens.create("alice", "operator")
    link = _path(_link(database_url, "alice"))
    with dashboard(app) as client:
        # From another site's page (or a browser that does not say): a page that asks,
        # and nothing is used or opened.
        for headers in (CROSS_SITE, {}, {"Sec-Fetch-Site": "same-site"}):
            asked = client.get(link, headers=headers)
            assert asked.status_code == 200 and not _session(asked)
            assert 'id="link-continue"' in asked.text and "alice" in asked.text
            assert asked.headers["referrer-policy"] == "no-referrer"
            assert asked.headers["cache-control"] == "no-store"
        assert client.get("/api/me").status_code == 401
        # Opened by the user (pasted, or from a terminal): signed in, URL cleaned.
        opened = client.get(link, headers=NAVIGATED)
        assert opened.status_code == 303 and opened.headers["location"] == "/"
        assert _session(opened)
        assert client.get("/api/me").json()["name"] == "alice"
        # Once only: a second use is a clear page, not a session.
        client.cookies.clear()
        again = client.get(link, headers=NAVIGATED)
        assert again.status_code == 410 and not _session(again)
        assert "used already" in again.text and 'id="link-continue"' not in again.text
        assert client.get("/api/me").status_code == 401
        cross = client.get(link, headers=CROSS_SITE)
        assert cross.status_code == 410 and "used already" in cross.text


def test_the_confirm_button_signs_in_from_the_dashboards_own_page(
    app: rota.App, database_url: str
) -> None:
    app.tokens.create("bob", "viewer")
    code = parse_qs(urlsplit(_link(database_url, "bob")).query)["code"][0]
    with dashboard(app) as client:
        body = {"code": code}
        assert client.post("/api/session/link", json=body).status_code == 403  # no header
        forged = client.post(
            "/api/session/link", json=body, headers={**WRITE_HEADERS, "Origin": EVIL}
        )
        assert forged.status_code == 403 and not _session(forged)
        ok = client.post("/api/session/link", json=body, headers=WRITE_HEADERS)
        assert ok.status_code == 200 and ok.json()["name"] == "bob" and _session(ok)
        twice = client.post("/api/session/link", json=body, headers=WRITE_HEADERS)
        assert twice.status_code == 401 and "used already" in twice.json()["detail"]


def test_an_expired_link_and_a_revoked_token_get_a_clear_page(
    app: rota.App, database_url: str
) -> None:
    app.tokens.create("carol", "viewer")
    app.tokens.create("dave", "viewer")
    short = _path(_link(database_url, "carol", "--expires", "1s"))
    revoked = _path(_link(database_url, "dave"))
    app.tokens.revoke("dave")
    code = parse_qs(urlsplit(short).query)["code"][0]
    wait_for(lambda: app.tokens.inspect_login_link(code).expired, timeout=10)  # type: ignore[union-attr]
    with dashboard(app) as client:
        for link, why in ((short, "expired"), (revoked, "revoked")):
            for headers in (NAVIGATED, CROSS_SITE):
                page = client.get(link, headers=headers)
                assert page.status_code == 410 and why in page.text, (link, headers)
                assert not _session(page)
        unknown = client.get("/login/link?code=rotalink_nope", headers=NAVIGATED)
        assert unknown.status_code == 410 and "unknown" in unknown.text
        assert client.get("/api/me").status_code == 401


def test_login_url_refuses_what_it_cannot_do(database_url: str, tmp_path: Path) -> None:
    with rota.App(database_url) as app:
        app.migrate()
        app.tokens.create("erin", "viewer")
    runner = CliRunner()
    base = ["dashboard", "login-url", "--database-url", database_url]
    nobody = runner.invoke(cli, [*base, "--token-name", "nobody"])
    assert nobody.exit_code == 1 and "no live token named 'nobody'" in nobody.output
    long = runner.invoke(cli, [*base, "--token-name", "erin", "--expires", "2d"])
    assert long.exit_code == 1 and "at most 1d" in long.output
    bad = runner.invoke(cli, [*base, "--token-name", "erin", "--url", "ftp://x"])
    assert bad.exit_code == 2
    printed = runner.invoke(cli, [*base, "--token-name", "erin"])
    assert printed.exit_code == 0
    assert printed.stdout.startswith("http://127.0.0.1:8765/login/link?code=rotalink_")
    # Only the digest of the code is stored.
    code = parse_qs(urlsplit(printed.stdout.strip()).query)["code"][0]
    if database_url.startswith("sqlite"):
        assert code.encode() not in Path(database_url.removeprefix("sqlite:///")).read_bytes()


@pytest.mark.parametrize("no_auth", [True])
def test_no_auth_ignores_tokens_and_links(sqlite_url: str, no_auth: bool) -> None:
    with rota.App(sqlite_url) as app:
        app.migrate()
        with dashboard(app, no_auth=no_auth) as client:
            assert client.get("/jobs?token=x").headers["location"] == "/jobs"
            assert client.get("/login/link?code=x", headers=NAVIGATED).status_code == 303
