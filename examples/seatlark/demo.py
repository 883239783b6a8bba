"""The Seatlark demo: start the checkout API and two worker processes, place a few hundred
orders over HTTP, SIGKILL a worker while it holds jobs, run the payout report twice, and
check that every good order got exactly one ticket, one PDF and one mail, while the orders
for a show without a seat map ended in the dead letters.

    make demo                                              # SQLite, in out/seatlark.db
    python -m examples.seatlark.demo --orders 60           # a quicker run
    python -m examples.seatlark.demo --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

import psycopg
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn
from rich.table import Table

import rota
from examples.seatlark import harness
from examples.seatlark.harness import (
    APP_PATH,
    REPO,
    Audit,
    Client,
    HarnessError,
    Placement,
    Process,
    WorkerOptions,
)

BROKEN_EVERY = 25  # every 25th order is for the show without a seat map
KILL_AT = 0.4  # SIGKILL worker 1 once this share of the tickets is done
CLIENTS = 4  # concurrent HTTP clients placing orders
TIMEOUT = 120.0
DASHBOARD_URL = "http://127.0.0.1:8765/"  # where `rota dashboard` listens by default
WORKER = WorkerOptions(queues="tickets=8,reports=1", lease=2.0, grace=10.0, leader_ttl=3.0)

console = Console()


@dataclass
class Crash:
    """What the SIGKILL cut off, and how long the rescue took."""

    worker: str
    held: int
    at: float
    after: int
    rescued_after: float | None = None


@dataclass
class Story:
    """Everything the summary tells."""

    workers: list[Process] = field(default_factory=list)
    crash: Crash | None = None
    refused: list[tuple[str, int]] = field(default_factory=list)
    reports: list[rota.Job] = field(default_factory=list)
    placement: Placement = field(default_factory=Placement)
    api: Process | None = None


# --- bad requests -----------------------------------------------------------------------------


def try_bad_requests(shop: ModuleType, client: Client) -> list[tuple[str, int]]:
    """Send what a careless or hostile client might; each must be refused with a 4xx and
    leave nothing stored."""
    good = {
        "ref": "bad-input-check",
        "customer": "Ada Okafor",
        "email": "ada@example.com",
        "show": "mira-vale",
        "quantity": 2,
    }
    json_headers = {"Content-Type": "application/json"}
    tries: list[tuple[str, bytes, str, dict[str, str]]] = [
        ("malformed JSON", b'{"ref": "a1", "quantity": ', "/orders", json_headers),
        ("a 64 KiB body", b'{"customer": "' + b"A" * 65536 + b'"}', "/orders", json_headers),
        ("an unknown field", _json({**good, "discount_pct": 100}), "/orders", json_headers),
        (
            "SQL in a name",
            _json({**good, "customer": "Robert'); DROP TABLE orders;--"}),
            "/orders",
            json_headers,
        ),
        ("an unknown show", _json({**good, "show": "x' OR '1'='1"}), "/orders", json_headers),
        ("not JSON at all", b"ref=a1&quantity=2", "/orders", {"Content-Type": "text/plain"}),
    ]
    before = shop.scalar("SELECT COUNT(*) FROM orders")
    refused = []
    for what, body, path, headers in tries:
        refused.append((what, client.request("POST", path, body, headers).status))
    search = "/orders?customer=" + quote("' OR '1'='1")
    refused.append(("SQL in a search", client.request("GET", search).status))
    after = shop.scalar("SELECT COUNT(*) FROM orders")
    bad = [f"{what} got {status}" for what, status in refused if not 400 <= status < 500]
    if bad or after != before:
        raise HarnessError(
            f"bad requests were not refused cleanly: {bad}, orders {before}->{after}"
        )
    return refused


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


# --- the deploy ---------------------------------------------------------------------------


def deploy(shop: ModuleType, url: str, out: Path) -> None:
    """What a release does before its workers start: rota's migrations (which also store
    the payout report's schedule), then the shop's own as a one-off job."""
    harness.one_off(["migrate", "--app", APP_PATH], url, out)
    task = shop.migrate_shop.name
    ran = harness.one_off(
        ["run", task, "--app", APP_PATH, "--key", "shop-schema-1", "--json"], url, out
    )
    job = json.loads(ran)
    console.print(
        f"[green]✓[/green] migrated: rota's tables (rota migrate), then the shop's as "
        f"one-off job {job.get('id', '?')} (rota run …migrate_shop)"
    )


# --- the run ----------------------------------------------------------------------------------


def place_orders(port: int, count: int, seed: int, placement: Placement) -> list[Exception]:
    """Place `count` orders over HTTP from CLIENTS threads; returns the errors they met."""
    rng = random.Random(seed)
    orders = [
        harness.make_order(rng, n, broken=n % BROKEN_EVERY == 0, run="demo")
        for n in range(1, count + 1)
    ]
    errors: list[Exception] = []
    deadline = time.monotonic() + TIMEOUT

    def client_thread(share: list[dict[str, object]]) -> None:
        client = Client(port)
        try:
            for order in share:
                harness.place(client, order, placement, deadline)
        except (HarnessError, OSError, http.client.HTTPException) as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [
        threading.Thread(target=client_thread, args=(orders[i::CLIENTS],), daemon=True)
        for i in range(CLIENTS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def run(shop: ModuleType, orders: int, seed: int, out: Path, url: str, story: Story) -> None:
    app: rota.App = shop.app
    port = harness.free_port()
    story.api = harness.start_api(url, out, port)
    client = Client(port)
    try:
        story.refused = try_bad_requests(shop, client)
    finally:
        client.close()
    console.print(
        f"[green]✓[/green] checkout API on http://127.0.0.1:{port} refused "
        f"{len(story.refused)} bad requests with 4xx; nothing stored"
    )
    for n in (1, 2):
        story.workers.append(harness.start_worker(f"seatlark-worker-{n}", url, out, WORKER))

    placing = threading.Thread(
        target=lambda: errors.extend(place_orders(port, orders, seed, story.placement)),
        daemon=True,
    )
    errors: list[Exception] = []
    columns = (
        SpinnerColumn(),
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    deadline = time.monotonic() + TIMEOUT
    with Progress(*columns, console=console, transient=True) as progress:
        placed_bar = progress.add_task("orders placed over HTTP", total=orders)
        ticket_bar = progress.add_task("tickets made by 2 workers", total=orders)
        placing.start()
        while True:
            done = _tickets_done(app)
            progress.update(placed_bar, completed=len(story.placement.confirmed))
            progress.update(ticket_bar, completed=done)
            if errors:
                raise (
                    errors[0]
                    if isinstance(errors[0], HarnessError)
                    else HarnessError(f"placing orders failed: {errors[0]}")
                )
            if done >= orders and not placing.is_alive() and story.crash is not None:
                break
            for worker in story.workers:
                if story.crash is None or worker.name != story.crash.worker:
                    worker.check()
            if time.monotonic() > deadline:
                raise HarnessError(f"timed out after {TIMEOUT:.0f}s with {done}/{orders} done")
            _maybe_crash(app, story, done, orders, out, url, progress)
            time.sleep(0.1)

    twice = [app.trigger_schedule(shop.payout_report.name) for _ in range(2)]
    harness.wait_until(
        lambda: all((j := app.get_job(r.job_id or 0)) and j.state.finished for r in twice),
        "the payout report's two runs",
        30,
    )
    story.reports = [j for r in twice if (j := app.get_job(r.job_id or 0)) is not None]
    codes = {w.name: w.stop() for w in story.workers if w.alive}
    if any(codes.values()):
        raise HarnessError(f"workers exited with {codes} on SIGTERM; see their logs in {out}")


def _tickets_done(app: rota.App) -> int:
    counts: dict[str, int] = next(
        (dict(q.counts) for q in app.list_queues() if q.name == "tickets"), {}
    )
    return counts.get("completed", 0) + counts.get("discarded", 0)


def _maybe_crash(
    app: rota.App, story: Story, done: int, orders: int, out: Path, url: str, progress: Progress
) -> None:
    """SIGKILL worker 1 once enough tickets are done and it holds jobs; start worker 3."""
    crash = story.crash
    if crash is None:
        first = story.workers[0]
        held = _held_by(app, first.name)
        # Wait for a moment when worker 1 holds jobs; past 80% (a very fast machine), kill
        # it anyway so the story is always told.
        if done < orders * KILL_AT or not (held or done >= orders * 0.8):
            return
        first.kill()
        story.crash = Crash(first.name, len(held), time.monotonic(), done)
        progress.console.print(
            f"[red]✗[/red] killed {first.name} with SIGKILL after {done} of {orders} tickets, "
            f"while it held {len(held)} running job(s)"
        )
        story.workers.append(harness.start_worker("seatlark-worker-3", url, out, WORKER))
        progress.console.print(
            "[green]▶[/green] started seatlark-worker-3; the cut-off jobs wait for their "
            f"{WORKER.lease:.0f} s leases to expire, then run again"
        )
    elif crash.rescued_after is None and not _held_by(app, crash.worker):
        crash.rescued_after = time.monotonic() - crash.at
        if crash.held:
            progress.console.print(
                f"[green]✓[/green] the {crash.held} cut-off job(s) were rescued "
                f"{crash.rescued_after:.1f} s after the kill"
            )


def _held_by(app: rota.App, worker: str) -> list[rota.Job]:
    return [j for j in app.list_jobs(state="running", limit=10_000) if j.worker == worker]


# --- the summary ------------------------------------------------------------------------------


def summarise(
    shop: ModuleType, story: Story, result: Audit, where: str, url: str, out: Path, elapsed: float
) -> None:
    app: rota.App = shop.app
    crash = story.crash
    dialect = "SQLite" if url.startswith("sqlite") else "PostgreSQL"
    console.print(
        f"\n[bold]Seatlark[/bold]: {result.orders} orders in {elapsed:.1f} s on {dialect}\n"
    )

    numbers = Table.grid(padding=(0, 2))
    numbers.add_column()
    numbers.add_column(justify="right", style="bold")
    numbers.add_column(style="dim")
    placement = story.placement
    numbers.add_row(
        "orders placed",
        str(result.orders),
        f"over HTTP, {result.broken} for a show without a seat map; lost: {result.lost}",
    )
    numbers.add_row("tickets issued", str(result.tickets), "one per good order, each a PDF")
    numbers.add_row(
        "duplicate tickets",
        str(result.duplicate_tickets),
        "UNIQUE(order_id), ON CONFLICT DO NOTHING",
    )
    numbers.add_row(
        "mails delivered",
        str(result.mails),
        f"{result.mail_calls} calls; repeats absorbed by the idempotency key",
    )
    if crash is not None:
        rescued = (
            f"; rescued after {crash.rescued_after:.1f} s"
            if crash.rescued_after is not None
            else ""
        )
        numbers.add_row("cut off by SIGKILL", str(crash.held), f"running on worker 1{rescued}")
    numbers.add_row("attempts lost", str(result.lost_attempts), "ran again on another worker")
    attempts = shop.make_ticket.policy.max_attempts
    numbers.add_row(
        "dead letters", str(result.dead_letters), f"discarded after {attempts} attempts each"
    )
    if story.reports:
        first = story.reports[0].result if isinstance(story.reports[0].result, dict) else {}
        same = len({_report_key(j) for j in story.reports}) == 1
        numbers.add_row(
            "payout report",
            f"€{first.get('cents', 0) / 100:,.2f}",
            f"for {first.get('orders', 0)} orders on {first.get('date', '?')}; run "
            f"{len(story.reports)} times, "
            + ("same output" if same else "[red]outputs differ[/red]"),
        )
    if placement.retries:
        numbers.add_row("client retries", str(placement.retries), "same ref, no double orders")
    numbers.add_row(
        "checks",
        "[green]✓[/green]" if result.ok else "[red]✗[/red]",
        "each good order has exactly one ticket, PDF and mail; every job finished",
    )
    console.print(numbers)

    dead = app.list_jobs(task=shop.make_ticket.name, state="discarded", limit=5)
    if dead:
        table = Table(title="Dead letters", title_justify="left", show_edge=False)
        table.add_column("job", justify="right")
        table.add_column("attempts", justify="right")
        table.add_column("last error", overflow="fold")
        for job in sorted(dead, key=lambda j: j.id):
            last = job.history[-1] if job.history else None
            error = f"{last.error_type}: {last.message}" if last and last.error_type else "-"
            table.add_row(str(job.id), f"{job.attempt}/{job.max_attempts}", error)
        if result.dead_letters > len(dead):
            table.add_row("…", "", f"and {result.dead_letters - len(dead)} more")
        console.print()
        console.print(table)

    installed = Path(sys.executable).parent / "rota"
    rota_cli = harness.short(installed) if installed.exists() else "rota"
    place = Table.grid(padding=(0, 2))
    place.add_column(style="bold")
    place.add_column(overflow="fold")
    place.add_row("database", where)
    place.add_row("tickets (PDF)", f"{harness.short(out / 'tickets')}/ ({result.pdfs} files)")
    if story.reports and isinstance(story.reports[0].result, dict):
        place.add_row("payout report", harness.short(Path(story.reports[0].result["file"])))
    logs = [w.log for w in story.workers] + ([story.api.log] if story.api else [])
    place.add_row("logs", ", ".join(harness.short(p) for p in logs))
    place.add_row("look around", f"export ROTA_APP={APP_PATH}")
    if url != shop.DEFAULT_URL:
        place.add_row("", f"export ROTA_DATABASE_URL='{app.url.redacted()}'")
    place.add_row("", f"{rota_cli} jobs ls --state discarded")
    if dead:
        place.add_row("", f"{rota_cli} jobs show {min(j.id for j in dead)}")
    place.add_row("", f"{rota_cli} cron history {shop.payout_report.name}")
    if _has_dashboard():
        place.add_row("", f"{rota_cli} dashboard --app {APP_PATH}")
    console.print()
    console.print("[bold]Where things are[/bold]")
    console.print(place)
    if not result.ok:
        console.print(f"\n[red]check failed:[/red] {', '.join(result.failures())}\n{result}")


def _report_key(job: rota.Job) -> tuple[object, ...]:
    r = job.result if isinstance(job.result, dict) else {}
    return (r.get("date"), r.get("orders"), r.get("cents"), str(r.get("shows")))


def _has_dashboard() -> bool:
    """Whether this rota has the `rota dashboard` command (it is optional here)."""
    try:
        from rota.cli.main import cli
    except ImportError:
        return False
    return "dashboard" in getattr(cli, "commands", {})


def dashboard_line(url: str | None) -> str | None:
    """The dashboard's address if one answers there (it is optional)."""
    if not url:
        return None
    from urllib.request import urlopen

    try:
        with urlopen(url, timeout=1) as response:
            return url if response.status < 500 else None
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.seatlark.demo", description=__doc__)
    parser.add_argument("--orders", type=int, default=300, help="orders to place (default 300)")
    parser.add_argument(
        "--database-url",
        help="sqlite:///file.db or postgresql://... (default: SQLite in the --out directory)",
    )
    parser.add_argument(
        "--schema",
        default="seatlark_demo",
        help="PostgreSQL only: the schema the demo drops and recreates (default seatlark_demo)",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "out", help="where the database, PDFs and logs go"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed for the generated orders")
    parser.add_argument(
        "--dashboard-url",
        default=DASHBOARD_URL,
        help=f"print this dashboard address if one answers there (default {DASHBOARD_URL})",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.orders <= 100_000:
        parser.error("--orders must be from 1 to 100000")
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in ("tickets", "reports"):
        shutil.rmtree(out / old, ignore_errors=True)
    started = time.monotonic()
    url = args.database_url or f"sqlite:///{out / 'seatlark.db'}"
    try:
        if url.startswith("sqlite:"):
            where = harness.short(harness.reset_sqlite(url))
        else:
            url = harness.reset_schema(url, args.schema)
            where = f"schema {args.schema} on PostgreSQL"
    except psycopg.Error as exc:
        console.print(f"[red]error:[/red] cannot prepare the PostgreSQL schema: {exc}")
        return 1
    shop = harness.load_shop(url, out)
    story = Story()
    with shop.app:
        try:
            deploy(shop, url, out)
            run(shop, args.orders, args.seed, out, url, story)
        except HarnessError as exc:
            console.print(f"[red]error:[/red] {exc}")
            if story.api is not None and "500" in str(exc):
                console.print(f"the API's log ends:\n{story.api.tail(8)}", markup=False)
            return 1
        except KeyboardInterrupt:
            console.print("interrupted; the workers were stopped")
            return 130
        finally:  # on errors and Ctrl-C: leave no process behind
            for process in [*story.workers, *([story.api] if story.api else [])]:
                if process.alive:
                    process.stop(timeout=15)
        result = harness.audit(shop, story.placement.confirmed, out)
        summarise(shop, story, result, where, url, out, time.monotonic() - started)
    dashboard = dashboard_line(args.dashboard_url)
    if dashboard:
        console.print(f"[bold]dashboard[/bold]      {dashboard}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
