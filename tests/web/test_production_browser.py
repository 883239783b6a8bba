"""Issue 22 in Debian's Chromium: `rota dashboard --root-path /rota` as a real process
behind a reverse proxy that terminates TLS (tests/web/tls_proxy.py). Sign in by token and
by login link, every page, one action, sign-out, and the cookie's Secure and Path; and a
cross-site link with a token or a login link signs no one in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import rota
from rota.testing import drain
from tests.helpers import wait_for
from tests.web import browser
from tests.web.conftest import add_tasks
from tests.web.doors import dashboard_process
from tests.web.features_demo import seed_features
from tests.web.test_dashboard_browser import click, wait
from tests.web.tls_proxy import other_site, tls_proxy

ROOT = "/rota"


@dataclass
class Production:
    app: rota.App
    url: str  # the database
    base: str  # https://127.0.0.1:PORT/rota, through the proxy
    token: str
    driver: Any


@pytest.fixture
def production(sqlite_url: str, tmp_path: Path) -> Iterator[Production]:
    why = browser.missing()
    if why is not None:
        if os.environ.get("CI") or os.environ.get("ROTA_REQUIRE_POSTGRES"):
            pytest.fail(why + " (CI must run the browser tests)")
        pytest.skip(why)
    app = rota.App(sqlite_url)
    app.migrate()
    add_tasks(app)
    seed_features(app)
    app.schedule("shop.email", "0 3 * * *", name="nightly", args={"to": "ops@example.com"})
    app.sync_schedules()
    app.enqueue("shop.charge", {"order": 7}, max_attempts=1)
    app.enqueue("shop.email", {"to": "a@b"})
    drain(app, ["payments"])
    token = app.tokens.create("ops", "admin")
    args = ("--root-path", ROOT, "--forwarded-allow-ips", "127.0.0.1", "--poll", "0.5")
    try:
        with (
            dashboard_process(sqlite_url, *args) as (_, upstream),
            tls_proxy(upstream, tmp_path) as proxy,
            chromium() as driver,
        ):
            yield Production(app, sqlite_url, proxy + ROOT, token, driver)
    finally:
        app.close()


def chromium() -> Any:
    # The proxy's certificate is made by the test: accept it (nothing is downloaded).
    return browser.chromium(extra=("--ignore-certificate-errors",))


def login_url(p: Production, *extra: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "rota", "dashboard", "login-url", "--token-name", "ops",
         "--url", p.base, "--database-url", p.url, *extra],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return out.stdout.strip()


def ready(d: Any) -> bool:
    return bool(d.execute_script("return document.body.dataset.ready === '1'"))


def session_cookie(d: Any) -> dict[str, Any] | None:
    return next((c for c in d.get_cookies() if c["name"] == "rota_session"), None)


def check_cookie(d: Any) -> None:
    cookie = session_cookie(d)
    assert cookie is not None, d.get_cookies()
    assert cookie["secure"] is True and cookie["path"] == ROOT
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"


def test_the_dashboard_under_rota_behind_a_tls_proxy(production: Production) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    p, d = production, production.driver
    # Sign in by token, on the sign-in page.
    d.get(p.base + "/")
    field = wait(d, lambda d: d.find_element(By.NAME, "token"))
    field.send_keys(p.token, Keys.ENTER)
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="mail"]'))
    assert d.current_url == p.base + "/"
    check_cookie(d)
    # Every page, by the navigation's own links, and the detail pages by theirs.
    links = [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "nav a")]
    assert links and all(href.startswith(p.base + "/") for href in links)
    shown = {href.removeprefix(p.base) for href in links}
    assert shown == {
        "/", "/jobs", "/dead-letters", "/schedules", "/batches", "/workflows", "/sagas",
        "/workers", "/tokens",
    }  # fmt: skip
    for href in links:
        d.get(href)
        wait(d, ready, message=lambda: f"{d.current_url} did not load")
        assert d.current_url.startswith(p.base)
    job = p.app.list_jobs()[0].id
    for path, marker in (
        (f"/jobs/{job}", "#timeline"),
        ("/schedules/nightly", "#next li"),
        ("/batches/thumbnails", "#jobs tr"),
        ("/workflows/etl-2026-11-28", "#graph g"),
        ("/sagas/order-42", "#stepper li"),
    ):
        d.get(p.base + path)
        wait(d, ready, message=lambda: f"{d.current_url} did not load")
        wait(d, lambda d, m=marker: d.find_elements(By.CSS_SELECTOR, m))
        hrefs = [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "main a")]
        assert all(h.startswith(p.base) for h in hrefs if h), (path, hrefs)
    # One action: pause a queue from the overview.
    d.get(p.base + "/")
    click(d, 'button[data-queue="mail"]')
    wait(d, lambda d: d.find_element(By.CSS_SELECTOR, 'button[data-queue="mail"]').text == "Resume")
    assert [q.paused for q in p.app.list_queues() if q.name == "mail"] == [True]
    # And purge it (#19): the dry run and the purge pass the same doors under /rota.
    mail = p.app.list_jobs(queue="mail", state="available")
    assert mail
    # The overview redraws its rows while we look (the pause above): find and click in one
    # look, and read the result inside the wait.
    click(d, 'button[data-purge="mail"]')
    expected = f"would cancel {len(mail)} waiting jobs of queue mail"
    wait(d, lambda d: expected in d.find_element(By.ID, "bulk-result").text)
    d.find_element(By.CSS_SELECTOR, "#bulk-form input[name=reason]").send_keys("behind the proxy")
    click(d, "#bulk-go")
    wait(d, lambda d: "behind the proxy" in d.find_element(By.ID, "audit").text)
    assert all(p.app.get_job(j.id).state is rota.JobState.CANCELLED for j in mail)
    # Sign out: back to the sign-in page, and the session is gone.
    click(d, "#logout")
    wait(d, lambda d: d.find_elements(By.NAME, "token"))
    assert d.current_url.startswith(p.base + "/login")
    assert session_cookie(d) is None
    status = d.execute_script(
        "return fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.status)",
        p.base + "/api/me",
    )
    assert status == 401
    # Sign in by a login link, opened by the user.
    link = login_url(p)
    assert link.startswith(p.base + "/login/link?code=rotalink_")
    d.get(link)
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="mail"]'))
    assert d.current_url == p.base + "/"  # the code is gone from the address bar
    check_cookie(d)
    click(d, "#logout")
    wait(d, lambda d: d.find_elements(By.NAME, "token"))
    # The same link again: a clear page, no session.
    d.get(link)
    problem = wait(d, lambda d: d.find_element(By.ID, "link-problem"))
    assert "used already" in problem.text and session_cookie(d) is None


def test_cross_site_links_sign_no_one_in(production: Production) -> None:
    from selenium.webdriver.common.by import By

    p, d = production, production.driver
    link = login_url(p)
    code = re.search(r"code=(\S+)", link)[1]  # type: ignore[index]
    expired = login_url(p, "--expires", "1s")
    html = (
        f'<a id="token" href="{p.base}/?token={p.token}">dashboard</a>'
        f'<a id="link" href="{link}">sign in</a>'
        f'<a id="expired" href="{expired}">old</a>'
    )
    with other_site(html) as elsewhere:
        d.get(elsewhere)
        d.find_element(By.ID, "link").click()
        go = wait(d, lambda d: d.find_element(By.ID, "link-continue"))
        assert "ops" in d.find_element(By.ID, "link-name").text
        assert session_cookie(d) is None
        record = p.app.tokens.inspect_login_link(code)
        assert record is not None and not record.used  # asking used nothing
        d.get(elsewhere)
        d.find_element(By.ID, "token").click()
        notice = wait(d, lambda d: d.find_element(By.ID, "login-notice"))
        assert "no longer signs in" in notice.text and session_cookie(d) is None
        assert p.token not in d.current_url
        wait_for(lambda: p.app.tokens.inspect_login_link(expired.split("code=")[1]).expired, 10)  # type: ignore[union-attr]
        d.get(elsewhere)
        d.find_element(By.ID, "expired").click()
        problem = wait(d, lambda d: d.find_element(By.ID, "link-problem"))
        assert "expired" in problem.text and session_cookie(d) is None
        # The user who asked for the link signs in on the dashboard's own page.
        d.get(elsewhere)
        d.find_element(By.ID, "link").click()
        go = wait(d, lambda d: d.find_element(By.ID, "link-continue"))
        go.click()
        wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="mail"]'))
        check_cookie(d)
