"""Screenshots of every dashboard page for docs/dashboard.md, from a demo shop with an hour
of history: `python -m tests.web.screenshots docs/img` (needs chromium and chromedriver)."""

from __future__ import annotations

import random
import sqlite3
import sys
import tempfile
from pathlib import Path

import rota
from rota.testing import drain
from rota.worker.fetcher import claim_now
from tests.web import browser
from tests.web.features_demo import seed_features
from tests.web.test_dashboard_browser import wait

PAGES = {
    "overview": "/",
    "jobs": "/jobs?queue=payments&before_id=216",
    "job": "/jobs/{dead}",
    "schedules": "/schedules",
    "schedule": "/schedules/morning-digest",
    "dead-letters": "/dead-letters",
    "batches": "/batches",
    "batch": "/batches/avatars",
    "workflows": "/workflows",
    "workflow": "/workflows/etl-2026-11-28",
    "sagas": "/sagas",
    "saga": "/sagas/order-42",
    "workers": "/workers",
    "tokens": "/tokens",
}


def demo(path: Path) -> tuple[rota.App, int]:
    app = rota.App(f"sqlite:///{path}")
    app.migrate()
    fast = rota.Backoff(base=0, jitter=False)

    @app.task(name="shop.charge", queue="payments", max_attempts=3, backoff=fast)
    def charge(ctx: rota.Context, order: int, amount: float = 9.5) -> str:
        ctx.step("reserve-stock", lambda: {"sku": f"SKU-{order % 7}", "bin": "A-12"})
        ctx.checkpoint({"captured": False, "order": order})
        if order % 97 == 42:
            raise ConnectionError(f"payment gateway timed out for order {order}")
        return f"charged order {order}"

    @app.task(name="shop.email", queue="mail", max_attempts=2, backoff=fast)
    def email(to: str) -> str:
        if to.endswith(".invalid"):
            raise ValueError(f"no MX record for {to.rsplit('@', maxsplit=1)[-1]}")
        return to

    @app.task(name="reports.daily", queue="reports")
    def daily(day: str) -> dict[str, int]:
        return {"rows": 1204}

    app.schedule(
        "shop.email",
        "0 7 * * 1-5",
        name="morning-digest",
        args={"to": "team@example.com"},
        tz="Europe/Berlin",
        concurrency="forbid",
    )
    app.schedule("reports.daily", "30 2 * * *", name="daily-report", args={"day": "yesterday"})
    app.schedule("shop.charge", "*/15 * * * *", name="retry-sweep", args={"order": 1})
    app.sync_schedules()
    app.suspend_schedule("retry-sweep")
    app.trigger_schedule("morning-digest", name="morning-digest-by-hand")

    rng = random.Random(8)
    for n in range(260):
        order = 1000 + n
        app.enqueue(
            "shop.charge",
            {"order": order, "amount": round(rng.uniform(5, 300), 2)},
            key=f"order-{order}",
        )
    for n in range(90):
        to = f"user{n}@example.com" if n % 30 else f"user{n}@shop.invalid"
        app.enqueue("shop.email", {"to": to})
    for n in range(12):
        app.enqueue("reports.daily", {"day": f"2026-11-{n + 1:02d}"})
    drain(app, with_scheduled=True, worker_id="web-1.shop.internal:3112")
    seed_features(app)
    for _ in range(3):  # the avatars batch part way through
        drain(app, ["default"], max_jobs=5, worker_id="web-2.shop.internal:2871")
        app.batches.advance()
    dead = next(j.id for j in app.list_jobs(state="discarded", queue="payments"))

    # Spread the hour's work over the last hour, as a running shop would have it.
    db = sqlite3.connect(path)
    ids = [row[0] for row in db.execute("SELECT id FROM rota_jobs ORDER BY id")]
    for job_id in ids:
        back = rng.uniform(60, 3500) * (0.6 + 0.4 * rng.random())
        db.execute(
            "UPDATE rota_jobs SET created_at = created_at - ?, run_at = run_at - ?,"
            " attempted_at = attempted_at - ? + 1.5, finished_at = finished_at - ? + 2.2,"
            " worker = CASE WHEN id % 3 = 0 THEN 'web-2.shop.internal:2871' ELSE worker END"
            " WHERE id = ?",
            (back, back, back, back, job_id),
        )
    db.commit()
    db.close()

    # Work waiting and running now.
    for n in range(37):
        app.enqueue("shop.charge", {"order": 2000 + n}, key=f"order-{2000 + n}")
    for n in range(6):
        app.enqueue("shop.email", {"to": f"late{n}@example.com"}, delay=rng.uniform(5, 600))
    claim_now(app, "payments", 3, "web-2.shop.internal:2871", 600)
    claim_now(app, "reports", 1, "web-1.shop.internal:3112", 600)
    app.enqueue("reports.daily", {"day": "2026-11-29"})
    app.driver.leader_attempt_elect("maintenance", "web-1.shop.internal:3112", 60)
    app.tokens.create("grafana", "viewer")
    app.tokens.create("on-call", "operator")
    app.tokens.create("night-shift", "replayer")
    old = app.tokens.create("ci-2025", "operator")
    app.tokens.revoke("ci-2025")
    del old
    app.dlq.replay(task="shop.email", reason="MX records fixed (INC-2041)", dry_run=False, rate=5.0)
    return app, dead


def take(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    app, dead = demo(Path(tempfile.mkdtemp()) / "shop.db")
    app.tokens.create("alice", "admin")
    written = []
    with browser.serve(rota_web(app)) as url, browser.chromium(1366, 860) as d:
        d.get(f"{url}/login")
        written.append(folder / "login.png")
        d.save_screenshot(str(written[-1]))
        d.get(f"{url}/login/link?code={app.tokens.create_login_link('alice')}")
        for name, page in PAGES.items():
            d.get(url + page.format(dead=dead))
            wait(d, lambda d: d.execute_script("return document.body.dataset.ready") == "1")
            if name == "job":
                d.find_element("css selector", "#timeline summary").click()
            if name == "dead-letters":
                d.find_element("name", "task").send_keys("shop.charge")
                d.find_element("name", "reason").send_keys("gateway fixed in INC-2041")
                d.find_element("id", "dry-run").click()
                wait(d, lambda d: "Dry run" in d.find_element("id", "replay-result").text)
            # The whole page, up to a tall laptop screen's worth.
            height = d.execute_script("return document.documentElement.scrollHeight")
            d.set_window_size(1366, min(max(height + 100, 860), 1100))
            written.append(folder / f"{name}.png")
            d.save_screenshot(str(written[-1]))
            d.set_window_size(1366, 860)
    app.close()
    return written


def rota_web(app: rota.App) -> object:
    from rota.web.server import create_app

    return create_app(app)


if __name__ == "__main__":
    for shot in take(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img")):
        print(shot)
