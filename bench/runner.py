"""The benchmark's command line and the order of measurements: for each run, for each
database, every measurement on a fresh database, with the raw-SQL baseline in the same run
as the rota worker it is compared with."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

import rota
from bench import raw, report, rota_runs, tasks
from bench.child import run_in_child
from bench.db import BenchError, Database, check_drained, fresh_database, prefill, server_version

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
SCENARIOS = ("enqueue", "drain", "latency")
DRAIN_TIMEOUT = 300.0


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
        "rota": rota.__version__,
        "sqlite dir fs": _filesystem(args.tmpdir or tempfile.gettempdir()),
    }
    if pg_version:
        info["postgresql"] = pg_version
    if hasattr(os, "getloadavg"):
        info["load at start"] = f"{os.getloadavg()[0]:.2f}"
    return info


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

    def database(self, dialect: str) -> Any:
        return fresh_database(dialect, pg_url=self.args.postgres_url, tmpdir=self.args.tmpdir)

    def note(self, dialect: str, label: str, text: str) -> None:
        self.console.print(f"  {report.DIALECT_TITLES[dialect]:<10} {label:<28} {text}")

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
        jobs = self.args.jobs
        plan: list[tuple[str, str, str, Callable[[Database], dict[str, Any]]]] = [
            ("drain_baseline", "drain, raw baseline", tasks.NOOP_ASYNC, self._raw("lean")),
            ("drain_async", "drain, rota async", tasks.NOOP_ASYNC, self._rota),
            ("drain_sync", "drain, rota sync", tasks.NOOP_SYNC, self._rota),
            ("drain_rota_sql", "drain, raw loop rota SQL", tasks.NOOP_ASYNC, self._raw("rota")),
        ]
        for key, label, task_name, measure in plan:
            with self.database(dialect) as db:
                prefill(db, task_name, jobs)
                result = measure(db)
                check_drained(db, jobs, label)
            values[key] = jobs / result["elapsed"]
            if key == "drain_async":
                values["claim_size_async"] = jobs / max(result["batches"], 1)
            self.note(
                dialect,
                label,
                f"{values[key]:,.0f} jobs/s ({result['elapsed']:.2f}s, "
                f"{result['batches']} claims)",
            )
        base = values["drain_baseline"]
        values["ratio_async"] = values["drain_async"] / base
        values["ratio_sync"] = values["drain_sync"] / base
        values["ratio_rota_sql"] = values["drain_rota_sql"] / base
        self.note(
            dialect,
            "rota / baseline",
            f"async {values['ratio_async']:.0%}, sync {values['ratio_sync']:.0%}",
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
            f"[yellow]PostgreSQL at {args.postgres_url} is unreachable: "
            "benchmarking SQLite only[/]"
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
    started = time.perf_counter()
    try:
        for n in range(args.runs):
            progress.print(f"[bold]run {n + 1}/{args.runs}[/]")
            runs.append({dialect: bench.run_once(dialect) for dialect in dialects})
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
        }
        text = json.dumps(document, indent=2)
        if to_stdout:
            sys.stdout.write(text + "\n")
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    if not to_stdout:
        report.print_report(Console(highlight=False), summary, args.runs, machine, settings)
    return 0
