"""Issue 22 over real HTTP: `rota dashboard` as a real process under a path prefix
(`--root-path /rota`) behind a TLS reverse proxy that passes the prefix on or strips it;
the session cookie's Secure flag from the trusted proxy's scheme (`--forwarded-allow-ips`)
or forced (`--secure-cookies`); and encrypted schedules on every route and command."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from rota.security.encryption import ENV_KEYS, generate_key
from tests.web.doors import WRITE_HEADERS, bearer, dashboard, dashboard_process
from tests.web.tls_proxy import tls_proxy

ROOT = "/rota"


def _client(base: str) -> httpx.Client:
    # The proxy's certificate is self-signed, made for this test.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return httpx.Client(base_url=base, verify=context, timeout=30)


def _cookie(answer: httpx.Response) -> str:
    (cookie,) = [c for c in answer.headers.get_list("set-cookie") if c.startswith("rota_session=")]
    return cookie.lower()


@pytest.fixture
def shop(sqlite_url: str) -> tuple[str, str]:
    with rota.App(sqlite_url) as app:
        app.migrate()

        @app.task(name="shop.email", queue="mail")
        def email(to: str) -> None: ...

        app.enqueue("shop.email", {"to": "a@b"})
        token = app.tokens.create("ops", "operator")
    return sqlite_url, token


@pytest.mark.parametrize("strip", [False, True], ids=["prefix-passed", "prefix-stripped"])
def test_under_a_prefix_behind_a_tls_proxy(
    shop: tuple[str, str], tmp_path: Path, strip: bool
) -> None:
    url, token = shop
    args = ("--root-path", ROOT, "--forwarded-allow-ips", "127.0.0.1")
    with (
        dashboard_process(url, *args) as (_, upstream),
        tls_proxy(upstream, tmp_path, strip=ROOT if strip else "") as proxy,
        _client(proxy) as client,
    ):
        page = client.get(f"{ROOT}/")
        assert page.status_code == 200 and 'data-page="login"' in page.text
        assert f'href="{ROOT}/static/app.css"' in page.text
        assert f'src="{ROOT}/static/app.js"' in page.text and f'data-root="{ROOT}"' in page.text
        assert client.get(f"{ROOT}/static/app.js").status_code == 200
        assert client.get(f"{ROOT}/api/health").json()["status"] == "ok"
        login = client.post(f"{ROOT}/api/session", json={"token": token}, headers=WRITE_HEADERS)
        assert login.status_code == 200, login.text
        cookie = _cookie(login)
        assert "secure" in cookie and f"path={ROOT}" in cookie  # the proxy's scheme is https
        assert "httponly" in cookie and "samesite=strict" in cookie
        overview = client.get(f"{ROOT}/")
        assert f'href="{ROOT}/jobs"' in overview.text and 'href="/jobs"' not in overview.text
        # Redirects and Location headers stay under the prefix.
        moved = client.get(f"{ROOT}/jobs?token=x", follow_redirects=False)
        assert moved.headers["location"].startswith(f"{ROOT}/login?")
        # A write from the dashboard's own page (its origin is the proxy's).
        pause = client.post(
            f"{ROOT}/api/queues/mail/pause", headers={**WRITE_HEADERS, "Origin": proxy}
        )
        assert pause.status_code == 200, pause.text
        missing = client.get(f"{ROOT}/nowhere")
        assert missing.status_code == 404 and f"href='{ROOT}/'" in missing.text
        out = client.delete(f"{ROOT}/api/session", headers=WRITE_HEADERS)
        assert out.status_code == 204 and f"path={ROOT}" in _cookie(out)


def test_an_untrusted_proxy_does_not_make_the_cookie_secure(
    shop: tuple[str, str], tmp_path: Path
) -> None:
    url, token = shop
    args = ("--root-path", ROOT, "--forwarded-allow-ips", "192.0.2.1")
    with (
        dashboard_process(url, *args) as (_, upstream),
        tls_proxy(upstream, tmp_path) as proxy,
        _client(proxy) as client,
    ):
        login = client.post(f"{ROOT}/api/session", json={"token": token}, headers=WRITE_HEADERS)
        assert "secure" not in _cookie(login)  # X-Forwarded-Proto from 127.0.0.1 ignored


def test_secure_cookies_forces_the_flag(shop: tuple[str, str]) -> None:
    url, token = shop
    with dashboard_process(url, "--secure-cookies") as (_, base):
        login = httpx.post(f"{base}/api/session", json={"token": token}, headers=WRITE_HEADERS)
        assert "secure" in _cookie(login)  # on plain http too
    with dashboard_process(url) as (_, base):
        login = httpx.post(f"{base}/api/session", json={"token": token}, headers=WRITE_HEADERS)
        assert "secure" not in _cookie(login)


def test_bad_root_path_and_hosts_are_refused(sqlite_url: str) -> None:
    rota.App(sqlite_url).migrate()
    runner = CliRunner()
    for args, message in (
        (["--root-path", "rota"], "--root-path"),
        (["--root-path", "/a b"], "--root-path"),
        (["--allowed-host", "bad host!"], "--allowed-host"),
        (["--no-auth", "--allowed-host", "*"], "DNS rebinding"),
    ):
        out = runner.invoke(cli, ["dashboard", *args, "--database-url", sqlite_url])
        assert out.exit_code == 2 and message in out.output, (args, out.output)


# --- encrypted schedules -----------------------------------------------------------------


def test_an_encrypted_schedule_beside_plain_ones(
    app: rota.App, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    monkeypatch.setenv(ENV_KEYS, generate_key())

    @app.task(name="shop.vault", encrypted=True)
    def vault(pin: str) -> None: ...

    @app.task(name="shop.report")
    def report(day: str) -> None: ...

    app.schedule("shop.report", "0 3 * * *", name="nightly", args={"day": "today"})
    app.schedule("shop.vault", "*/5 * * * *", name="secret", args={"pin": "pin-4242"})
    app.schedule("shop.report", "0 4 * * *", name="early", args={"day": "yesterday"})
    app.sync_schedules()
    admin = app.tokens.create("ops", "admin")
    viewer = app.tokens.create("look", "viewer")
    with dashboard(app) as client:
        listed = client.get("/api/schedules", headers=bearer(admin))
        assert listed.status_code == 200, listed.text
        args = {s["name"]: s["args"] for s in listed.json()}
        assert args == {
            "early": {"day": "yesterday"},
            "nightly": {"day": "today"},
            "secret": "<encrypted>",
        }
        one = client.get("/api/schedules/secret", headers=bearer(admin))
        assert one.status_code == 200 and one.json()["args"] == "<encrypted>"
        seen = client.get("/api/schedules", headers=bearer(viewer)).json()
        assert {s["name"]: s["args"] for s in seen}["secret"] == "<encrypted>"
        for action in ("suspend", "resume"):
            done = client.post(f"/api/schedules/secret/{action}", headers=bearer(admin))
            assert done.status_code == 200 and done.json()["args"] == "<encrypted>"
        assert "pin-4242" not in listed.text + one.text
        assert client.get("/schedules", headers=bearer(admin)).status_code == 200
    runner = CliRunner()
    ls = runner.invoke(cli, ["cron", "ls", "--json", "--database-url", database_url])
    assert ls.exit_code == 0, ls.output
    assert {s["name"]: s["args"] for s in json.loads(ls.stdout)}["secret"] == "<encrypted>"
    table = runner.invoke(cli, ["cron", "ls", "--database-url", database_url])
    assert table.exit_code == 0 and "pin-4242" not in table.output
    show = runner.invoke(cli, ["cron", "show", "secret", "--database-url", database_url])
    assert show.exit_code == 0 and "args: <encrypted>" in show.output
    assert "pin-4242" not in show.output
