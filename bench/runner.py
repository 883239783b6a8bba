"""The benchmark's command line and the order of measurements: for each run, for each
database, every measurement on a fresh database, with the raw-SQL baseline and the peers
(pgqueuer, huey) in the same run as the rota worker they are compared with."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from rich.console import Console

import rota
from bench import cli, features, peers, raw, reads, report, rota_runs, sizes, tasks
from bench.child import run_in_child
from bench.db import (
    BenchError,
    Database,
    check_drained,
    checkpoint,
    clear_queue,
    fresh_database,
    prefill,
    server_version,
)

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
SCENARIOS = ("enqueue", "drain", "latency", "features", "sizes", "idle")
DRAIN_TIMEOUT = 300.0
QUIET = 0.25  # CPU busy with other work above which a run waits (up to --quiet-wait)

# The CLI worker's best settings on this machine (`python -m bench --sweep`, 3 December
# 2026, bench/results/2026-12-03-s8-sweep.*, see docs/benchmarks.md): 400 slots and two
# processes (one per core) on both dialects. A claim takes min(free slots, --fetch-batch,
# 1000 by default), so 400 slots claim 400 jobs a round trip: 1.5x (SQLite) and 1.2x
# (PostgreSQL) the drain of 100 slots; 800 ties with 400 within the noise.
CLI_CONCURRENCY = {"sqlite": 400, "postgres": 400}
CLI_PROCESSES = {"sqlite": 2, "postgres": 2}
# The peers' best settings on this machine (the same sweep). pgqueuer's own benchmark
# documents 5 consumers x batch 10 with asyncpg and uvloop; huey's consumer runs threads,
# and one drains no-op jobs fastest (its threads contend for the SQLite file).
PGQUEUER_CONSUMERS = 5
PGQUEUER_BATCH = 100
HUEY_WORKERS = 1
DEFAULT_FINISHED = (200_000,)
QUICK_FINISHED = (20_000,)


_SUFFIX = {"k": 1_000, "m": 1_000_000}


def _size(part: str) -> int:
    """`200000`, `2e5`, `200k` or `1M`."""
    part = part.strip().lower()
    scale = _SUFFIX.get(part[-1:], 1)
    return int(float(part[:-1] if scale > 1 else part) * scale)


def _sizes(text: str) -> list[int]:
    try:
        values = [_size(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use numbers, e.g. 0,200000,1e6") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError("sizes must be >= 0")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="rota throughput and latency on SQLite and PostgreSQL, beside a raw-SQL "
        "baseline and the fastest Python peers (pgqueuer, huey). Prints medians over --runs "
        "runs and the targets of issues 16 and 23.",
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
        "--no-peers", action="store_true", help="leave out pgqueuer and huey (no venvs made)"
    )
    parser.add_argument(
        "--no-in-process",
        action="store_true",
        help="leave out the in-process rota.Worker drains (kept for profiling)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="the CLI worker's --queues bench=C (default: the best found, per dialect)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="the CLI worker's --processes (default: the best found, 2)",
    )
    parser.add_argument(
        "--finished",
        type=_sizes,
        action="append",
        metavar="N[,N...]",
        help="size scenarios: finished jobs in the table besides the empty one; repeatable "
        f"(default {','.join(map(str, DEFAULT_FINISHED))}; --quick "
        f"{','.join(map(str, QUICK_FINISHED))}; 1e6 and 1e7 only when asked)",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=None,
        metavar="N[,N...]",
        help="the size curve alone (issue 23): the size scenarios beside these numbers of "
        "finished jobs, made with SQL, e.g. 0,1M,10M (10M takes a while), each with the "
        "drain, the enqueue rates, the latency and the dashboard and /metrics read times; "
        "short for --only sizes --finished ...",
    )
    parser.add_argument(
        "--lived",
        nargs="?",
        const="both",
        choices=("both", "completed", "dead"),
        help="size scenarios beside a history run through rota (a worker fed steadily on "
        "the `history` queue, about 3 minutes per million jobs): completed no-op jobs, then "
        "dead letters of a task that fails at once (`--lived completed` or `--lived dead` "
        "for one of them), instead of finished jobs and dead letters written with SQL",
    )
    parser.add_argument(
        "--lived-processes",
        type=int,
        default=1,
        help="worker processes that make a --lived history (1); 2 makes 10M dead letters "
        "in about an hour instead of 80 minutes on this 2-core machine",
    )
    parser.add_argument(
        "--size-rounds",
        type=int,
        default=None,
        help="drains beside each size, each paired with one on an empty table (3; --quick 1)",
    )
    parser.add_argument(
        "--feature-drains",
        type=int,
        default=None,
        help="drains with every feature in use, each between two plain drains (2; --quick 1)",
    )
    parser.add_argument(
        "--feature-jobs",
        type=int,
        default=None,
        help="jobs per drain in the features scenario (100,000; --quick: --jobs): a 5%% "
        "difference must stand out of the drains' spread, which is 10-15%% at 0.7 s",
    )
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=None,
        help="length of each steadily fed run beside a size (20; --quick 5)",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=None, help="idle-cost window (10; --quick 3)"
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="instead of the benchmark: drain with several CLI worker and peer settings, "
        "interleaved, --runs times each (medians), to find their best",
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
        "--measure-wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="before each drain and latency measurement, wait up to this long for quiet "
        "(5; --quick: 0)",
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
    # Defaults only for what was not given: a 0 given is refused below, not replaced.
    args.jobs = _given(args.jobs, 2_000 if quick else 20_000)
    args.runs = _given(args.runs, 1 if quick else 3)
    args.single = _given(args.single, max(100, args.jobs // 10))
    args.samples = _given(args.samples, 50 if quick else 300)
    args.idle_seconds = _given(args.idle_seconds, 3.0 if quick else 10.0)
    args.size_rounds = _given(args.size_rounds, 1 if quick else 3)
    args.feature_drains = _given(args.feature_drains, 1 if quick else 2)
    args.feature_jobs = _given(args.feature_jobs, args.jobs if quick else 100_000)
    args.steady_seconds = _given(args.steady_seconds, 5.0 if quick else 20.0)
    args.quiet_wait = _given(args.quiet_wait, 0.0 if quick else 20.0)
    args.measure_wait = _given(args.measure_wait, 0.0 if quick else 5.0)
    if args.sizes is not None:
        args.finished = [*(args.finished or []), args.sizes]
        args.only = args.only or ["sizes"]
    finished = sorted({n for group in args.finished or [] for n in group} - {0})
    args.finished = (
        finished if args.finished else list(QUICK_FINISHED if quick else DEFAULT_FINISHED)
    )
    # --concurrency and --processes stay None unless given: the best found per dialect.
    for name in (
        "jobs",
        "runs",
        "single",
        "samples",
        "size_rounds",
        "feature_drains",
        "feature_jobs",
        "lived_processes",
        "concurrency",
        "processes",
    ):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("idle_seconds", "steady_seconds"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be more than 0")
    return args


T = TypeVar("T")


def _given(value: T | None, default: T) -> T:
    return default if value is None else value


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

    # --- plumbing ---------------------------------------------------------------------------

    def database(
        self, dialect: str, *, migrate: bool = True
    ) -> contextlib.AbstractContextManager[Database]:
        return fresh_database(
            dialect, pg_url=self.args.postgres_url, tmpdir=self.args.tmpdir, migrate=migrate
        )

    def note(self, dialect: str, label: str, text: str) -> None:
        self.console.print(
            f"  {report.DIALECT_TITLES[dialect]:<10} {label:<30} {text}", soft_wrap=True
        )

    def command(self, dialect: str, app: str = cli.PLAIN_APP) -> cli.WorkerCommand:
        return cli.WorkerCommand(
            concurrency=self.args.concurrency or CLI_CONCURRENCY[dialect],
            processes=self.args.processes or CLI_PROCESSES[dialect],
            app=app,
        )

    def quiet(self, values: dict[str, float], name: str) -> None:
        """Just before a measurement: wait (up to --measure-wait) for other processes to
        leave the CPU, and keep what was seen (`busy_<name>`, in the JSON)."""
        busy = wait_for_quiet(self.console, self.args.measure_wait, quiet=True)
        if busy is not None:
            values[f"busy_{name}"] = busy

    def latency_command(self, dialect: str) -> cli.WorkerCommand:
        """For latency one process is best: two idle processes race for every job (each
        is woken, one claims it), which costs about 1 ms at the median on PostgreSQL."""
        return cli.WorkerCommand(self.command(dialect).concurrency, self.args.processes or 1)

    def peer(self, dialect: str) -> peers.Peer | None:
        if self.args.no_peers:
            return None
        return next((p for p in peers.PEERS.values() if p.dialect == dialect), None)

    def peer_spec(self, db: Database, op: str, **extra: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {"op": op, "timeout": DRAIN_TIMEOUT, **extra}
        if db.dialect == "postgres":
            spec.update(url=self.args.postgres_url, schema=db.schema)
        else:
            spec.update(path=db.sqlite_path)
        return spec

    # --- one run ----------------------------------------------------------------------------

    def run_once(self, dialect: str) -> dict[str, float]:
        only = self.args.only or SCENARIOS
        values: dict[str, float] = {}
        if "enqueue" in only:
            self.enqueue(dialect, values)
        if "drain" in only:
            self.drains(dialect, values)
        if "latency" in only:
            self.latency(dialect, values)
        if "features" in only:
            self.features(dialect, values)
        if "sizes" in only:
            self.sizes(dialect, values)
        if "idle" in only:
            self.idle(dialect, values)
        report.add_ratios(values)
        return values

    def enqueue(self, dialect: str, values: dict[str, float]) -> None:
        with self.database(dialect) as db:
            values["enqueue_single"] = rota_runs.enqueue_single(db, self.args.single)
        self.note(dialect, "enqueue, single", f"{values['enqueue_single']:,.0f} jobs/s")
        with self.database(dialect) as db:
            values["enqueue_single_raw"] = raw.enqueue_single(
                db, tasks.NOOP_ASYNC, self.args.single
            )
        self.note(
            dialect, "enqueue, single, raw insert", f"{values['enqueue_single_raw']:,.0f} jobs/s"
        )
        with self.database(dialect) as db:
            values["enqueue_bulk"] = rota_runs.enqueue_bulk(db, self.args.jobs)
        self.note(dialect, "enqueue, bulk x1000", f"{values['enqueue_bulk']:,.0f} jobs/s")
        peer = self.peer(dialect)
        if peer is None or peer.name != "pgqueuer":
            return
        for op, jobs, extra in (
            ("enqueue_single", self.args.single, {}),
            ("enqueue_bulk", self.args.jobs, {"batch": rota_runs.BULK_BATCH}),
        ):
            with self.database(dialect, migrate=False) as db:
                result = peers.run(
                    peer, self.peer_spec(db, op, jobs=jobs, **extra), timeout=DRAIN_TIMEOUT
                )
            values[f"pgqueuer_{op}"] = result["rate"]
            self.note(dialect, f"pgqueuer {op.replace('_', ', ')}", f"{result['rate']:,.0f} jobs/s")
        with self.database(dialect) as db:
            spec = self.peer_spec(
                db, "raw_insert", jobs=self.args.single, **raw.asyncpg_insert(tasks.NOOP_ASYNC)
            )
            result = peers.run(peer, spec, timeout=DRAIN_TIMEOUT)
        values["enqueue_single_raw_asyncpg"] = result["rate"]
        self.note(
            dialect, "enqueue, single, raw insert on asyncpg", f"{result['rate']:,.0f} jobs/s"
        )

    def drains(self, dialect: str, values: dict[str, float]) -> None:
        # pgqueuer's driver (asyncpg) runs the same raw loops right after psycopg's, so that
        # each pair meets the machine in the same state.
        peer = self.peer(dialect)
        asyncpg_peer = peer if peer is not None and peer.name == "pgqueuer" else None
        plan: list[tuple[str, str, str, Callable[[Database], dict[str, Any]]]] = [
            ("baseline", "drain, raw baseline", tasks.NOOP_ASYNC, self._raw("lean")),
        ]
        if asyncpg_peer is not None:
            plan.append(
                (
                    "baseline_asyncpg",
                    "drain, raw baseline on asyncpg",
                    tasks.NOOP_ASYNC,
                    self._raw_asyncpg(asyncpg_peer, "lean"),
                )
            )
        plan.append(("cli", "drain, rota worker (CLI)", tasks.NOOP_ASYNC, self._cli))
        if not self.args.no_in_process:
            plan += [
                ("async", "drain, in-process async", tasks.NOOP_ASYNC, self._rota),
                ("sync", "drain, in-process sync", tasks.NOOP_SYNC, self._rota),
            ]
        plan.append(("rota_sql", "drain, raw loop rota SQL", tasks.NOOP_ASYNC, self._raw("rota")))
        if asyncpg_peer is not None:
            plan.append(
                (
                    "rota_sql_asyncpg",
                    "drain, raw loop rota SQL on asyncpg",
                    tasks.NOOP_ASYNC,
                    self._raw_asyncpg(asyncpg_peer, "rota"),
                )
            )
        for name, label, task_name, measure in plan:
            try:
                self.drain(dialect, values, name, label, task_name, measure)
            except BenchError as exc:
                if not name.startswith("rota_sql"):
                    raise
                # A diagnostic built on rota's internal query names: a change there should
                # not cost the whole benchmark.
                self.note(dialect, label, f"[yellow]skipped: {str(exc).splitlines()[-1]}[/]")
        if peer is not None:
            self.peer_drain(dialect, values, peer)
        text = f"raw {values['drain_cli'] / values['drain_baseline']:.0%}"
        if peer is not None:
            text += f", {peer.name} {values['drain_cli'] / values[f'drain_{peer.name}']:.2f}x"
        self.note(dialect, "rota CLI worker vs", text)

    def drain(
        self,
        dialect: str,
        values: dict[str, float],
        name: str,
        label: str,
        task_name: str,
        measure: Callable[[Database], dict[str, Any]],
        jobs: int | None = None,
    ) -> None:
        jobs = jobs or self.args.jobs
        with self.database(dialect) as db:
            prefill(db, task_name, jobs)
            self.quiet(values, name)
            result = measure(db)
            if name != "cli":  # the CLI drain checks its own queue
                check_drained(db, jobs, label)
        self.record_drain(dialect, values, name, label, result, jobs)

    def record_drain(
        self,
        dialect: str,
        values: dict[str, float],
        name: str,
        label: str,
        result: dict[str, Any],
        jobs: int | None = None,
    ) -> None:
        jobs = jobs or self.args.jobs
        values[f"drain_{name}"] = jobs / result["elapsed"]
        values[f"cpu_us_{name}"] = result["cpu"] / jobs * 1e6
        if "batches" in result:
            values[f"claim_size_{name}"] = jobs / max(result["batches"], 1)
        self.note(
            dialect,
            label,
            f"{values[f'drain_{name}']:,.0f} jobs/s ({result['elapsed']:.2f}s, "
            f"client CPU {values[f'cpu_us_{name}']:.0f} us/job)",
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

    def _raw_asyncpg(self, peer: peers.Peer, variant: str) -> Callable[[Database], dict[str, Any]]:
        def measure(db: Database) -> dict[str, Any]:
            spec = self.peer_spec(db, "raw_drain", **raw.asyncpg_drain(variant))
            return peers.run(peer, spec, timeout=DRAIN_TIMEOUT)

        return measure

    def _cli(
        self, db: Database, app: str = cli.PLAIN_APP, jobs: int | None = None
    ) -> dict[str, Any]:
        jobs = jobs or self.args.jobs
        return cli.drain(db, jobs, self.command(db.dialect, app), DRAIN_TIMEOUT)

    def _rota(self, db: Database) -> dict[str, Any]:
        result: dict[str, Any] = run_in_child(
            rota_runs.drain_child,
            db.url,
            self.args.jobs,
            DRAIN_TIMEOUT,
            self.args.concurrency or CLI_CONCURRENCY[db.dialect],
            timeout=DRAIN_TIMEOUT + 60,
        )
        return result

    def peer_drain(self, dialect: str, values: dict[str, float], peer: peers.Peer) -> None:
        with self.database(dialect, migrate=False) as db:
            if peer.name == "pgqueuer":
                extra = {"consumers": PGQUEUER_CONSUMERS, "batch": PGQUEUER_BATCH}
            else:
                extra = {"workers": HUEY_WORKERS}
            self.quiet(values, peer.name)
            result = peers.run(
                peer,
                self.peer_spec(db, "drain", jobs=self.args.jobs, **extra),
                timeout=DRAIN_TIMEOUT + 120,
            )
        self.record_drain(dialect, values, peer.name, f"drain, {peer.name}", result)

    def latency(self, dialect: str, values: dict[str, float]) -> None:
        with self.database(dialect) as db:
            self.quiet(values, "latency")
            samples = cli.latency(db, self.args.samples, self.latency_command(dialect))
        values.update(report.latency_metrics(samples["from_call"], samples["from_commit"]))
        self.note(
            dialect,
            "enqueue-to-start",
            f"p50 {values['latency_p50']:.2f} ms, p95 {values['latency_p95']:.2f} ms, "
            f"p99 {values['latency_p99']:.2f} ms",
        )
        peer = self.peer(dialect)
        if peer is None or peer.name != "pgqueuer":
            return
        with self.database(dialect, migrate=False) as db:
            spec = self.peer_spec(db, "latency", samples=self.args.samples, batch=PGQUEUER_BATCH)
            result = peers.run(peer, spec, timeout=DRAIN_TIMEOUT)
        got = report.latency_metrics(result["from_call"], result["from_commit"])
        values.update({f"pgqueuer_{k}": v for k, v in got.items()})
        self.note(
            dialect,
            "pgqueuer enqueue-to-start",
            f"p50 {got['latency_p50']:.2f} ms, p99 {got['latency_p99']:.2f} ms",
        )

    def features(self, dialect: str, values: dict[str, float]) -> None:
        """The plain `bench` queue drained beside every feature in use on other queues,
        `--feature-drains` times, each between two drains of the same queue on a plain
        installation (plain, features, plain, features, plain): the ratio is taken against
        those (the mean rates), not against the drain scenario's figure, because the
        machine's pace drifts over the minutes between (that ratio swung 0.64-1.33). Each
        drain is of `--feature-jobs` jobs (100,000): drains of 20,000 (0.7 s) spread by
        10-15% on this machine, more than the 5% this scenario must resolve."""
        jobs = self.args.feature_jobs

        def plain(n: int) -> float:
            name = f"features_plain_{n}"  # busy_features_plain_N stays in the JSON
            label = "drain, plain, " + (f"after {n}" if n else "first")
            measure = partial(self._cli, jobs=jobs)
            self.drain(dialect, values, name, label, tasks.NOOP_ASYNC, measure, jobs)
            values.pop(f"cpu_us_{name}", None)
            return values.pop(f"drain_{name}")

        def busy() -> tuple[float, float]:
            with self.database(dialect) as db:
                prefill(db, tasks.NOOP_ASYNC, jobs)
                features.put_in_use(db.url)
                self.quiet(values, "features")
                result = self._cli(db, cli.FEATURES_APP, jobs)
            self.record_drain(dialect, values, "features", "drain, features in use", result, jobs)
            return values["drain_features"], values["cpu_us_features"]

        plains = [plain(0)]
        busies: list[tuple[float, float]] = []
        for n in range(1, self.args.feature_drains + 1):
            busies.append(busy())
            plains.append(plain(n))
        values["drain_features"] = statistics.fmean(rate for rate, _ in busies)
        values["cpu_us_features"] = statistics.fmean(cpu for _, cpu in busies)
        values["drain_features_plain"] = statistics.fmean(plains)
        self.note(
            dialect,
            "features in use / plain",
            f"{values['drain_features'] / values['drain_features_plain']:.0%} (features "
            f"{', '.join(f'{rate:,.0f}' for rate, _ in busies)}; plain "
            f"{', '.join(f'{rate:,.0f}' for rate in plains)} jobs/s, in turn)",
        )

    def sizes(self, dialect: str, values: dict[str, float]) -> None:
        """Drain, enqueue rates and enqueue-to-start latency beside N finished jobs, each
        against the same sequence on an empty table (N = 0) in this run."""
        samples = max(50, self.args.samples // 3)
        plan = [("finished", 0)]
        for n in self.args.finished:
            if not self.args.lived:
                plan += [("finished", n), ("dead", n)]
                continue
            if self.args.lived in ("both", "completed"):
                plan.append(("lived", n))
            if self.args.lived in ("both", "dead"):
                plan.append(("lived_dead", n))
        for variant, n in plan:
            try:
                self.size(dialect, values, variant, n, samples)
            except BenchError as exc:
                if n == 0:
                    raise
                # One size failing (a schema change, a timeout at 10M) keeps the rest.
                self.note(dialect, f"{n:,} {variant}", f"[yellow]skipped: {exc}[/]")

    def size(
        self, dialect: str, values: dict[str, float], variant: str, n: int, samples: int
    ) -> None:
        key = f"size_{variant}_{n}"
        with contextlib.ExitStack() as stack:
            db = stack.enter_context(self.database(dialect))
            took = sizes.fill(db, n, variant, processes=self.args.lived_processes)
            # What the dashboard and a scrape cost beside them, before any work is queued.
            values.update({f"{key}_{k}": v for k, v in reads.read_times(db).items()})
            if n == 0:
                prefill(db, tasks.NOOP_ASYNC, self.args.jobs)
                self.quiet(values, key)
                values[f"{key}_drain"] = self.args.jobs / self._cli(db)["elapsed"]
            else:
                empty = stack.enter_context(self.database(dialect))
                self.paired_drains(values, key, db, empty)
            text = f"drain {values[f'{key}_drain']:,.0f} jobs/s"
            if f"{key}_drain_empty" in values:
                text += (
                    f" ({values[f'{key}_drain'] / values[f'{key}_drain_empty']:.0%} of "
                    f"{values[f'{key}_drain_empty']:,.0f} on an empty table, same rounds), "
                    f"fed steadily {values[f'{key}_steady']:,.0f} jobs/s "
                    f"({values[f'{key}_steady'] / values[f'{key}_steady_empty']:.0%})"
                )
            if variant == "finished":  # the dead-letter variant measures the drain only
                values[f"{key}_enqueue_single"] = rota_runs.enqueue_single(db, self.args.single)
                values[f"{key}_enqueue_bulk"] = rota_runs.enqueue_bulk(db, self.args.jobs)
                lat = self.size_latency(db, dialect, samples)
                values[f"{key}_latency_p50"] = lat["latency_p50"]
                values[f"{key}_latency_p99"] = lat["latency_p99"]
                text += (
                    f", enqueue {values[f'{key}_enqueue_single']:,.0f} / "
                    f"{values[f'{key}_enqueue_bulk']:,.0f} jobs/s, "
                    f"latency p50 {lat['latency_p50']:.2f} ms"
                )
                if n > 0:
                    # The paired drains and steady runs leave their own rows (hundreds of
                    # thousands on PostgreSQL) and dead versions behind in both tables: the
                    # empty table after the same runs is what isolates the history's share.
                    lat = self.size_latency(empty, dialect, samples)
                    values[f"{key}_latency_p50_empty"] = lat["latency_p50"]
                    values[f"{key}_latency_p99_empty"] = lat["latency_p99"]
                    text += f" (empty table after the same runs {lat['latency_p50']:.2f} ms)"
        slowest = max(reads.READS, key=lambda r: values[f"{key}_read_{r}"])
        text += f", slowest read {slowest} {values[f'{key}_read_{slowest}']:.1f} ms"
        self.note(dialect, f"{n:,} {variant} (fill {took:.0f}s)", text)

    def size_latency(self, db: Database, dialect: str, samples: int) -> dict[str, float]:
        got = cli.latency(db, samples, self.latency_command(dialect))
        return report.latency_metrics(got["from_call"], got["from_commit"])

    def paired_drains(
        self, values: dict[str, float], key: str, full: Database, empty: Database
    ) -> None:
        """Burst drains, then steadily fed runs, beside the filled table, each next to one
        on an empty table of its own (`paired`): the ratio compares runs minutes apart,
        not a whole run apart. The fill's own
        write-ahead log is checkpointed first: a system that grew to N rows over days is
        not in the middle of writing them out."""
        checkpoint(full)

        def drain(db: Database) -> float:
            prefill(db, tasks.NOOP_ASYNC, self.args.jobs)
            return int(self.args.jobs) / float(self._cli(db)["elapsed"])

        def fed(db: Database) -> float:  # a steadily fed worker (a small backlog, topped up)
            return cli.steady(db, self.command(db.dialect), self.args.steady_seconds)

        self.paired(values, f"{key}_drain", full, empty, drain, "drains")
        self.paired(values, f"{key}_steady", full, empty, fed, "steady runs")

    def paired(
        self,
        values: dict[str, float],
        name: str,
        full: Database,
        empty: Database,
        measure: Callable[[Database], float],
        what: str,
    ) -> None:
        """`--size-rounds` pairs of `measure` beside the filled table and on the empty one,
        alternating which goes first, each from an empty queue: medians as `name` and
        `name`_empty, and each run printed."""
        rates: dict[str, list[float]] = {"full": [], "empty": []}
        for round_ in range(self.args.size_rounds):
            order = [("full", full), ("empty", empty)]
            for side, db in order if round_ % 2 == 0 else order[::-1]:
                clear_queue(db)
                self.quiet(values, f"{name}_{side}")
                rates[side].append(measure(db))
        values[name] = statistics.median(rates["full"])
        values[f"{name}_empty"] = statistics.median(rates["empty"])
        self.note(
            full.dialect,
            f"  paired {what} (jobs/s)",
            "beside: "
            + " / ".join(f"{r:,.0f}" for r in rates["full"])
            + "; empty: "
            + " / ".join(f"{r:,.0f}" for r in rates["empty"]),
        )

    def idle(self, dialect: str, values: dict[str, float]) -> None:
        with self.database(dialect) as db:
            # One worker process, as the target states it.
            command = cli.WorkerCommand(self.command(dialect).concurrency, 1)
            got = cli.idle(db, command, self.args.idle_seconds)
        values.update(got)
        self.note(
            dialect,
            "idle worker",
            f"{got['idle_rss_mb']:.0f} MB RSS, {got['idle_cpu_pct']:.1f}% of a core",
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


def wait_for_quiet(console: Console, limit: float, *, quiet: bool = False) -> float | None:
    """Between measurements nothing of ours runs, so busy CPU is someone else's: wait up
    to `limit` seconds for it to drop under QUIET, and return what was seen last (`quiet`:
    say nothing)."""
    deadline = time.monotonic() + limit
    busy = cpu_busy()
    waited = False
    while busy is not None and busy > QUIET and time.monotonic() < deadline:
        if not waited and not quiet:
            console.print(
                f"  [yellow]the machine is busy ({busy:.0%} CPU used by other processes): "
                f"waiting up to {limit:.0f}s[/]"
            )
            waited = True
        time.sleep(1.0)
        busy = cpu_busy()
    if busy is not None and busy > QUIET and not quiet:
        console.print(
            f"  [yellow]{'still busy' if waited else 'the machine is busy'} ({busy:.0%} CPU "
            "used by other processes): numbers from this run may be low[/]"
        )
    return busy


SWEEP_CLI = ((100, 1), (100, 2), (200, 2), (400, 1), (400, 2), (800, 2))
SWEEP_PGQUEUER = ((5, 10), (2, 100), (5, 100), (2, 200), (5, 200), (2, 400))
SWEEP_HUEY = (1, 4, 8)


def sweep(bench: Bench, dialects: list[str], console: Console) -> dict[str, Any]:
    """Drain with each setting of the CLI worker and of each peer, settings interleaved,
    `--runs` times (medians): how the defaults above were chosen (`python -m bench --sweep`)."""
    args = bench.args
    found: dict[str, Any] = {}
    for dialect in dialects:
        plan: list[tuple[str, str, Callable[[], dict[str, Any]]]] = []
        for concurrency, processes in SWEEP_CLI:
            command = cli.WorkerCommand(concurrency, processes)
            plan.append(("rota", command.describe(), _sweep_cli(bench, dialect, command)))
        peer = bench.peer(dialect)
        settings: list[dict[str, Any]] = []
        if peer is not None and peer.name == "pgqueuer":
            settings = [{"consumers": c, "batch": b} for c, b in SWEEP_PGQUEUER]
        elif peer is not None:
            settings = [{"workers": w} for w in SWEEP_HUEY]
        for extra in settings:
            assert peer is not None
            label = f"{peer.name} " + " ".join(f"{k}={v}" for k, v in extra.items())
            plan.append((peer.name, label, _sweep_peer(bench, dialect, peer, extra)))
        rates: dict[str, list[float]] = {label: [] for _, label, _ in plan}
        for n in range(args.runs):
            console.print(f"[bold]{report.DIALECT_TITLES[dialect]} sweep {n + 1}/{args.runs}[/]")
            for _, label, measure in plan:
                wait_for_quiet(console, args.quiet_wait)
                rate = args.jobs / measure()["elapsed"]
                rates[label].append(rate)
                bench.note(dialect, label, f"{rate:,.0f} jobs/s")
        found[dialect] = [
            {
                "who": who,
                "setting": label,
                "rate": statistics.median(rates[label]),
                "rates": rates[label],
            }
            for who, label, _ in plan
        ]
    return found


def _sweep_cli(
    bench: Bench, dialect: str, command: cli.WorkerCommand
) -> Callable[[], dict[str, Any]]:
    def measure() -> dict[str, Any]:
        with bench.database(dialect) as db:
            prefill(db, tasks.NOOP_ASYNC, bench.args.jobs)
            return cli.drain(db, bench.args.jobs, command, DRAIN_TIMEOUT)

    return measure


def _sweep_peer(
    bench: Bench, dialect: str, peer: peers.Peer, extra: dict[str, Any]
) -> Callable[[], dict[str, Any]]:
    def measure() -> dict[str, Any]:
        with bench.database(dialect, migrate=False) as db:
            return peers.run(
                peer,
                bench.peer_spec(db, "drain", jobs=bench.args.jobs, **extra),
                timeout=DRAIN_TIMEOUT + 120,
            )

    return measure


def _console() -> Console:
    # Piped into a file, the tables keep their width instead of the 80-column default.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 120)


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
    bench = Bench(args, progress)
    try:
        # Before any run, so that a first-use install never lands in a measurement.
        for dialect in dialects:
            peer = bench.peer(dialect)
            if peer is not None:
                peers.ensure(peer, progress.print)
    except BenchError as exc:
        progress.print(f"[red]{exc}[/]")
        return 1
    machine = machine_info(args, pg_version)
    if args.sweep:
        try:
            found = sweep(bench, dialects, progress)
        except BenchError as exc:
            progress.print(f"[red]sweep failed: {exc}[/]")
            return 1
        if args.json is not None:
            text = json.dumps({"machine": machine, "jobs": args.jobs, "sweep": found}, indent=2)
            if to_stdout:
                sys.stdout.write(text + "\n")
            else:
                Path(args.json).write_text(text + "\n", encoding="utf-8")
        if not to_stdout:
            report.print_sweep(_console(), found, args.jobs)
        return 0
    settings = {
        "jobs": args.jobs,
        "runs": args.runs,
        "single_enqueues": args.single,
        "latency_samples": args.samples,
        "bulk_batch": rota_runs.BULK_BATCH,
        "baseline_batch": raw.BATCH,
        "cli_worker": {d: bench.command(d).describe() for d in dialects},
        "cli_worker_latency": {d: bench.latency_command(d).describe() for d in dialects},
        "in_process_worker": {
            d: f"rota.WorkerSettings(queues={{'bench': "
            f"{args.concurrency or CLI_CONCURRENCY[d]}}}, fetch_batch={rota_runs.FETCH_BATCH}, "
            "quiet_queues={'bench'})"
            for d in dialects
        },
        "finished_sizes": [0, *args.finished],
        "idle_seconds": args.idle_seconds,
    }
    if not args.no_peers:
        settings["peers"] = {
            "pgqueuer": f"pgqueuer {peers.PEERS['pgqueuer'].pinned_version()}, asyncpg + uvloop, "
            f"{PGQUEUER_CONSUMERS} consumers x batch {PGQUEUER_BATCH}, durability=durable",
            "huey": f"huey {peers.PEERS['huey'].pinned_version()} SqliteHuey (WAL, fsync=True), "
            f"consumer with {HUEY_WORKERS} threads",
        }
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
    took = time.perf_counter() - started
    progress.print(f"[dim]took {took:.0f}s[/]")
    settings["took_seconds"] = round(took)
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
        report.print_report(_console(), summary, args.runs, machine, settings, busy)
    return 0
