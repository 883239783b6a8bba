"""The benchmark's command line and the order of measurements: for each run, for each
database, every measurement on a fresh database, with the raw-SQL baseline in the same run
as the rota worker it is compared with."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console

import rota
from bench import raw, report, rota_runs, tasks
from bench.child import run_in_child
from bench.db import BenchError, Database, check_drained, fresh_database, prefill, server_version

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
SCENARIOS = ("enqueue", "drain", "latency")
DRAIN_TIMEOUT = 300.0
QUIET = 0.25  # CPU busy with other work above which a run waits (up to --quiet-wait)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="rota throughput and latency on SQLite and PostgreSQL, beside a raw-SQL "
        "baseline. Prints medians over --runs runs.",
    )
    parser.add_argument("--dialect", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=None, help="jobs per drain (20000)")
    parser.add_argument("--runs", type=int, default=None, help="runs; medians reported (3)")
    parser.add_argument(
        "--single", type=int, default=None, help="jobs for the single-enqueue loop (jobs/10)"
    )
    parser.add_argument("--samples", type=int, default=None, help="latency samples (300)")
    parser.add_argument(
        "--quick", action="store_true", help="small numbers and one run: a smoke test"
    )
    parser.add_argument(
        "--only", choices=SCENARIOS, action="append", help="run only these (repeatable)"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("ROTA_BENCH_POSTGRES_URL")
        or os.environ.get("ROTA_TEST_POSTGRES_URL")
        or DEFAULT_PG_URL,
        help="server for the PostgreSQL runs; each measurement gets a fresh schema "
        "(default: $ROTA_BENCH_POSTGRES_URL, $ROTA_TEST_POSTGRES_URL or the local `test` db)",
    )
    parser.add_argument(
        "--tmpdir", default=None, help="where the SQLite files go (default: the system temp)"
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="before each run, wait up to this long for other processes to go quiet "
        "(20; --quick: 0)",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="PATH",
        help="write the results as JSON to PATH (or stdout, instead of the tables)",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    args.jobs = args.jobs or (2_000 if quick else 20_000)
    args.runs = args.runs or (1 if quick else 3)
    args.single = args.single or max(100, args.jobs // 10)
    args.samples = args.samples or (50 if quick else 300)
    if args.quiet_wait is None:
        args.quiet_wait = 0.0 if quick else 20.0
    for name in ("jobs", "runs", "single", "samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    return args


def machine_info(args: argparse.Namespace, pg_version: str | None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "psycopg": psycopg.__version__,
        "rota": _rota_revision(),
        "sqlite dir fs": _filesystem(args.tmpdir or tempfile.gettempdir()),
    }
    if pg_version:
        info["postgresql"] = pg_version
    if hasattr(os, "getloadavg"):
        info["load at start"] = f"{os.getloadavg()[0]:.2f}"
    return info


def _rota_revision() -> str:
    """rota's version, and the git commit of its source when it runs from a checkout
    (`+dirty` when src/ has uncommitted changes: the numbers are not of that commit)."""
    source = Path(rota.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"{rota.__version__} ({source})"
    return f"{rota.__version__} {commit}{'+dirty' if dirty else ''}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _filesystem(path: str) -> str:
    """The filesystem type under `path` (best effort, Linux): tmpfs makes fsync free."""
    try:
        mounts = [ln.split() for ln in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best = ("", "unknown")
    for fields in mounts:
        if len(fields) >= 3 and real.startswith(fields[1]) and len(fields[1]) > len(best[0]):
            best = (fields[1], fields[2])
    return best[1]


class Bench:
    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        self.args = args
        self.console = console

    def database(self, dialect: str) -> contextlib.AbstractContextManager[Database]:
        return fresh_database(dialect, pg_url=self.args.postgres_url, tmpdir=self.args.tmpdir)

    def note(self, dialect: str, label: str, text: str) -> None:
        self.console.print(
            f"  {report.DIALECT_TITLES[dialect]:<10} {label:<28} {text}", soft_wrap=True
        )

    def run_once(self, dialect: str) -> dict[str, float]:
        only = self.args.only or SCENARIOS
        values: dict[str, float] = {}
        if "enqueue" in only:
            self.enqueue(dialect, values)
        if "drain" in only:
            self.drains(dialect, values)
        if "latency" in only:
            self.latency(dialect, values)
        return values

    def enqueue(self, dialect: str, values: dict[str, float]) -> None:
        with self.database(dialect) as db:
            values["enqueue_single"] = rota_runs.enqueue_single(db, self.args.single)
        self.note(dialect, "enqueue, single", f"{values['enqueue_single']:,.0f} jobs/s")
        with self.database(dialect) as db:
            values["enqueue_bulk"] = rota_runs.enqueue_bulk(db, self.args.jobs)
        self.note(dialect, "enqueue, bulk x1000", f"{values['enqueue_bulk']:,.0f} jobs/s")

    def drains(self, dialect: str, values: dict[str, float]) -> None:
        plan: list[tuple[str, str, str, Callable[[Database], dict[str, Any]]]] = [
            ("baseline", "drain, raw baseline", tasks.NOOP_ASYNC, self._raw("lean")),
            ("async", "drain, rota async", tasks.NOOP_ASYNC, self._rota),
            ("sync", "drain, rota sync", tasks.NOOP_SYNC, self._rota),
            ("rota_sql", "drain, raw loop rota SQL", tasks.NOOP_ASYNC, self._raw("rota")),
        ]
        for name, label, task_name, measure in plan:
            try:
                self.drain(dialect, values, name, label, task_name, measure)
            except BenchError as exc:
                if name != "rota_sql":
                    raise
                # A diagnostic built on rota's internal query names: a change there should
                # not cost the whole benchmark.
                self.note(dialect, label, f"[yellow]skipped: {str(exc).splitlines()[-1]}[/]")
        base = values["drain_baseline"]
        for name in ("async", "sync", "rota_sql"):
            if f"drain_{name}" in values:
                values[f"ratio_{name}"] = values[f"drain_{name}"] / base
        self.note(
            dialect,
            "rota / baseline",
            f"async {values['ratio_async']:.0%}, sync {values['ratio_sync']:.0%}",
        )

    def drain(
        self,
        dialect: str,
        values: dict[str, float],
        name: str,
        label: str,
        task_name: str,
        measure: Callable[[Database], dict[str, Any]],
    ) -> None:
        jobs = self.args.jobs
        with self.database(dialect) as db:
            prefill(db, task_name, jobs)
            result = measure(db)
            check_drained(db, jobs, label)
        values[f"drain_{name}"] = jobs / result["elapsed"]
        values[f"claim_size_{name}"] = jobs / max(result["batches"], 1)
        values[f"cpu_us_{name}"] = result["cpu"] / jobs * 1e6
        self.note(
            dialect,
            label,
            f"{values[f'drain_{name}']:,.0f} jobs/s ({result['elapsed']:.2f}s, "
            f"{result['batches']} claims, client CPU {values[f'cpu_us_{name}']:.0f} us/job, "
            f"{result['cpu'] / result['elapsed']:.0%} of a core)",
        )

    def _raw(self, variant: str) -> Callable[[Database], dict[str, Any]]:
        def measure(db: Database) -> dict[str, Any]:
            result: dict[str, Any] = run_in_child(
                raw.drain_child,
                db.dialect,
                db.url,
                db.sqlite_path,
                variant,
                self.args.jobs,
                timeout=DRAIN_TIMEOUT,
            )
            return result

        return measure

    def _rota(self, db: Database) -> dict[str, Any]:
        result: dict[str, Any] = run_in_child(
            rota_runs.drain_child, db.url, self.args.jobs, DRAIN_TIMEOUT, timeout=DRAIN_TIMEOUT + 60
        )
        return result

    def latency(self, dialect: str, values: dict[str, float]) -> None:
        with self.database(dialect) as db:
            samples = rota_runs.latency(db, self.args.samples)
        values.update(report.latency_metrics(samples["from_call"], samples["from_commit"]))
        self.note(
            dialect,
            "enqueue-to-start",
            f"p50 {values['latency_p50']:.2f} ms, p95 {values['latency_p95']:.2f} ms, "
            f"p99 {values['latency_p99']:.2f} ms",
        )


def cpu_busy(window: float = 0.5) -> float | None:
    """The fraction of all cores busy over `window` seconds (Linux /proc/stat), or None."""

    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait

    try:
        total0, idle0 = sample()
        time.sleep(window)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return None if total <= 0 else 1 - (idle1 - idle0) / total


def wait_for_quiet(console: Console, limit: float) -> float | None:
    """Between measurements nothing of ours runs, so busy CPU is someone else's: wait up
    to `limit` seconds for it to drop under QUIET, and return what was seen last."""
    deadline = time.monotonic() + limit
    busy = cpu_busy()
    waited = False
    while busy is not None and busy > QUIET and time.monotonic() < deadline:
        if not waited:
            console.print(
                f"  [yellow]the machine is busy ({busy:.0%} CPU used by other processes): "
                f"waiting up to {limit:.0f}s[/]"
            )
            waited = True
        time.sleep(1.0)
        busy = cpu_busy()
    if busy is not None and busy > QUIET:
        console.print(
            f"  [yellow]{'still busy' if waited else 'the machine is busy'} ({busy:.0%} CPU "
            "used by other processes): numbers from this run may be low[/]"
        )
    return busy


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    to_stdout = args.json == "-"
    progress = Console(stderr=True, highlight=False)
    dialects = ["sqlite", "postgres"] if args.dialect == "both" else [args.dialect]
    pg_version = server_version(args.postgres_url) if "postgres" in dialects else None
    if "postgres" in dialects and pg_version is None:
        if args.dialect == "postgres":
            progress.print(f"[red]PostgreSQL at {args.postgres_url} is unreachable[/]")
            return 2
        progress.print(
            f"[yellow]PostgreSQL at {args.postgres_url} is unreachable: benchmarking SQLite only[/]"
        )
        dialects.remove("postgres")
    machine = machine_info(args, pg_version)
    settings = {
        "jobs": args.jobs,
        "runs": args.runs,
        "single_enqueues": args.single,
        "latency_samples": args.samples,
        "bulk_batch": rota_runs.BULK_BATCH,
        "concurrency": rota_runs.CONCURRENCY,
        "fetch_batch": rota_runs.FETCH_BATCH,
        "baseline_batch": raw.BATCH,
    }
    bench = Bench(args, progress)
    runs: list[dict[str, dict[str, float]]] = []
    busy: list[dict[str, float | None]] = []
    started = time.perf_counter()
    try:
        for n in range(args.runs):
            progress.print(f"[bold]run {n + 1}/{args.runs}[/]")
            run: dict[str, dict[str, float]] = {}
            busy.append({})
            for dialect in dialects:
                busy[-1][dialect] = wait_for_quiet(progress, args.quiet_wait)
                run[dialect] = bench.run_once(dialect)
            runs.append(run)
    except BenchError as exc:
        progress.print(f"[red]benchmark failed: {exc}[/]")
        return 1
    except KeyboardInterrupt:
        progress.print("[yellow]interrupted[/]")
        return 130
    progress.print(f"[dim]took {time.perf_counter() - started:.0f}s[/]")
    summary = report.medians(runs)
    if args.json is not None:
        document = {
            "machine": machine,
            "settings": settings,
            "medians": summary,
            "targets": report.evaluate(summary),
            "runs": runs,
            "cpu_busy_before": busy,
        }
        text = json.dumps(document, indent=2)
        if to_stdout:
            sys.stdout.write(text + "\n")
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    if not to_stdout:
        report.print_report(Console(highlight=False), summary, args.runs, machine, settings, busy)
    return 0
