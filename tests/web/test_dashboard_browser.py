"""The dashboard in headless Chromium: open the overview, find a job by its key, see its
failed attempts, retry the dead letter and watch the queue depth change live."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import rota
from rota.testing import drain
from rota.web.server import create_app
from tests.web import browser


@dataclass
class Dash:
    app: rota.App
    url: str
    token: str
    driver: Any


def seed(app: rota.App) -> None:
    """A small shop: payments that fail for one order, mail that works."""

    @app.task(
        name="shop.charge",
        queue="payments",
        max_attempts=3,
        backoff=rota.Backoff(base=0, jitter=False),
    )
    def charge(order: int, amount: float = 9.5) -> None:
        if order == 42:
            raise ConnectionError("payment gateway timed out for order 42")

    @app.task(name="shop.email", queue="mail")
    def email(to: str) -> str:
        return f"sent to {to}"

    for order in range(1, 6):
        app.enqueue("shop.charge", {"order": order}, key=f"order-{order}")
    app.enqueue("shop.email", {"to": "ada@example.com"})
    drain(app)
    app.enqueue("shop.charge", {"order": 42, "amount": 120.0}, key="order-42")
    drain(app, with_scheduled=True)
    for order in range(100, 104):
        app.enqueue("shop.charge", {"order": order}, key=f"order-{order}")


@pytest.fixture
def dash(sqlite_url: str) -> Iterator[Dash]:
    why = browser.missing()
    if why is not None:
        if os.environ.get("CI") or os.environ.get("ROTA_REQUIRE_POSTGRES"):
            pytest.fail(why + " (CI must run the browser tests)")
        pytest.skip(why)
    app = rota.App(sqlite_url)
    app.migrate()
    seed(app)
    token = app.tokens.create("browser", "operator")
    try:
        with browser.serve(create_app(app, poll_seconds=0.5)) as url, browser.chromium() as driver:
            yield Dash(app=app, url=url, token=token, driver=driver)
    finally:
        app.close()


def wait(driver: Any, condition: Any, timeout: float = 10.0, message: Any = None) -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # Pages redraw what changed while we look: a vanished element just means "look again".
    ignored = (NoSuchElementException, StaleElementReferenceException)
    try:
        return WebDriverWait(driver, timeout, 0.05, ignored_exceptions=ignored).until(condition)
    except Exception:
        if message is not None:
            raise AssertionError(message()) from None
        raise


def sign_in(dash: Dash, name: str, then: str = "/") -> None:
    """Open a login link for the token `name` as its user would (issue 22: a token in
    the URL no longer signs in), then the page `then`."""
    code = dash.app.tokens.create_login_link(name)
    dash.driver.get(f"{dash.url}/login/link?code={code}")
    if then != "/":
        dash.driver.get(dash.url + then)


def click(driver: Any, css: str) -> None:
    """Find the element and click it in one look: a page that redraws between the two
    would leave a stale element to click."""
    from selenium.webdriver.common.by import By

    def clicked(d: Any) -> bool:
        d.find_element(By.CSS_SELECTOR, css).click()
        return True

    wait(driver, clicked)


def depth(driver: Any, queue: str) -> int:
    from selenium.webdriver.common.by import By

    cell = driver.find_element(By.CSS_SELECTOR, f'tr[data-queue="{queue}"] td.depth')
    return int(cell.text.replace(",", ""))


def test_find_a_failed_job_retry_its_dead_letter_and_see_the_depth_change(dash: Dash) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    d = dash.driver
    # The overview, signed in with a login link (the URL is cleaned, a session stays).
    sign_in(dash, "browser")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="payments"]'))
    assert "code=" not in d.current_url
    wait(d, lambda d: depth(d, "payments") == 4)
    assert d.find_element(By.ID, "c-dead").text == "1"
    assert d.find_element(By.ID, "chart").find_elements(By.TAG_NAME, "path")

    # Find the job by its idempotency key.
    d.get(f"{dash.url}/jobs")
    box = wait(d, lambda d: d.find_element(By.NAME, "q"))
    box.send_keys("order-42", Keys.ENTER)
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job]")) == 1)
    row = d.find_element(By.CSS_SELECTOR, "#jobs tr[data-job]")
    assert "discarded" in row.text and "payment gateway timed out" in row.text
    row.find_element(By.TAG_NAME, "a").click()

    # Its page shows every failed attempt with the error and a traceback.
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline li[data-attempt]")) == 3)
    attempts = d.find_elements(By.CSS_SELECTOR, "#timeline li[data-attempt]")
    assert [a.get_attribute("class") for a in attempts] == ["failed", "failed", "discarded"]
    assert all("ConnectionError: payment gateway timed out" in a.text for a in attempts)
    attempts[0].find_element(By.TAG_NAME, "summary").click()
    assert "Traceback" in attempts[0].find_element(By.TAG_NAME, "pre").text
    job_id = int(d.current_url.rsplit("/", 1)[1])

    # Retry it from the dead-letter view.
    d.get(f"{dash.url}/dead-letters")
    click(d, f'button[data-retry="{job_id}"]')
    wait(d, lambda d: "No dead letters" in d.find_element(By.ID, "dead").text)
    assert dash.app.get_job(job_id).state is rota.JobState.AVAILABLE

    # The overview shows the deeper queue, and follows new work without a reload.
    d.get(f"{dash.url}/")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="payments"]'))
    wait(d, lambda d: depth(d, "payments") == 5)
    dash.app.enqueue("shop.charge", {"order": 500})
    wait(d, lambda d: depth(d, "payments") == 6)
    wait(d, lambda d: d.find_element(By.ID, "c-dead").text == "0")


def test_replay_dead_letters_after_a_dry_run(dash: Dash) -> None:
    from selenium.webdriver.common.by import By

    more = [dash.app.enqueue("shop.charge", {"order": 42}, max_attempts=1) for _ in range(2)]
    drain(dash.app, ["payments"])  # runs the 4 waiting ones too: the queue is empty now
    dash.app.tokens.create("night-shift", "replayer")
    d = dash.driver
    sign_in(dash, "night-shift", "/dead-letters")
    wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#dead tr[data-job]")) == 3)
    assert d.find_elements(By.CSS_SELECTOR, "button[data-retry]") == []  # no OPERATE
    form = d.find_element(By.ID, "search")
    form.find_element(By.NAME, "error_type").send_keys("ConnectionError")
    form.find_element(By.NAME, "task").send_keys("shop.charge")
    form.find_element(By.TAG_NAME, "button").click()
    replay = d.find_element(By.ID, "replay-now")
    assert not replay.is_enabled()  # nothing to replay before a dry run
    d.find_element(By.NAME, "reason").send_keys("gateway fixed in INC-2041")
    d.find_element(By.ID, "dry-run").click()
    result = d.find_element(By.ID, "replay-result")
    wait(d, lambda d: "Dry run: would replay 3 of 3" in result.text)
    assert len(dash.app.dlq.list()) == 3  # the dry run changed nothing
    wait(d, lambda d: d.find_element(By.ID, "replay-now").is_enabled())
    d.find_element(By.ID, "replay-now").click()
    wait(d, lambda d: "Replayed 3 dead letters" in d.find_element(By.ID, "replay-result").text)
    wait(d, lambda d: "No dead letters match" in d.find_element(By.ID, "dead").text)
    wait(d, lambda d: "gateway fixed in INC-2041" in d.find_element(By.ID, "replays").text)
    assert all(dash.app.get_job(j.id).state is rota.JobState.AVAILABLE for j in more)
    d.get(f"{dash.url}/")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="payments"]'))
    wait(d, lambda d: depth(d, "payments") == 3, message=lambda: str(dash.app.list_queues()))


def test_pause_a_queue_from_the_overview(dash: Dash) -> None:
    from selenium.webdriver.common.by import By

    d = dash.driver
    sign_in(dash, "browser")
    wait(d, lambda d: d.find_element(By.CSS_SELECTOR, 'button[data-queue="mail"]').text == "Pause")
    click(d, 'button[data-queue="mail"]')
    wait(d, lambda d: d.find_element(By.CSS_SELECTOR, 'button[data-queue="mail"]').text == "Resume")
    assert [q.paused for q in dash.app.list_queues() if q.name == "mail"] == [True]


def test_login_form_and_a_viewer_sees_no_buttons(dash: Dash) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    viewer = dash.app.tokens.create("reader", "viewer")
    d = dash.driver
    d.get(f"{dash.url}/jobs")
    field = wait(d, lambda d: d.find_element(By.NAME, "token"))
    field.send_keys("rota_wrong", Keys.ENTER)
    wait(d, lambda d: d.find_element(By.ID, "login-error").is_displayed())
    field.clear()
    field.send_keys(viewer, Keys.ENTER)
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job]"))
    assert d.current_url.endswith("/jobs")
    d.get(f"{dash.url}/")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="payments"]'))
    assert d.find_elements(By.CSS_SELECTOR, "button[data-queue]") == []


def test_a_viewer_sees_no_payload_and_markup_in_errors_stays_text(dash: Dash) -> None:
    """Issue 18: the one payload rule in the browser, and an error message with markup in
    it drawn as text (no element made from it, no script run)."""
    from selenium.webdriver.common.by import By

    app = dash.app

    @app.task(name="shop.xss", max_attempts=1)
    def xss(card: str) -> None:
        raise ValueError(f'<img src=x onerror="document.body.dataset.pwned=1"> {card}')

    job = app.enqueue("shop.xss", {"card": "4111-VIEWER-SECRET"})
    drain(app, ["default"])
    d = dash.driver
    sign_in(dash, "browser")  # the operator first
    d.get(f"{dash.url}/jobs/{job.id}")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline li[data-attempt]"))
    error = d.find_element(By.CSS_SELECTOR, "#timeline .err").text
    assert error.startswith("ValueError: <img src=x") and "4111-VIEWER-SECRET" in error
    assert d.find_elements(By.CSS_SELECTOR, "#timeline img") == []
    assert d.execute_script("return document.body.dataset.pwned") is None
    d.find_element(By.ID, "logout").click()
    wait(d, lambda d: d.find_elements(By.NAME, "token"))
    app.tokens.create("looker", "viewer")
    sign_in(dash, "looker", f"/jobs/{job.id}")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline li[data-attempt]"))
    page = d.find_element(By.TAG_NAME, "main").text
    assert "4111-VIEWER-SECRET" not in page and "<img" not in page
    assert "hidden" in d.find_element(By.ID, "args").text
    assert d.find_element(By.CSS_SELECTOR, "#timeline .err").text == "ValueError"
    assert d.find_elements(By.CSS_SELECTOR, "#timeline details.tb") == []
    nav = [a.get_attribute("data-nav") for a in d.find_elements(By.CSS_SELECTOR, "nav a")]
    assert "/tokens" not in nav and "/dead-letters" not in nav and "/jobs" in nav


def test_purge_a_queue_after_a_dry_run_and_see_the_audit_row(dash: Dash) -> None:
    """Issue 19: Purge on the overview counts per task first, asks why, then cancels the
    queue's waiting jobs; the audit list shows who and why."""
    from selenium.webdriver.common.by import By

    d = dash.driver
    sign_in(dash, "browser")
    wait(d, lambda d: depth(d, "payments") == 4)
    # The overview redraws its queue rows: find and click in one look (a stale button).
    click(d, 'button[data-purge="payments"]')
    result = d.find_element(By.ID, "bulk-result")
    wait(d, lambda d: "Dry run: would cancel 4 waiting jobs of queue payments" in result.text)
    assert "shop.charge \u00d7 4" in result.text
    waiting = dash.app.list_jobs(queue="payments", state="available")
    assert len(waiting) == 4  # the dry run changed nothing
    go = d.find_element(By.ID, "bulk-go")
    wait(d, lambda d: go.is_enabled() and go.text == "Purge 4")
    go.click()  # no reason yet: refused, nothing cancelled
    wait(d, lambda d: "Give a reason" in result.text)
    assert "bad" in result.get_attribute("class")
    reason = d.find_element(By.CSS_SELECTOR, "#bulk-form input[name=reason]")
    reason.send_keys("orders replayed twice")
    go.click()
    wait(d, lambda d: "Cancelled 4 waiting jobs of queue payments" in result.text)
    assert all(dash.app.get_job(j.id).state is rota.JobState.CANCELLED for j in waiting)
    wait(d, lambda d: depth(d, "payments") == 0)
    # Read inside the wait: the overview redraws the audit list every few seconds, and a
    # row found just before a redraw is gone by the time its text is asked for.
    text = wait(d, lambda d: d.find_element(By.CSS_SELECTOR, "#audit tr[data-audit]").text)
    assert "purge" in text and "orders replayed twice" in text
    assert "queue payments" in text
    (record,) = dash.app.jobs.audit(limit=5)
    assert record.action == "purge" and sorted(record.job_ids) == sorted(j.id for j in waiting)


def test_cancel_the_jobs_matching_the_filter(dash: Dash) -> None:
    from selenium.webdriver.common.by import By

    later = dash.app.enqueue("shop.email", {"to": "bob@example.com"}, delay=3600)
    d = dash.driver
    sign_in(dash, "browser", "/jobs?queue=payments&q=order-42")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job]"))
    d.find_element(By.ID, "cancel-matching").click()
    result = d.find_element(By.ID, "bulk-result")
    wait(d, lambda d: "free-text search cannot select" in result.text)
    assert not d.find_element(By.ID, "bulk-go").is_enabled()
    form = d.find_element(By.ID, "search")
    form.find_element(By.NAME, "q").clear()
    # A problem the server finds is shown with its reason, never a blank failure.
    form.find_element(By.NAME, "queue").send_keys(" orders")
    d.find_element(By.ID, "cancel-matching").click()
    wait(d, lambda d: "Dry run failed: bad queue name 'payments orders'" in result.text)
    assert "bad" in result.get_attribute("class")
    assert not d.find_element(By.ID, "bulk-go").is_enabled()
    form.find_element(By.NAME, "queue").clear()
    form.find_element(By.NAME, "queue").send_keys("payments")
    form.find_element(By.NAME, "task").send_keys("shop.charge")
    d.find_element(By.ID, "cancel-matching").click()
    counted = "would cancel 4 waiting jobs of queue payments, task shop.charge"
    wait(d, lambda d: counted in result.text)
    assert "queue=payments" in d.current_url and "task=shop.charge" in d.current_url
    d.find_element(By.CSS_SELECTOR, "#bulk-form input[name=reason]").send_keys("INC-2051")
    d.find_element(By.ID, "bulk-go").click()
    wait(d, lambda d: "Cancelled 4" in result.text)
    wait(d, lambda d: "INC-2051" in d.find_element(By.ID, "audit").text)
    assert dash.app.get_job(later.id).state is rota.JobState.SCHEDULED  # another queue
    assert not dash.app.list_jobs(queue="payments", state="available")


def test_a_viewer_sees_no_purge_or_cancel_button(dash: Dash) -> None:
    from selenium.webdriver.common.by import By

    dash.app.tokens.create("auditor", "viewer")
    d = dash.driver
    sign_in(dash, "auditor")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="payments"]'))
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#audit tr"))
    assert d.find_elements(By.CSS_SELECTOR, "button[data-purge]") == []
    assert d.find_elements(By.ID, "bulk-panel") == []
    assert "No purge or bulk cancel yet." in d.find_element(By.ID, "audit").text
    d.get(f"{dash.url}/jobs?queue=payments")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job]"))
    assert d.find_elements(By.ID, "cancel-matching") == []
    assert d.find_elements(By.ID, "bulk-panel") == []


def test_the_overview_says_when_a_transaction_holds_the_database_back(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#23: a transaction holding the xmin horizon past the threshold (0 here, so the one
    this test holds counts at once) shows as a notice on the overview."""
    import psycopg
    from selenium.webdriver.common.by import By

    why = browser.missing()
    if why is not None:
        if os.environ.get("CI") or os.environ.get("ROTA_REQUIRE_POSTGRES"):
            pytest.fail(why + " (CI must run the browser tests)")
        pytest.skip(why)
    monkeypatch.setattr("rota.web.routes.system.HORIZON_THRESHOLD", 0.0)
    app = rota.App(pg_url)
    app.migrate()
    token = app.tokens.create("browser", "operator")
    try:
        with (
            psycopg.connect(pg_url) as holder,
            browser.serve(create_app(app, poll_seconds=0.5)) as url,
            browser.chromium() as driver,
        ):
            holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            holder.execute("SELECT count(*) FROM rota_jobs")  # a snapshot, left open
            dash = Dash(app=app, url=url, token=token, driver=driver)
            sign_in(dash, "browser")
            notice = wait(driver, lambda d: d.find_element(By.ID, "horizon"))
            wait(driver, lambda d: notice.is_displayed() and "held a snapshot" in notice.text)
            assert "operations, long transactions" in notice.text
    finally:
        app.close()
