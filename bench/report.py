"""Statistics (medians across runs, latency percentiles), the issue's targets, and the
output: a rich table for people, JSON for machines."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

DIALECT_TITLES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str  # "jobs/s" | "ms" | "ratio"


METRICS: tuple[Metric, ...] = (
    Metric("enqueue_single", "enqueue, single (task.enqueue)", "jobs/s"),
    Metric("enqueue_bulk", "enqueue, bulk (enqueue_many x1000)", "jobs/s"),
    Metric("drain_baseline", "drain, raw-SQL baseline (lean SQL)", "jobs/s"),
    Metric("drain_rota_sql", "drain, raw loop running rota's SQL", "jobs/s"),
    Metric("drain_async", "drain, rota worker, async no-op", "jobs/s"),
    Metric("drain_sync", "drain, rota worker, sync no-op", "jobs/s"),
    Metric("ratio_async", "  async / baseline", "ratio"),
    Metric("ratio_sync", "  sync / baseline", "ratio"),
    Metric("ratio_rota_sql", "  rota's SQL, raw loop / baseline", "ratio"),
    Metric("claim_size_async", "  mean claim size, async drain", "jobs"),
    Metric("claim_size_sync", "  mean claim size, sync drain", "jobs"),
    Metric("cpu_us_baseline", "  worker-process CPU per job, baseline", "us/job"),
    Metric("cpu_us_async", "  worker-process CPU per job, async", "us/job"),
    Metric("cpu_us_sync", "  worker-process CPU per job, sync", "us/job"),
    Metric("latency_p50", "enqueue-to-start p50", "ms"),
    Metric("latency_p95", "enqueue-to-start p95", "ms"),
    Metric("latency_p99", "enqueue-to-start p99", "ms"),
    Metric("latency_max", "enqueue-to-start max", "ms"),
    Metric("latency_commit_p50", "  commit-to-start p50", "ms"),
)


@dataclass(frozen=True)
class Target:
    dialect: str
    metric: str
    label: str
    check: Callable[[float], bool]
    goal: str


TARGETS: tuple[Target, ...] = (
    Target("postgres", "ratio_async", "drain (async) vs baseline", lambda v: v >= 0.40, ">= 40%"),
    Target("postgres", "ratio_sync", "drain (sync) vs baseline", lambda v: v >= 0.40, ">= 40%"),
    Target("postgres", "enqueue_bulk", "bulk enqueue", lambda v: v >= 30_000, ">= 30,000/s"),
    Target("postgres", "latency_p50", "latency p50", lambda v: v < 3.0, "< 3 ms"),
    Target("postgres", "latency_p99", "latency p99", lambda v: v < 25.0, "< 25 ms"),
    Target("sqlite", "ratio_async", "drain (async) vs baseline", lambda v: v >= 0.25, ">= 25%"),
    Target("sqlite", "ratio_sync", "drain (sync) vs baseline", lambda v: v >= 0.25, ">= 25%"),
    Target("sqlite", "latency_p50", "latency p50", lambda v: v < 5.0, "< 5 ms"),
)


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
    for target in TARGETS:
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
    if unit == "ms":
        return f"{value:.2f}"
    return f"{value:.1f}"


def fmt_target(metric: str, value: float) -> str:
    unit = next(m.unit for m in METRICS if m.key == metric)
    text = fmt(value, unit)
    return f"{text} {unit}" if unit in ("ms", "jobs/s") else text


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
        unit = "" if metric.unit == "ratio" else metric.unit
        row = [fmt(summary[d].get(metric.key), metric.unit) for d in dialects]
        table.add_row(metric.label, unit, *row)
    console.print(table)

    checks = evaluate(summary)
    if checks:
        targets = Table(title="targets (from the issue)", title_justify="left")
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
    described = ", ".join(f"{k}: {v}" for k, v in machine.items())
    console.print(f"[dim]{described}[/]")
    seen = [f"{v:.0%}" for run in busy for v in run.values() if v is not None]
    if seen:
        console.print(f"[dim]CPU used by other processes before each run: {', '.join(seen)}[/]")
