"""The Seatlark demo: place orders, run a real worker process, kill it with SIGKILL mid-way,
start another, and check that every good order got exactly one ticket while every broken one
ended in the dead letters with its error.

    make demo                                              # SQLite, in out/seatlark.db
    python -m examples.seatlark.demo --orders 30           # a quicker run
    python -m examples.seatlark.demo --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import psycopg
from psycopg import sql
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn
from rich.table import Table

import rota

REPO = Path(__file__).resolve().parents[2]
APP_PATH = "examples.seatlark.shop:app"
QUEUES = "tickets=8,reports=1"
# A short lease so the demo does not wait the default 30 s for a dead worker's jobs.
LEASE_SECONDS = 2.0
KILL_AT = 0.4  # SIGKILL worker 1 once this share of the orders is done
BROKEN_EVERY = 17  # every 17th order has a negative quantity
TIMEOUT = 120.0
SHOWS = [
    ("Nightjar Quartet", 4500),
    ("The Lantern Choir", 3200),
    ("Harbour Lights Orchestra", 6800),
    ("Mira Vale", 2900),
    ("Static Orchards", 3900),
]
FIRST = ["Ada", "Bo", "Chen", "Dara", "Emeka", "Freya", "Goran", "Hana", "Ivo", "Jun", "Lea"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Sato", "Novak", "Reyes", "Haddad", "Byrne"]

console = Console()


class DemoError(Exception):
    """Something went wrong that the reader should see in one line."""


@dataclass
class WorkerProcess:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


# --- the database ---------------------------------------------------------------------------


def prepare_database(url: str | None, out: Path, schema: str) -> tuple[str, str]:
    """Empty the demo's database and return its URL and a short "where it is"."""
    if url is None:
        url = f"sqlite:///{out / 'seatlark.db'}"
    if url.startswith("sqlite:"):
        path = Path(urlsplit(url).path[1:])
        for suffix in ("", "-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        return url, _short(path)
    # PostgreSQL: the demo works in a schema of its own, which it drops and recreates.
    url = _with_search_path(url, schema)
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    host = urlsplit(url).hostname or "localhost"
    return url, f"schema {schema} on PostgreSQL at {host}"


def _with_search_path(url: str, schema: str) -> str:
    """`url` with its search_path (in the libpq `options` parameter) set to `schema`."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    options = re.sub(r"-c\s*search_path=\S+", "", query.get("options", "")).strip()
    query["options"] = f"{options} -csearch_path={schema}".strip()
    return parts._replace(query=urlencode(query, quote_via=quote)).geturl()


def _short(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def place_orders(shop: ModuleType, count: int, seed: int) -> int:
    """Place `count` orders, each in its own transaction with its ticket job; return how
    many are broken (negative quantity: they fail in the worker and end as dead letters)."""
    rng = random.Random(seed)
    broken = 0
    conn = shop.connect()
    try:
        for n in range(1, count + 1):
            show, price = rng.choice(SHOWS)
            quantity = rng.randint(1, 4)
            if n % BROKEN_EVERY == 0:
                quantity = -quantity
                broken += 1
            with shop.transaction(conn):
                shop.checkout(
                    conn,
                    customer=f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                    show=show,
                    quantity=quantity,
                    price_cents=price,
                )
    finally:
        conn.close()
    return broken


def scalar(shop: ModuleType, query: str) -> int:
    conn = shop.connect()
    try:
        return int(shop.execute(conn, query).fetchone()[0] or 0)
    finally:
        conn.close()


# --- worker processes -----------------------------------------------------------------------


def start_worker(number: int, out: Path, url: str) -> WorkerProcess:
    name = f"seatlark-worker-{number}"
    log = out / f"{name}.log"
    argv = [
        sys.executable,
        "-m",
        "rota",
        "worker",
        "--app",
        APP_PATH,
        "--queues",
        QUEUES,
        "--lease",
        str(LEASE_SECONDS),
        "--worker-id",
        name,
        # A killed worker may have been the leader: hand leadership over within 3 s.
        "--leader-ttl",
        "3",
        "--rescue-interval",
        "0.5",
    ]
    env = {**os.environ, "ROTA_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT)
    return WorkerProcess(name, proc, log)


def check_alive(worker: WorkerProcess) -> None:
    code = worker.proc.poll()
    if code is not None:
        tail = worker.log.read_text(errors="replace").strip().splitlines()[-15:]
        raise DemoError(f"{worker.name} exited with status {code}:\n" + "\n".join(tail))


def stop(worker: WorkerProcess, timeout: float = 20.0) -> int:
    """SIGTERM: the worker finishes what it runs (grace period), then exits."""
    if worker.proc.poll() is None:
        worker.proc.send_signal(signal.SIGTERM)
        try:
            worker.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait()
    return worker.proc.returncode


def wait_until(check: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


# --- the run --------------------------------------------------------------------------------


@dataclass
class Crash:
    """What the SIGKILL cut off, and how long the rescue took."""

    worker: str
    lost: int
    at: float
    rescued_after: float | None = None


@dataclass
class Run:
    """The workers that ran, the crash, and the payout report's job."""

    workers: list[WorkerProcess]
    crash: Crash | None
    report_id: int


def run_tickets(shop: ModuleType, orders: int, out: Path, url: str) -> Run:
    """Run worker 1, SIGKILL it mid-way, start worker 2, and wait until every ticket job has
    finished; then run the payout report and stop worker 2 with SIGTERM."""
    app: rota.App = shop.app
    workers = [start_worker(1, out, url)]
    crash: Crash | None = None
    try:
        columns = (
            SpinnerColumn(),
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        deadline = time.monotonic() + TIMEOUT
        with Progress(*columns, console=console, transient=True) as progress:
            bar = progress.add_task("worker 1 is making tickets", total=orders)
            while True:
                counts = next((q.counts for q in app.list_queues() if q.name == "tickets"), {})
                done = counts.get("completed", 0) + counts.get("discarded", 0)
                progress.update(bar, completed=done)
                if done >= orders:
                    break
                for worker in workers:
                    if crash is None or worker.name != crash.worker:
                        check_alive(worker)
                if time.monotonic() > deadline:
                    raise DemoError(f"timed out after {TIMEOUT:.0f}s with {done}/{orders} done")

                if crash is None and done >= orders * KILL_AT:
                    first = workers[0]
                    os.kill(first.proc.pid, signal.SIGKILL)
                    first.proc.wait()
                    crash = Crash(first.name, len(_held_by(app, first.name)), time.monotonic())
                    progress.console.print(
                        f"[red]✗[/red] killed {first.name} (SIGKILL) after {done} of {orders} "
                        f"orders, holding {crash.lost} running job(s)"
                    )
                    workers.append(start_worker(2, out, url))
                    progress.console.print(
                        "[green]▶[/green] started seatlark-worker-2; the lost jobs wait for their "
                        f"{LEASE_SECONDS:.0f} s leases and for worker 1's maintenance leadership "
                        "to expire (~15 s)"
                    )
                elif crash is not None and crash.rescued_after is None:
                    waited = time.monotonic() - crash.at
                    if _held_by(app, crash.worker):
                        progress.update(
                            bar, description=f"worker 2 waits to rescue lost jobs ({waited:.0f} s)"
                        )
                    else:
                        crash.rescued_after = waited
                        if crash.lost:
                            progress.console.print(
                                f"[green]✓[/green] seatlark-worker-2 rescued the {crash.lost} "
                                f"lost job(s) {waited:.1f} s after the kill"
                            )
                        progress.update(bar, description="worker 2 is making tickets")
                time.sleep(0.1)

        report = shop.payout_report.enqueue()
        wait_until(
            lambda: (job := app.get_job(report.id)) is not None and job.state.finished,
            "the payout report",
            30,
        )
        codes = [stop(w) for w in workers if crash is None or w.name != crash.worker]
        if any(codes):
            raise DemoError(f"a worker exited with status {codes} on SIGTERM; see {out}")
        return Run(workers, crash, report.id)
    finally:
        for worker in workers:  # on errors and Ctrl-C: leave no worker behind
            if worker.proc.poll() is None:
                stop(worker, timeout=5)


def _held_by(app: rota.App, worker: str) -> list[rota.Job]:
    return [j for j in app.list_jobs(state="running", limit=10_000) if j.worker == worker]


# --- the summary ----------------------------------------------------------------------------


def summarise(shop: ModuleType, run: Run, where: str, url: str, elapsed: float) -> bool:
    """Print what happened; return False if a check failed."""
    app: rota.App = shop.app
    crash = run.crash
    jobs = app.list_jobs(task=shop.make_ticket.name, limit=10_000)
    orders = scalar(shop, "SELECT COUNT(*) FROM orders")
    broken = scalar(shop, "SELECT COUNT(*) FROM orders WHERE quantity < 1")
    tickets = scalar(shop, "SELECT COUNT(*) FROM tickets")
    duplicates = scalar(shop, "SELECT COUNT(*) - COUNT(DISTINCT order_id) FROM tickets")
    unticketed = scalar(
        shop, "SELECT COUNT(*) FROM orders WHERE quantity >= 1 AND status <> 'ticketed'"
    )
    mismatched = scalar(
        shop,
        "SELECT COUNT(*) FROM orders o JOIN tickets t ON t.order_id = o.id "
        "WHERE o.ticket_code <> t.code",
    )
    dead = sorted(
        (j for j in jobs if j.state is rota.JobState.DISCARDED), key=lambda j: j.args["order_id"]
    )
    rerun = [j for j in jobs if any(a.outcome is rota.Outcome.LOST for a in j.history)]
    reused = [j for j in jobs if isinstance(j.result, dict) and j.result.get("reused")]
    report = app.get_job(run.report_id)
    payout = report.result if report is not None and isinstance(report.result, dict) else {}

    ok = (
        duplicates == 0
        and unticketed == 0
        and mismatched == 0
        and tickets == orders - broken
        and len(dead) == broken
    )
    dialect = "SQLite" if url.startswith("sqlite") else "PostgreSQL"
    console.print(f"\n[bold]Seatlark[/bold]: {orders} orders in {elapsed:.1f} s on {dialect}\n")

    numbers = Table.grid(padding=(0, 2))
    numbers.add_column()
    numbers.add_column(justify="right", style="bold")
    numbers.add_column(style="dim")
    numbers.add_row("orders placed", str(orders), f"{broken} broken on purpose (quantity < 1)")
    numbers.add_row("tickets issued", str(tickets), "one per good order")
    numbers.add_row(
        "duplicate tickets", str(duplicates), "UNIQUE(order_id), ON CONFLICT DO NOTHING"
    )
    if crash is not None:
        rescued = f"; rescued after {crash.rescued_after:.1f} s" if crash.lost else ""
        numbers.add_row("cut off by SIGKILL", str(crash.lost), f"running on worker 1{rescued}")
    numbers.add_row(
        "re-run after the crash",
        str(len(rerun)),
        f"{len(reused)} reused the ticket reserved before the kill",
    )
    attempts = shop.make_ticket.policy.max_attempts
    numbers.add_row("dead letters", str(len(dead)), f"discarded after {attempts} attempts")
    numbers.add_row(
        "payout report",
        f"€{payout.get('cents', 0) / 100:,.2f}",
        f"for {payout.get('orders', 0)} ticketed orders",
    )
    numbers.add_row(
        "checks",
        "[green]✓[/green]" if ok else "[red]✗[/red]",
        "each good order has exactly one ticket",
    )
    console.print(numbers)

    if dead:
        table = Table(title="Dead letters", title_justify="left", show_edge=False)
        table.add_column("job", justify="right")
        table.add_column("attempts", justify="right")
        table.add_column("last error", overflow="fold")
        for job in dead[:5]:
            last = job.history[-1] if job.history else None
            error = f"{last.error_type}: {last.message}" if last and last.error_type else "-"
            table.add_row(str(job.id), f"{job.attempt}/{job.max_attempts}", error)
        if len(dead) > 5:
            table.add_row("…", "", f"and {len(dead) - 5} more")
        console.print()
        console.print(table)

    installed = Path(sys.executable).parent / "rota"
    rota_cli = _short(installed) if installed.exists() else "rota"
    place = Table.grid(padding=(0, 2))
    place.add_column(style="bold")
    place.add_column(overflow="fold")
    place.add_row("database", where)
    place.add_row("worker logs", ", ".join(_short(w.log) for w in run.workers))
    place.add_row("look around", f"export ROTA_APP={APP_PATH}")
    if url != shop.DEFAULT_URL:
        place.add_row("", f"export ROTA_DATABASE_URL='{app.url.redacted()}'")
    place.add_row("", f"{rota_cli} jobs ls --state discarded")
    if dead:
        place.add_row("", f"{rota_cli} jobs show {dead[0].id}")
    place.add_row("", f"{rota_cli} queues ls")
    console.print()
    console.print("[bold]Where things are[/bold]")
    console.print(place)
    if not ok:
        console.print(
            f"\n[red]check failed:[/red] duplicates={duplicates} unticketed={unticketed} "
            f"mismatched={mismatched} tickets={tickets} dead={len(dead)} broken={broken}"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.seatlark.demo", description=__doc__)
    parser.add_argument("--orders", type=int, default=200, help="orders to place (default 200)")
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
        "--out", type=Path, default=REPO / "out", help="where the SQLite file and logs go"
    )
    parser.add_argument("--seed", type=int, default=7, help="seed for the generated orders")
    args = parser.parse_args(argv)
    if args.orders < 1:
        parser.error("--orders must be at least 1")
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        url, where = prepare_database(args.database_url, out, args.schema)
    except psycopg.Error as exc:
        console.print(f"[red]error:[/red] cannot prepare the PostgreSQL schema: {exc}")
        return 1
    # The shop module (and the workers) read the URL from the environment when imported.
    os.environ["ROTA_DATABASE_URL"] = url
    from examples.seatlark import shop

    with shop.app:
        shop.app.migrate()
        shop.create_tables()
        broken = place_orders(shop, args.orders, args.seed)
        console.print(
            f"[green]✓[/green] placed {args.orders} orders ({broken} broken), each in one "
            "transaction with its ticket job"
        )
        try:
            run = run_tickets(shop, args.orders, out, url)
        except DemoError as exc:
            console.print(f"[red]error:[/red] {exc}")
            return 1
        except KeyboardInterrupt:
            console.print("interrupted; the workers were stopped")
            return 130
        ok = summarise(shop, run, where, url, time.monotonic() - started)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
