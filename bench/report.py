"""Statistics (ratios within a run, medians across runs, latency percentiles), the targets
of issues 16 and 23, and the output: rich tables for people, JSON for machines."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.reads import READS, UNTIMED_READS
from bench.reads import TARGET_MS as READ_TARGET_MS

DIALECT_TITLES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str  # "jobs/s" | "ms" | "ratio" | "x" | "us/job" | "jobs" | "MB" | "%"


METRICS: tuple[Metric, ...] = (
    Metric("enqueue_single", "enqueue, single (task.enqueue)", "jobs/s"),
    Metric("pgqueuer_enqueue_single", "  pgqueuer, single (queries.enqueue)", "jobs/s"),
    Metric("ratio_enqueue_single_pgqueuer", "  rota / pgqueuer", "x"),
    Metric("enqueue_single_raw", "  raw SQL, one INSERT per commit", "jobs/s"),
    Metric("ratio_enqueue_single_raw", "  rota / raw SQL", "ratio"),
    Metric("ratio_pgqueuer_enqueue_single_raw", "  pgqueuer / raw SQL", "ratio"),
    Metric("enqueue_single_raw_asyncpg", "  raw SQL on asyncpg (pgqueuer's driver)", "jobs/s"),
    Metric("ratio_enqueue_single_raw_asyncpg", "  rota / raw SQL on asyncpg", "ratio"),
    Metric("ratio_pgqueuer_enqueue_single_raw_asyncpg", "  pgqueuer / raw SQL on asyncpg", "ratio"),
    Metric("enqueue_bulk", "enqueue, bulk (enqueue_many x1000)", "jobs/s"),
    Metric("pgqueuer_enqueue_bulk", "  pgqueuer, bulk (x1000)", "jobs/s"),
    Metric("ratio_enqueue_bulk_pgqueuer", "  rota / pgqueuer", "x"),
    Metric("drain_baseline", "drain, raw-SQL baseline (lean SQL)", "jobs/s"),
    Metric("drain_baseline_asyncpg", "drain, raw-SQL baseline on asyncpg", "jobs/s"),
    Metric("drain_rota_sql", "drain, raw loop running rota's SQL", "jobs/s"),
    Metric("drain_rota_sql_asyncpg", "drain, raw loop running rota's SQL on asyncpg", "jobs/s"),
    Metric("drain_cli", "drain, rota worker (CLI)", "jobs/s"),
    Metric("drain_pgqueuer", "drain, pgqueuer", "jobs/s"),
    Metric("drain_huey", "drain, huey (SqliteHuey)", "jobs/s"),
    Metric("ratio_cli", "  rota CLI / raw baseline", "ratio"),
    Metric("ratio_cli_pgqueuer", "  rota CLI / pgqueuer", "x"),
    Metric("ratio_cli_huey", "  rota CLI / huey", "x"),
    Metric("ratio_pgqueuer", "  pgqueuer / raw baseline", "ratio"),
    Metric("ratio_huey", "  huey / raw baseline", "ratio"),
    Metric("ratio_rota_sql", "  rota's SQL, raw loop / baseline", "ratio"),
    Metric("ratio_cli_asyncpg", "  rota CLI / raw baseline on asyncpg", "ratio"),
    Metric("ratio_rota_sql_asyncpg_pgqueuer", "  rota's SQL on asyncpg, raw loop / pgqueuer", "x"),
    Metric("ratio_pgqueuer_asyncpg", "  pgqueuer / raw baseline on asyncpg", "ratio"),
    Metric("ratio_drain_target_raw", "  drain target (x peer) / fastest raw loop", "ratio"),
    Metric("drain_async", "drain, in-process rota.Worker, async", "jobs/s"),
    Metric("drain_sync", "drain, in-process rota.Worker, sync", "jobs/s"),
    Metric("ratio_async", "  in-process async / baseline", "ratio"),
    Metric("ratio_sync", "  in-process sync / baseline", "ratio"),
    Metric("claim_size_async", "  mean claim size, in-process async", "jobs"),
    Metric("claim_size_sync", "  mean claim size, in-process sync", "jobs"),
    Metric("cpu_us_baseline", "worker CPU per job, raw baseline", "us/job"),
    Metric("cpu_us_baseline_asyncpg", "worker CPU per job, raw baseline on asyncpg", "us/job"),
    Metric("cpu_us_cli", "worker CPU per job, rota CLI", "us/job"),
    Metric("cpu_us_async", "worker CPU per job, in-process async", "us/job"),
    Metric("cpu_us_sync", "worker CPU per job, in-process sync", "us/job"),
    Metric("cpu_us_pgqueuer", "worker CPU per job, pgqueuer", "us/job"),
    Metric("cpu_us_huey", "worker CPU per job, huey", "us/job"),
    Metric("latency_p50", "enqueue-to-start p50", "ms"),
    Metric("latency_p95", "enqueue-to-start p95", "ms"),
    Metric("latency_p99", "enqueue-to-start p99", "ms"),
    Metric("latency_max", "enqueue-to-start max", "ms"),
    Metric("latency_commit_p50", "  commit-to-start p50", "ms"),
    Metric("pgqueuer_latency_p50", "pgqueuer enqueue-to-start p50", "ms"),
    Metric("pgqueuer_latency_p99", "pgqueuer enqueue-to-start p99", "ms"),
    Metric("drain_features", "drain, rota CLI, every feature in use", "jobs/s"),
    Metric("drain_features_plain", "drain, rota CLI, plain, around it", "jobs/s"),
    Metric("ratio_features", "  features in use / plain", "ratio"),
    Metric("idle_rss_mb", "idle worker RSS", "MB"),
    Metric("idle_cpu_pct", "idle worker CPU (% of one core)", "%"),
)

# Ratios taken inside each run (numerator, denominator), before the medians.
RATIOS: dict[str, tuple[str, str]] = {
    "ratio_cli": ("drain_cli", "drain_baseline"),
    "ratio_async": ("drain_async", "drain_baseline"),
    "ratio_sync": ("drain_sync", "drain_baseline"),
    "ratio_rota_sql": ("drain_rota_sql", "drain_baseline"),
    "ratio_pgqueuer": ("drain_pgqueuer", "drain_baseline"),
    "ratio_huey": ("drain_huey", "drain_baseline"),
    "ratio_cli_pgqueuer": ("drain_cli", "drain_pgqueuer"),
    "ratio_cli_huey": ("drain_cli", "drain_huey"),
    "ratio_enqueue_single_pgqueuer": ("enqueue_single", "pgqueuer_enqueue_single"),
    "ratio_enqueue_bulk_pgqueuer": ("enqueue_bulk", "pgqueuer_enqueue_bulk"),
    "ratio_enqueue_single_raw": ("enqueue_single", "enqueue_single_raw"),
    "ratio_pgqueuer_enqueue_single_raw": ("pgqueuer_enqueue_single", "enqueue_single_raw"),
    "ratio_enqueue_single_raw_asyncpg": ("enqueue_single", "enqueue_single_raw_asyncpg"),
    "ratio_pgqueuer_enqueue_single_raw_asyncpg": (
        "pgqueuer_enqueue_single",
        "enqueue_single_raw_asyncpg",
    ),
    "ratio_cli_asyncpg": ("drain_cli", "drain_baseline_asyncpg"),
    "ratio_rota_sql_asyncpg_pgqueuer": ("drain_rota_sql_asyncpg", "drain_pgqueuer"),
    "ratio_pgqueuer_asyncpg": ("drain_pgqueuer", "drain_baseline_asyncpg"),
    "ratio_features": ("drain_features", "drain_features_plain"),
}
SIZE_KEY = re.compile(r"^size_(finished|dead|lived|lived_dead)_(\d+)_(\w+)$")
# What N rows of each size variant are, in the tables (bench/sizes.py).
SIZE_WHAT = {
    "finished": "finished jobs",
    "dead": "dead letters",
    "lived": "lived jobs",
    "lived_dead": "lived dead letters",
}
SIZE_MEASURES = {
    "drain": ("drain", "jobs/s"),
    "drain_empty": ("drain, empty table in the same rounds", "jobs/s"),
    "steady": ("fed steadily (backlog <= 2,000)", "jobs/s"),
    "steady_empty": ("fed steadily, empty table in the same rounds", "jobs/s"),
    "enqueue_single": ("enqueue, single", "jobs/s"),
    "enqueue_bulk": ("enqueue, bulk", "jobs/s"),
    "latency_p50": ("latency p50", "ms"),
    "latency_p99": ("latency p99", "ms"),
    "latency_p50_empty": ("latency p50, empty table after the same runs", "ms"),
    "latency_p99_empty": ("latency p99, empty table after the same runs", "ms"),
    **{f"read_{name}": (f"read: {label}", "ms") for name, label in READS.items()},
}


# Issue 16's drain targets: rota's CLI drain at least this many times the peer's.
DRAIN_TARGETS = {"drain_pgqueuer": 1.5, "drain_huey": 10.0}


def add_ratios(values: dict[str, float]) -> None:
    """Ratios of one run: against the baseline and the peers, the drain target against the
    fastest raw loop (above 100%, no client of this machine's database reaches it), and each
    size scenario against the empty table (`size_..._<measure>_ratio`)."""
    for key, (num, den) in RATIOS.items():
        if num in values and values.get(den):
            values[key] = values[num] / values[den]
    fastest = max(values.get("drain_baseline", 0.0), values.get("drain_baseline_asyncpg", 0.0))
    for peer, factor in DRAIN_TARGETS.items():
        if values.get(peer) and fastest:
            values["ratio_drain_target_raw"] = factor * values[peer] / fastest
    for key in list(values):
        found = SIZE_KEY.match(key)
        if not found or key.endswith("_ratio"):
            continue
        _, n, measure = found.groups()
        if measure.startswith("read_") or measure.endswith("_empty"):
            continue  # a read's time is compared with its target, not with the empty table
        # The drain is compared with its own paired drains on an empty table, when it has them.
        empty = values.get(f"{key}_empty") or values.get(f"size_finished_0_{measure}")
        if int(n) > 0 and empty:
            values[f"{key}_ratio"] = values[key] / empty


@dataclass(frozen=True)
class Target:
    dialect: str
    metric: str
    label: str
    check: Callable[[float], bool]
    goal: str


TARGETS: tuple[Target, ...] = (
    Target(
        "postgres",
        "ratio_cli_pgqueuer",
        "drain vs pgqueuer",
        lambda v: v >= DRAIN_TARGETS["drain_pgqueuer"],
        ">= 1.5x",
    ),
    Target("postgres", "ratio_cli", "drain vs raw loop", lambda v: v >= 0.5, ">= 50%"),
    Target(
        "postgres",
        "ratio_enqueue_single_pgqueuer",
        "single enqueue vs pgqueuer",
        lambda v: v >= 1.0,
        ">= 1.0x",
    ),
    Target(
        "postgres",
        "ratio_enqueue_bulk_pgqueuer",
        "bulk enqueue vs pgqueuer",
        lambda v: v >= 1.0,
        ">= 1.0x",
    ),
    Target("postgres", "latency_p50", "enqueue-to-start p50", lambda v: v < 3.0, "< 3 ms"),
    Target("postgres", "latency_p99", "enqueue-to-start p99", lambda v: v < 10.0, "< 10 ms"),
    Target(
        "sqlite",
        "ratio_cli_huey",
        "drain vs huey",
        lambda v: v >= DRAIN_TARGETS["drain_huey"],
        ">= 10x",
    ),
    Target("sqlite", "ratio_cli", "drain vs raw loop", lambda v: v >= 0.3, ">= 30%"),
    Target(
        "sqlite", "ratio_features", "plain queue, features in use", lambda v: v >= 0.95, ">= 95%"
    ),
    Target(
        "postgres", "ratio_features", "plain queue, features in use", lambda v: v >= 0.95, ">= 95%"
    ),
    Target("sqlite", "idle_rss_mb", "idle worker memory", lambda v: v < 60, "< 60 MB"),
    Target("postgres", "idle_rss_mb", "idle worker memory", lambda v: v < 60, "< 60 MB"),
    Target("sqlite", "idle_cpu_pct", "idle worker CPU", lambda v: v < 1.0, "< 1% of a core"),
)


def size_targets(summary: dict[str, dict[str, float]]) -> list[Target]:
    """Issue 23: the drain beside N finished jobs (or N dead letters) >= 90% of empty."""
    found = []
    for dialect, values in summary.items():
        for key in sorted(values, key=_size_order):
            match = SIZE_KEY.match(key.removesuffix("_ratio"))
            if match and key.endswith("_drain_ratio"):
                variant, n, _ = match.groups()
                what = SIZE_WHAT[variant]
                found.append(
                    Target(
                        dialect,
                        key,
                        f"drain beside {int(n):,} {what}",
                        lambda v: v >= 0.9,
                        ">= 90% of empty",
                    )
                )
    return found


def read_targets(summary: dict[str, dict[str, float]]) -> list[Target]:
    """Issue 23: every dashboard and metrics read under 20 ms beside the largest size."""
    found = []
    for dialect, values in summary.items():
        sizes = [int(m.group(2)) for k in values if (m := SIZE_KEY.match(k))]
        if not sizes or max(sizes) == 0:
            continue
        largest = max(sizes)
        for name, label in READS.items():
            key = f"size_finished_{largest}_read_{name}"
            if name in UNTIMED_READS:
                continue
            if key in values:
                found.append(
                    Target(
                        dialect,
                        key,
                        f"{label} beside {largest:,} finished",
                        lambda v: v < READ_TARGET_MS,
                        f"< {READ_TARGET_MS:.0f} ms",
                    )
                )
    return found


def _size_order(key: str) -> tuple[int, str]:
    match = SIZE_KEY.match(key.removesuffix("_ratio"))
    return (int(match.group(2)), key) if match else (0, key)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def latency_metrics(from_call: Sequence[float], from_commit: Sequence[float]) -> dict[str, float]:
    ms = [v * 1000 for v in from_call]
    return {
        "latency_p50": percentile(ms, 50),
        "latency_p95": percentile(ms, 95),
        "latency_p99": percentile(ms, 99),
        "latency_max": max(ms) if ms else math.nan,
        "latency_commit_p50": percentile([v * 1000 for v in from_commit], 50),
    }


def medians(runs: Sequence[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per dialect, per metric: the median over the runs that measured it."""
    out: dict[str, dict[str, float]] = {}
    for run in runs:
        for dialect, values in run.items():
            for key in values:
                if key in out.get(dialect, {}):
                    continue
                samples = [r[dialect][key] for r in runs if key in r.get(dialect, {})]
                out.setdefault(dialect, {})[key] = statistics.median(samples)
    return out


def evaluate(summary: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    results = []
    for target in (*TARGETS, *size_targets(summary), *read_targets(summary)):
        value = summary.get(target.dialect, {}).get(target.metric)
        if value is None:
            continue
        results.append(
            {
                "dialect": target.dialect,
                "target": target.label,
                "metric": target.metric,
                "goal": target.goal,
                "measured": value,
                "met": target.check(value),
            }
        )
    return results


def fmt(value: float | None, unit: str) -> str:
    if value is None or math.isnan(value):
        return "-"
    if unit == "jobs/s":
        return f"{value:,.0f}"
    if unit == "ratio":
        return f"{value * 100:.0f}%"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "ms":
        return f"{value:.2f}"
    if unit == "%":
        return f"{value:.1f}%"
    return f"{value:.1f}"


def _unit_of(metric: str) -> str:
    if metric.endswith("_ratio"):
        return "ratio"
    for m in METRICS:
        if m.key == metric:
            return m.unit
    match = SIZE_KEY.match(metric)
    return SIZE_MEASURES[match.group(3)][1] if match else ""


def fmt_target(metric: str, value: float) -> str:
    unit = _unit_of(metric)
    text = fmt(value, unit)
    return f"{text} {unit}" if unit in ("ms", "jobs/s", "MB") else text


def print_report(
    console: Console,
    summary: dict[str, dict[str, float]],
    runs: int,
    machine: dict[str, Any],
    settings: dict[str, Any],
    busy: Sequence[dict[str, float | None]] = (),
) -> None:
    dialects = [d for d in DIALECT_TITLES if d in summary]
    table = Table(
        title=f"rota benchmark: medians of {runs} run(s), {settings['jobs']:,} jobs per drain",
        title_justify="left",
    )
    table.add_column("measurement")
    table.add_column("unit")
    for dialect in dialects:
        table.add_column(DIALECT_TITLES[dialect], justify="right")
    for metric in METRICS:
        if not any(metric.key in summary[d] for d in dialects):
            continue
        unit = "" if metric.unit in ("ratio", "x", "%") else metric.unit
        row = [fmt(summary[d].get(metric.key), metric.unit) for d in dialects]
        table.add_row(metric.label, unit, *row)
    console.print(table)
    print_sizes(console, summary, dialects)

    checks = evaluate(summary)
    if checks:
        targets = Table(title="targets (issues 16 and 23)", title_justify="left")
        for name in ("database", "target", "goal", "measured", "met"):
            targets.add_column(name)
        for check in checks:
            targets.add_row(
                DIALECT_TITLES[check["dialect"]],
                check["target"],
                check["goal"],
                fmt_target(check["metric"], check["measured"]),
                "[green]yes[/]" if check["met"] else "[red]no[/]",
            )
        console.print(targets)
    for name, what in (("cli_worker", "drains"), ("cli_worker_latency", "latency"), ("peers", "")):
        for who, text in (settings.get(name) or {}).items():
            label = DIALECT_TITLES.get(who, who) + (f" {what}" if what else "")
            console.print(f"[dim]{label}: {text}[/]")
    described = ", ".join(f"{k}: {v}" for k, v in machine.items())
    console.print(f"[dim]{described}[/]")
    seen = [f"{v:.0%}" for run in busy for v in run.values() if v is not None]
    if seen:
        console.print(f"[dim]CPU used by other processes before each run: {', '.join(seen)}[/]")
    for dialect in dialects:
        before = sorted(v for k, v in summary[dialect].items() if k.startswith("busy_"))
        if before:
            console.print(
                f"[dim]{DIALECT_TITLES[dialect]}: CPU used by other processes just before the "
                f"measurements (medians over runs): median {statistics.median(before):.0%}, "
                f"highest {before[-1]:.0%}[/]"
            )


def print_sizes(
    console: Console, summary: dict[str, dict[str, float]], dialects: list[str]
) -> None:
    """One row per (finished rows, measure): the value, and its ratio to the empty table."""
    rows: dict[tuple[int, str, str], dict[str, str]] = {}
    for dialect in dialects:
        for key, value in summary[dialect].items():
            match = SIZE_KEY.match(key)
            if not match or key.endswith("_ratio"):
                continue
            variant, n, measure = match.groups()
            label, unit = SIZE_MEASURES[measure]
            text = fmt(value, unit)
            ratio = summary[dialect].get(f"{key}_ratio")
            if ratio is not None:
                text += f" ({ratio * 100:.0f}%)"
            order = list(SIZE_MEASURES).index(measure)
            rows.setdefault((int(n), variant, order, f"{label} ({unit})"), {})[dialect] = text
    if not rows:
        return
    table = Table(
        title="size scenarios: beside N finished jobs (ratio to the empty table, same run)",
        title_justify="left",
    )
    table.add_column("finished rows")
    table.add_column("measurement")
    for dialect in dialects:
        table.add_column(DIALECT_TITLES[dialect], justify="right")
    for (n, variant, _, label), cells in sorted(
        rows.items(), key=lambda r: (r[0][0], r[0][1] != "finished", r[0][2])
    ):
        what = f"{n:,}" if variant == "finished" else f"{n:,} {SIZE_WHAT[variant]}"
        table.add_row(what, label, *[cells.get(d, "-") for d in dialects])
    console.print(table)


def print_sweep(console: Console, found: dict[str, list[dict[str, Any]]], jobs: int) -> None:
    table = Table(
        title=f"settings sweep: drains of {jobs:,} jobs, medians (each run)", title_justify="left"
    )
    for name in ("database", "setting", "jobs/s", "runs"):
        table.add_column(name)
    for dialect, rows in found.items():
        for row in rows:
            each = ", ".join(fmt(r, "jobs/s") for r in row.get("rates", []))
            table.add_row(DIALECT_TITLES[dialect], row["setting"], fmt(row["rate"], "jobs/s"), each)
    console.print(table)


def markdown(document: dict[str, Any]) -> str:
    """The tables of a `--json` document as Markdown, for docs/benchmarks.md
    (`python -m bench.markdown results.json`)."""
    summary: dict[str, dict[str, float]] = document["medians"]
    dialects = [d for d in DIALECT_TITLES if d in summary]
    titles = " | ".join(DIALECT_TITLES[d] for d in dialects)
    lines = [f"| Measurement | {titles} |", "|---|" + "---:|" * len(dialects)]
    for metric in METRICS:
        if not any(metric.key in summary[d] for d in dialects):
            continue
        unit = "" if metric.unit in ("ratio", "x", "%") else f" ({metric.unit})"
        cells = " | ".join(fmt(summary[d].get(metric.key), metric.unit) for d in dialects)
        label = metric.label.strip()
        label = f"&nbsp;&nbsp;{label}" if metric.label.startswith("  ") else label
        lines.append(f"| {label}{unit} | {cells} |")
    sizes: dict[tuple[int, str, int], dict[str, str]] = {}
    for dialect in dialects:
        for key, value in summary[dialect].items():
            match = SIZE_KEY.match(key)
            if not match or key.endswith("_ratio"):
                continue
            variant, n, measure = match.groups()
            text = fmt(value, SIZE_MEASURES[measure][1])
            ratio = summary[dialect].get(f"{key}_ratio")
            if ratio is not None:
                text += f" ({ratio * 100:.0f}%)"
            order = list(SIZE_MEASURES).index(measure)
            sizes.setdefault((int(n), variant, order), {})[dialect] = text
    if sizes:
        lines += [
            "",
            f"| Finished rows | Measurement | {titles} |",
            "|---|---|" + "---:|" * len(dialects),
        ]
        for (n, variant, order), cells in sorted(
            sizes.items(), key=lambda r: (r[0][0], r[0][1] != "finished", r[0][2])
        ):
            label, unit = SIZE_MEASURES[list(SIZE_MEASURES)[order]]
            what = f"{n:,}" if variant == "finished" else f"{n:,} {SIZE_WHAT[variant]}"
            row = " | ".join(cells.get(d, "-") for d in dialects)
            lines.append(f"| {what} | {label} ({unit}) | {row} |")
    checks = evaluate(summary)
    if checks:
        lines += ["", "| Target | Goal | Measured | Met |", "|---|---|---:|---|"]
        for check in checks:
            lines.append(
                f"| {DIALECT_TITLES[check['dialect']]}: {check['target']} | {check['goal']} | "
                f"{fmt_target(check['metric'], check['measured'])} | "
                f"{'yes' if check['met'] else '**no**'} |"
            )
    return "\n".join(lines) + "\n"
