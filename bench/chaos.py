"""Chaos run: the Seatlark shop on PostgreSQL under fire. Clients place orders over HTTP while
a random worker is SIGKILLed every couple of seconds and PostgreSQL restarts once; after the
restart, poison jobs join them (bench/chaos_poison.py: a NUL and a lone surrogate in error
messages, an exception whose str() raises, a plain task hung past its timeout); at the end
the workers get SIGTERM mid-backlog and must drain cleanly, and fresh workers finish.
It checks lost orders = 0, duplicate tickets = 0, every job terminal, no poison job stuck
and no job run twice after it succeeded, and exits 1 if not. Last, workers with the
default settings are SIGKILLed one at a time while holding long jobs, and it reports how
soon their jobs run again (p50/p99; bench/chaos_rescue.py).

    make chaos                                  # 10,000 orders, a real PostgreSQL restart
    python -m bench.chaos --orders 500 --restart terminate     # the short CI version
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import rota
from bench import chaos_poison, chaos_rescue
from examples.seatlark import harness
from examples.seatlark.harness import Client, HarnessError, Placement, Process, WorkerOptions

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
BROKEN_EVERY = 50
RESCUE_TARGET = 5.0  # seconds, p99 from a SIGKILL until the jobs run again (#17)
CLIENTS = 8
WORKER = WorkerOptions(
    queues=f"tickets=6,reports=1,{chaos_poison.QUEUE}=2",
    lease=2.0,
    grace=5.0,
    leader_ttl=2.0,
    app="bench.chaos_app:app",
)

console = Console()


@dataclass
class Figures:
    """What the run measured; written to out/chaos/result.json as well."""

    orders: int = 0
    workers: int = 0
    kills: int = 0
    kills_holding_jobs: int = 0
    unexpected_exits: int = 0
    restart: str = "none"
    restart_seconds: float | None = None
    client_retries: int = 0
    client_replays: int = 0
    placing_seconds: float = 0.0
    drain_seconds: float = 0.0  # from the last order placed to every job terminal
    sigterm_exit_codes: list[int] = field(default_factory=list)
    sigterm_seconds: float = 0.0
    running_at_sigterm: int = 0  # jobs the stopped workers were running when it arrived
    running_after_sigterm: int = 0
    total_seconds: float = 0.0
    poison: chaos_poison.PoisonAudit = field(default_factory=chaos_poison.PoisonAudit)
    rescue: chaos_rescue.RescueTimes = field(default_factory=chaos_rescue.RescueTimes)


# --- the database -----------------------------------------------------------------------------


def database_url(server: str, dbname: str) -> str:
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


def recreate_database(server: str, dbname: str) -> str:
    """A fresh database of its own: terminating its backends touches nobody else."""
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
        name = sql.Identifier(dbname)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    return database_url(server, dbname)


def drop_database(server: str, dbname: str) -> None:
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
        )


def restart_postgres(how: str, server: str, dbname: str) -> float:
    """Cut every connection of the run: restart the server (`pg_ctlcluster`) or terminate
    every backend of the chaos database (`terminate`). Returns seconds until it answers."""
    started = time.monotonic()
    if how == "pg_ctlcluster":
        versions = sorted(p.name for p in Path("/etc/postgresql").iterdir())
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "restart"],
            check=True,
            capture_output=True,
            timeout=120,
        )
    else:
        with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            )
    while True:
        try:
            with psycopg.connect(server, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return time.monotonic() - started
        except psycopg.OperationalError:
            if time.monotonic() - started > 120:
                raise HarnessError("PostgreSQL did not come back within 120 s") from None
            time.sleep(0.2)


# --- the run ----------------------------------------------------------------------------------


class Crew:
    """The worker processes: kill one at random, replace it, notice unexpected deaths."""

    def __init__(self, url: str, out: Path, size: int, rng: random.Random) -> None:
        self.url, self.out, self.rng = url, out, rng
        self.started = 0
        self.workers: list[Process] = []
        self.killed: set[str] = set()
        self.unexpected = 0
        for _ in range(size):
            self.spawn()

    def spawn(self) -> None:
        self.started += 1
        name = f"chaos-worker-{self.started}"
        self.workers.append(harness.start_worker(name, self.url, self.out, WORKER))

    def replace_dead(self) -> None:
        for worker in list(self.workers):
            if not worker.alive:
                self.unexpected += 1
                console.print(
                    f"[yellow]![/yellow] {worker.name} exited on its own:\n{worker.tail(5)}"
                )
                self.workers.remove(worker)
                self.spawn()


def backlog(shop: ModuleType) -> int | None:
    """Jobs not finished yet; None while the database is unreachable (the restart)."""
    try:
        return int(
            shop.scalar(
                "SELECT COUNT(*) FROM rota_jobs WHERE state NOT IN (?, ?, ?)",
                list(harness.TERMINAL),
            )
        )
    except (rota.RotaError, psycopg.Error):
        return None


def held_by(shop: ModuleType, worker: str) -> int:
    try:
        return int(
            shop.scalar(
                "SELECT COUNT(*) FROM rota_jobs WHERE state = 'running' AND worker = ?", [worker]
            )
        )
    except (rota.RotaError, psycopg.Error):
        return 0


def _all_started(workers: list[Process]) -> bool:
    return all(w.up for w in workers)


def run(args: argparse.Namespace, url: str, out: Path, figures: Figures) -> dict[str, int]:
    shop = harness.load_shop(url, out)
    rng = random.Random(args.seed)
    with shop.app:
        shop.app.migrate()
        shop.create_tables()
        chaos_poison.register(shop.app)
        chaos_poison.create_tables(shop.app)
        port = harness.free_port()
        api = harness.start_api(url, out, port)
        crew = Crew(url, out, args.workers, rng)
        figures.workers = args.workers
        placement = Placement()
        errors: list[BaseException] = []
        orders = [
            harness.make_order(rng, n, broken=n % BROKEN_EVERY == 0, run="chaos")
            for n in range(1, args.orders + 1)
        ]
        started = time.monotonic()
        deadline = started + args.timeout

        def client(share: list[dict[str, object]]) -> None:
            c = Client(port, timeout=30)
            try:
                for order in share:
                    harness.place(c, order, placement, deadline)
            except BaseException as exc:
                errors.append(exc)
            finally:
                c.close()

        threads = [
            threading.Thread(target=client, args=(orders[i::CLIENTS],), daemon=True)
            for i in range(CLIENTS)
        ]
        for thread in threads:
            thread.start()
        placed_at: float | None = None
        next_kill = time.monotonic() + args.kill_every
        restart_done = args.restart == "none"
        poisoned = False
        try:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            ) as progress:
                placed_bar = progress.add_task("orders placed", total=args.orders)
                done_bar = progress.add_task("jobs finished", total=args.orders)
                while True:
                    now = time.monotonic()
                    if errors:
                        raise HarnessError(f"a client failed: {errors[0]}")
                    if now > deadline:
                        raise HarnessError(f"timed out after {args.timeout:.0f} s")
                    api.check()
                    crew.replace_dead()
                    placed = len(placement.confirmed)
                    pending = backlog(shop)
                    progress.update(placed_bar, completed=placed)
                    if pending is None:
                        pending = args.orders  # unknown while the database is away
                    else:
                        progress.update(done_bar, completed=max(0, placed - pending))
                    if placed_at is None and placed == args.orders:
                        placed_at = now
                        figures.placing_seconds = now - started
                    threshold = max(20, args.orders * args.sigterm_at)
                    calm = placed_at is not None and pending <= 2 * threshold
                    # SIGTERM while the workers are busy (not between retries of the
                    # broken orders), so that the drain has running jobs to finish.
                    busy = pending == 0 or any(held_by(shop, w.name) for w in crew.workers)
                    killed_enough = figures.kills >= args.min_kills
                    if (
                        calm
                        and killed_enough
                        and pending <= threshold
                        and _all_started(crew.workers)
                        and busy
                    ):
                        break  # on to the SIGTERM drain
                    if not restart_done and placed >= args.orders / 2:
                        restart_done = True
                        figures.restart_seconds = restart_postgres(
                            args.restart, args.server, args.dbname
                        )
                        progress.console.print(
                            f"[red]↻[/red] PostgreSQL {args.restart}: answering again after "
                            f"{figures.restart_seconds:.1f} s"
                        )
                    if not poisoned and restart_done and placed >= args.orders * 0.6:
                        # After the restart, whose lost leases would blur the figures.
                        poisoned = True
                        chaos_poison.enqueue(shop.app, probes=max(20, args.orders // 100))
                        progress.console.print("[magenta]☠[/magenta] poison jobs enqueued")
                    if now >= next_kill and (not calm or not killed_enough):
                        next_kill = now + args.kill_every
                        victim = crew.rng.choice(crew.workers)
                        victim_jobs = held_by(shop, victim.name)
                        victim.kill()
                        crew.killed.add(victim.name)
                        crew.workers.remove(victim)
                        crew.spawn()
                        figures.kills += 1
                        figures.kills_holding_jobs += victim_jobs > 0
                    time.sleep(0.2)

            # SIGTERM with work still waiting: running jobs finish within the grace period,
            # nothing stays claimed, every worker exits 0. A replacement spawned a moment
            # ago may still be importing Python, before any handler exists, where SIGTERM
            # simply ends the process: kills pause near the end until each answers /livez.
            figures.running_at_sigterm = sum(held_by(shop, w.name) for w in crew.workers)
            sigterm_at = time.monotonic()
            for worker in crew.workers:  # all at once, as a deploy or a node drain does
                worker.proc.send_signal(signal.SIGTERM)
            figures.sigterm_exit_codes = [w.wait(WORKER.grace + 20) for w in crew.workers]
            figures.sigterm_seconds = time.monotonic() - sigterm_at
            # Jobs still claimed by the stopped workers (not by ones SIGKILLed before,
            # whose leases may not have expired yet).
            figures.running_after_sigterm = sum(held_by(shop, w.name) for w in crew.workers)
            console.print(
                f"[green]■[/green] SIGTERM to {len(crew.workers)} workers running "
                f"{figures.running_at_sigterm} jobs, {backlog(shop)} left in all: exit codes "
                f"{figures.sigterm_exit_codes}, {figures.sigterm_seconds:.1f} s"
            )
            finishers = [
                harness.start_worker(f"chaos-finisher-{n}", url, out, WORKER)
                for n in range(1, args.workers + 1)
            ]
            crew.workers = finishers
            harness.wait_until(lambda: backlog(shop) == 0, "the backlog to drain", args.timeout)
            assert placed_at is not None
            figures.drain_seconds = time.monotonic() - placed_at
            harness.wait_until(lambda: _all_started(finishers), "the finishers", 30)
            figures.sigterm_exit_codes += [w.stop() for w in finishers]
        finally:
            for process in [*crew.workers, api]:
                if process.alive:
                    process.stop(timeout=10)
        figures.unexpected_exits = crew.unexpected
        figures.client_retries = placement.retries
        figures.client_replays = placement.replays
        figures.orders = len(placement.confirmed)
        figures.total_seconds = time.monotonic() - started
        result = harness.audit(shop, placement.confirmed, out)
        figures.poison = chaos_poison.audit(shop.app, crew.killed)
        console.print(
            f"[red]✝[/red] rescue phase: {args.rescue_kills} SIGKILLs of workers with the "
            "default settings"
        )
        figures.rescue = chaos_rescue.measure(url, out, args.rescue_kills, rng)
    print_result(figures, result)
    return {"ok": int(_passed(figures, result)), **asdict(result)}


def _passed(figures: Figures, result: harness.Audit) -> bool:
    return (
        result.ok
        and figures.unexpected_exits == 0
        and figures.running_after_sigterm == 0
        and not any(figures.sigterm_exit_codes)
        and figures.poison.ok
    )


def print_result(figures: Figures, result: harness.Audit) -> None:
    def line(name: str, value: object, ok: bool | None = None, note: str = "") -> None:
        mark = "" if ok is None else ("[green]✓[/green] " if ok else "[red]✗[/red] ")
        console.print(f"  {mark}{name:<28} [bold]{value}[/bold] [dim]{note}[/dim]")

    console.print("\n[bold]Seatlark chaos run[/bold] on PostgreSQL")
    line("orders confirmed", f"{figures.orders:,}", None, f"by {CLIENTS} HTTP clients")
    line(
        "workers",
        figures.workers,
        None,
        f"SIGKILLed {figures.kills} times, {figures.kills_holding_jobs} holding jobs",
    )
    restart = (
        "none"
        if figures.restart_seconds is None
        else (f"{figures.restart} ({figures.restart_seconds:.1f} s)")
    )
    line("PostgreSQL restart", restart, None, f"{figures.client_retries} client retries")
    line("lost orders", result.lost, result.lost == 0)
    line("duplicate tickets", result.duplicate_tickets, result.duplicate_tickets == 0)
    line(
        "duplicate mails",
        result.duplicate_mails,
        result.duplicate_mails == 0,
        f"{result.mail_calls - result.mails} repeated calls absorbed",
    )
    line("good orders without ticket", result.unticketed, result.unticketed == 0)
    line(
        "tickets / PDFs",
        f"{result.tickets:,} / {result.pdfs:,}",
        result.tickets == result.pdfs == result.orders - result.broken,
    )
    line(
        "dead letters",
        result.dead_letters,
        result.dead_letters == result.broken,
        f"= {result.broken} orders without a seat map",
    )
    line("jobs not terminal", result.not_terminal, result.not_terminal == 0)
    poison = figures.poison
    line(
        "poison jobs stuck",
        poison.stuck,
        poison.stuck == 0 and poison.wrong_outcome == 0,
        f"of {poison.poison_jobs} (NUL, surrogate, broken str(), hung thread); "
        f"{poison.wrong_outcome} without their outcome, {poison.cut_by_kills} cut by kills",
    )
    line(
        "run twice after success",
        poison.run_twice_after_success,
        poison.run_twice_after_success == 0,
        f"{poison.probes_completed} of {poison.probes} probe jobs completed beside the poison",
    )
    line("attempts cut off", result.lost_attempts, None, "ran again elsewhere")
    rescue = figures.rescue
    if rescue.kills:
        line(
            "rescue after kill -9",
            f"p50 {rescue.p50:.2f} s · p99 {rescue.p99:.2f} s",
            rescue.p99 is not None and rescue.p99 <= RESCUE_TARGET,
            f"until each of {rescue.jobs} jobs ran again ({rescue.kills} kills, 30 s lease; "
            f"target p99 ≤ {RESCUE_TARGET:g} s; rescued as "
            + ", ".join(f"{k} {v}" for k, v in sorted(rescue.rescued_as.items()))
            + ")",
        )
    line(
        "SIGTERM drain",
        f"{figures.sigterm_seconds:.1f} s",
        not any(figures.sigterm_exit_codes) and figures.running_after_sigterm == 0,
        f"{figures.running_at_sigterm} jobs running at SIGTERM, "
        f"{figures.running_after_sigterm} left claimed; exit codes "
        f"{sorted(set(figures.sigterm_exit_codes))}",
    )
    line("workers died on their own", figures.unexpected_exits, figures.unexpected_exits == 0)
    line("placing took", f"{figures.placing_seconds:.1f} s")
    line("backlog drained", f"{figures.drain_seconds:.1f} s", None, "after the last order")
    line("total", f"{figures.total_seconds:.1f} s")
    passed = _passed(figures, result)
    console.print(
        "[green]PASSED[/green]"
        if passed
        else "[red]FAILED[/red]: " + ", ".join(result.failures() or ["worker exits or poison jobs"])
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--fault" in args or any(a.startswith("--fault=") for a in args):
        # A partition instead of kills and a restart (bench/chaos_partition.py, #21).
        from bench import chaos_partition

        return chaos_partition.main(args)
    # The pool logs each connection the restart broke; the run's own report says enough.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument("--orders", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=2.0, help="seconds between kills")
    parser.add_argument(
        "--min-kills",
        type=int,
        default=3,
        help="SIGKILLs before the SIGTERM drain, however fast the orders are done (a fast "
        "machine can finish them within a few kill intervals)",
    )
    parser.add_argument(
        "--restart",
        choices=["pg_ctlcluster", "terminate", "none"],
        default="pg_ctlcluster",
        help="how to cut PostgreSQL half-way: restart the server, or terminate every backend "
        "of the chaos database (touches nothing else)",
    )
    parser.add_argument("--server", default=DEFAULT_SERVER, help="a PostgreSQL URL to connect")
    parser.add_argument("--dbname", default="rota_chaos", help="the database it recreates")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument(
        "--sigterm-at",
        type=float,
        default=0.05,
        help="SIGTERM the workers when this share of orders is still waiting",
    )
    parser.add_argument(
        "--rescue-kills",
        type=int,
        default=20,
        help="SIGKILLs of workers with the default settings, for the rescue time (0: skip)",
    )
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--out", type=Path, default=harness.REPO / "out" / "chaos")
    args = parser.parse_args(argv)
    if args.orders < 1 or args.workers < 1:
        parser.error("--orders and --workers must be at least 1")
    out: Path = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    figures = Figures(restart=args.restart)
    try:
        url = recreate_database(args.server, args.dbname)
    except psycopg.Error as exc:
        console.print(f"[red]error:[/red] cannot create database {args.dbname}: {exc}")
        return 2
    try:
        outcome = run(args, url, out, figures)
    except (HarnessError, http.client.HTTPException, OSError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 1
    finally:
        if not args.keep:
            with contextlib.suppress(psycopg.Error):
                drop_database(args.server, args.dbname)
    (out / "result.json").write_text(
        json.dumps({"figures": asdict(figures), "audit": outcome}, indent=2) + "\n"
    )
    return 0 if outcome["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
