"""The dashboard at the documented laptop size (#19): every page of the demo shop at
1366x768 in headless Chromium, a screenshot of each, and every action button inside the
viewport's width (the workflow page's "Retry step" was cut off at the right edge); then
what each page fix shows: workers from their heartbeat rows, schedules in plain words,
saga steps linked to their jobs, per-row Dismiss and hand-picked replay."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rota
from rota.testing import drain
from rota.web.server import create_app
from tests.web import browser
from tests.web.screenshots import PAGES, demo
from tests.web.test_dashboard_browser import wait

WIDTH, HEIGHT = 1366, 768
# The buttons of a page, with where they are (the page scrolls down, never sideways).
BUTTONS = """
return [...document.querySelectorAll('button, .btn')].filter((b) => b.offsetParent !== null)
  .map((b) => { const r = b.getBoundingClientRect();
    return { text: b.textContent.trim(), left: r.left, right: r.right }; });
"""

PANELS = """
return [...document.querySelectorAll('.panel')]
  .filter((p) => p.offsetParent !== null && p.scrollWidth > p.clientWidth + 1)
  .map((p) => { const h = p.querySelector('h2'); return h ? h.textContent : p.id || 'a panel'; });
"""


@pytest.fixture(scope="module")
def shop() -> Iterator[dict[str, Any]]:
    why = browser.missing()
    if why is not None:
        if os.environ.get("CI") or os.environ.get("ROTA_REQUIRE_POSTGRES"):
            pytest.fail(why + " (CI must run the browser tests)")
        pytest.skip(why)
    app, dead = demo(Path(tempfile.mkdtemp()) / "shop.db")
    app.tokens.create("alice", "admin")
    wide_workflow(app)
    try:
        with (
            browser.serve(create_app(app, poll_seconds=0.5)) as url,
            browser.chromium(WIDTH, HEIGHT) as driver,
        ):
            code = app.tokens.create_login_link("alice")
            driver.get(f"{url}/login/link?code={code}")
            yield {"app": app, "url": url, "driver": driver, "dead": dead}
    finally:
        app.close()


def wide_workflow(app: rota.App) -> None:
    """A workflow whose failed step has long names, many jobs and a long error: the row
    that pushed "Retry step" past the right edge at 1366 px."""

    @app.task(name="warehouse.reconcile_inventory_snapshot")
    def snapshot(day: str) -> list[str]:
        return [f"warehouse-{n}" for n in range(8)]

    @app.task(name="warehouse.reconcile_inventory_for_one_warehouse", max_attempts=1)
    def reconcile(warehouse: str, day: str) -> None:
        if warehouse == "warehouse-3":
            raise TimeoutError(
                f"the inventory service of {warehouse} did not answer within 30 s "
                "(GET /v2/inventory?since=2026-11-28T00:00:00Z&page_size=5000)"
            )

    flow = rota.Workflow("warehouse-inventory-reconciliation")
    first = flow.step(snapshot, name="take-inventory-snapshot-of-every-warehouse")
    flow.step(reconcile, after=first, each="warehouse", name="reconcile-each-warehouse-inventory")
    app.workflows.start(flow, args={"day": "2026-11-28"}, key="inventory-2026-11-28")
    for _ in range(4):
        drain(app, ["default"])
        app.workflows.advance()


def open_page(shop: dict[str, Any], path: str) -> Any:
    d = shop["driver"]
    d.get(shop["url"] + path)
    wait(d, lambda d: d.execute_script("return document.body.dataset.ready") == "1")
    return d


ALL_PAGES = {**PAGES, "wide-workflow": "/workflows/inventory-2026-11-28"}


@pytest.mark.parametrize("name", sorted(ALL_PAGES))
def test_every_action_button_lies_inside_the_viewport_at_1366(
    shop: dict[str, Any], name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    d = open_page(shop, ALL_PAGES[name].format(dead=shop["dead"]))
    width = d.execute_script("return window.innerWidth")
    assert width == WIDTH
    shots = Path(os.environ.get("ROTA_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(shots / f"{name}-1366x768.png"))
    buttons = d.execute_script(BUTTONS)
    outside = [b for b in buttons if b["left"] < 0 or b["right"] > width]
    assert not outside, f"{name}: buttons outside the {width} px viewport: {outside}"
    overflow = d.execute_script("return document.documentElement.scrollWidth")
    assert overflow <= width, f"{name}: the page scrolls sideways ({overflow} px)"
    # A panel clips what overflows it: nothing may (a cut time, a hidden button).
    clipped = d.execute_script(PANELS)
    assert not clipped, f"{name}: content wider than its panel in {clipped}"


def test_workflow_retry_step_is_visible(shop: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    d = open_page(shop, ALL_PAGES["wide-workflow"])
    (button,) = d.find_elements(By.CSS_SELECTOR, "button[data-retry-step]")
    assert button.text == "Retry step" and button.is_displayed()
    right = d.execute_script("return arguments[0].getBoundingClientRect().right", button)
    assert right <= WIDTH


def test_empty_columns_go_and_the_error_gets_the_room(shop: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    app: rota.App = shop["app"]
    app.enqueue("shop.email", {"to": "late@shop.invalid"}, max_attempts=1)
    drain(app, ["mail"])
    d = open_page(shop, "/jobs?state=discarded&queue=mail")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job]"))
    heads = [th.text for th in d.find_elements(By.CSS_SELECTOR, "thead th") if th.is_displayed()]
    assert "KEY" not in heads and "LAST ERROR" in heads  # no mail job has a key
    cell = d.find_element(By.CSS_SELECTOR, "#jobs tr[data-job] td.grow")
    assert cell.get_attribute("title").startswith("ValueError: no MX record for")
    assert cell.size["width"] > 300  # the free width, not ~20 characters


def test_workers_page_lists_live_workers_from_their_heartbeat(shop: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    app: rota.App = shop["app"]
    # A worker that has not run a job yet: only its heartbeat row says it is there.
    from rota.routing.store import RoutingStore

    RoutingStore(app.driver).worker_advertise("idle-1.shop.internal:77", ["reports"], [], 60)
    d = open_page(shop, "/workers")
    idle = 'tr[data-worker="idle-1.shop.internal:77"]'
    # Read inside the wait: a row found just before the page redraws goes stale.
    cells = wait(
        d,
        lambda d: [
            c.text for c in d.find_element(By.CSS_SELECTOR, idle).find_elements(By.TAG_NAME, "td")
        ],
    )
    assert cells[1] == "worker" and cells[2] == "reports" and cells[5].endswith("ago")
    leader = 'tr[data-worker="web-1.shop.internal:3112"]'
    assert "leader" in wait(d, lambda d: d.find_element(By.CSS_SELECTOR, leader).text)


def test_schedules_in_plain_words_with_relative_next_runs(shop: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    d = open_page(shop, "/schedules")
    digest = d.find_element(By.CSS_SELECTOR, 'tr[data-schedule="morning-digest"]')
    assert "at 07:00 on weekdays" in digest.text
    assert digest.find_element(By.CSS_SELECTOR, "td.next").text.startswith("in ")
    report = d.find_element(By.CSS_SELECTOR, 'tr[data-schedule="daily-report"]')
    assert "every day at 02:30" in report.text
    # The digest ran once, by hand (no scheduled time): its last run is that run.
    d = open_page(shop, "/schedules/morning-digest")
    facts = d.find_element(By.ID, "facts").text.splitlines()
    assert facts[facts.index("Runs") + 1] == "at 07:00 on weekdays"
    assert facts[facts.index("Last run") + 1].endswith(" ago")
    first = d.find_element(By.CSS_SELECTOR, "#next li").text
    assert first.startswith("in ") and " · " in first  # relative, then the local time


def test_saga_steps_link_to_their_jobs(shop: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    d = open_page(shop, "/sagas/order-42")
    step = d.find_element(By.CSS_SELECTOR, '#stepper li[data-step="take_payment"]')
    link = step.find_element(By.CSS_SELECTOR, "a")
    job = int(link.text.lstrip("#"))
    assert shop["app"].get_job(job).task.startswith("saga:order-fulfilment/take_payment")


def test_dismiss_one_and_replay_hand_picked_dead_letters(shop: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    app: rota.App = shop["app"]
    more = [app.enqueue("shop.charge", {"order": 42 + 97 * n}, max_attempts=1) for n in (7, 8, 9)]
    drain(app, ["payments"], max_jobs=200)
    ids = [j.id for j in more]
    assert all(app.get_job(i).state is rota.JobState.DISCARDED for i in ids)
    d = open_page(shop, "/dead-letters?task=shop.charge")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, f'input[data-pick="{ids[2]}"]'))
    # Dismiss one row: it asks why, then the dead letter is cancelled.
    d.find_element(By.CSS_SELECTOR, f'button[data-dismiss="{ids[2]}"]').click()
    alert = wait(d, lambda d: d.switch_to.alert)
    alert.send_keys("refunded by hand")
    alert.accept()
    wait(d, lambda d: not d.find_elements(By.CSS_SELECTOR, f'tr[data-job="{ids[2]}"]'))
    assert app.get_job(ids[2]).state is rota.JobState.CANCELLED
    # Pick two rows by hand: the dry run counts those two, the replay takes exactly them.
    for job_id in ids[:2]:
        d.find_element(By.CSS_SELECTOR, f'input[data-pick="{job_id}"]').click()
    assert "2 picked by hand" in d.find_element(By.ID, "picked").text
    d.find_element(By.NAME, "reason").send_keys("picked by hand after INC-2042")
    d.find_element(By.ID, "dry-run").click()
    wait(d, lambda d: "Dry run: would replay 2 of 2" in d.find_element(By.ID, "replay-result").text)
    assert all(app.get_job(i).state is rota.JobState.DISCARDED for i in ids[:2])
    wait(d, lambda d: d.find_element(By.ID, "replay-now").is_enabled())
    d.find_element(By.ID, "replay-now").click()
    wait(d, lambda d: "Replayed 2 dead letters" in d.find_element(By.ID, "replay-result").text)
    assert all(app.get_job(i).state is rota.JobState.AVAILABLE for i in ids[:2])
    (audit,) = [r for r in app.dlq.replays(limit=5) if r.reason == "picked by hand after INC-2042"]
    assert sorted(audit.job_ids) == sorted(ids[:2])


def test_a_viewer_sees_the_dead_letter_count_the_queue_table_shows(shop: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    app: rota.App = shop["app"]
    d = shop["driver"]
    app.tokens.create("grafana-2", "viewer")
    d.get(f"{shop['url']}/login/link?code={app.tokens.create_login_link('grafana-2')}")
    d = open_page(shop, "/")
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-queue]"))
    discarded = sum(q.counts.get("discarded", 0) for q in app.list_queues())
    wait(d, lambda d: d.find_element(By.ID, "c-dead").text == f"{discarded:,}")
    assert discarded > 0
    d.get(f"{shop['url']}/login/link?code={app.tokens.create_login_link('alice')}")


def test_a_batch_waiting_out_its_backoff_says_when_it_runs_next(shop: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    app: rota.App = shop["app"]

    @app.task(name="images.flaky", queue="images", max_attempts=1)
    def flaky(ctx: rota.Context) -> None:
        raise OSError("bucket unreachable")

    status = app.batch(flaky, completions=3, parallelism=1, name="flaky", backoff_delay=600)
    for _ in range(3):
        app.batches.advance()
        drain(app, ["images"])
    app.batches.advance()
    current = app.batches.get(status.id)
    assert current.failed == 1 and current.backoff_until is not None
    assert current.to_json()["backoff_until"] == current.backoff_until.isoformat()
    d = open_page(shop, "/batches/flaky")
    text = wait(d, lambda d: d.find_element(By.ID, "backoff").text)
    assert text.startswith("backing off after 1 failed attempt: next run in ")
    d = open_page(shop, "/batches")
    assert "next run in " in d.find_element(By.TAG_NAME, "main").text


@pytest.mark.parametrize(
    ("path", "opener", "expect"),
    [
        ("/", 'button[data-purge="mail"]', "waiting jobs of queue mail"),
        ("/jobs?queue=payments&task=shop.charge", "#cancel-matching", "of queue payments"),
    ],
)
def test_the_purge_and_cancel_panels_fit_at_1366(
    shop: dict[str, Any],
    path: str,
    opener: str,
    expect: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """#19: the dry run's panel, its buttons and the audit list inside the viewport."""
    from selenium.webdriver.common.by import By

    d = open_page(shop, path)
    wait(d, lambda d: d.find_element(By.CSS_SELECTOR, opener)).click()
    wait(d, lambda d: expect in d.find_element(By.ID, "bulk-result").text)
    shots = Path(os.environ.get("ROTA_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    name = "overview-purge" if path == "/" else "jobs-cancel"
    d.save_screenshot(str(shots / f"{name}-1366x768.png"))
    buttons = d.execute_script(BUTTONS)
    assert {"Close", "Dry run again"} <= {b["text"] for b in buttons}
    outside = [b for b in buttons if b["left"] < 0 or b["right"] > WIDTH]
    assert not outside, f"{name}: buttons outside the viewport: {outside}"
    assert not d.execute_script(PANELS)
    d.find_element(By.ID, "bulk-close").click()  # a dry run only: the shop stays as it was
    assert not d.find_element(By.ID, "bulk-panel").is_displayed()
