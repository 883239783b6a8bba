"""What app.wait's trigger (migration 0017) costs the PostgreSQL drain: the raw loop that
runs rota's own claim/complete SQL drains the same table with the trigger dropped, with
it present and no job awaited (the usual case), and with every job awaited (each finish
sends a NOTIFY). Interleaved runs, medians.

    python -m bench.awaited --jobs 20000 --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from bench.db import fresh_database, pg_connect, prefill, settle
from bench.raw import drain_child
from bench.tasks import NOOP_SYNC

VARIANTS = ("no trigger", "trigger, none awaited", "trigger, all awaited")
DEFAULT_URL = os.environ.get(
    "ROTA_BENCH_POSTGRES_URL",
    os.environ.get("ROTA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
)


def drain_once(pg_url: str, variant: str, jobs: int) -> float:
    """Jobs per second of one drain of `jobs` fresh jobs in `variant`."""
    with fresh_database("postgres", pg_url=pg_url, tmpdir=None) as db:
        prefill(db, NOOP_SYNC, jobs)
        with pg_connect(db.url) as conn:
            if variant == "no trigger":
                conn.execute("DROP TRIGGER rota_jobs_awaited_done ON rota_jobs")
            elif variant == "trigger, all awaited":
                conn.execute("UPDATE rota_jobs SET awaited = true")
        settle(db)
        result = drain_child("postgres", db.url, "", "rota", jobs)
        if result["completed"] != jobs:
            raise SystemExit(f"{variant}: drained {result['completed']} of {jobs}")
        return float(jobs / result["elapsed"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--postgres-url", default=DEFAULT_URL)
    args = parser.parse_args(argv)
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for run in range(args.runs):
        for variant in VARIANTS if run % 2 == 0 else reversed(VARIANTS):
            rates[variant].append(drain_once(args.postgres_url, variant, args.jobs))
        print(
            f"run {run + 1}/{args.runs}: "
            + ", ".join(f"{v} {rates[v][-1]:,.0f}/s" for v in VARIANTS),
            file=sys.stderr,
        )
    base = statistics.median(rates["no trigger"])
    print(
        f"PostgreSQL drain of {args.jobs:,} jobs, rota's SQL in a raw loop, "
        f"medians of {args.runs} interleaved runs:"
    )
    for variant in VARIANTS:
        median = statistics.median(rates[variant])
        print(f"  {variant:<24} {median:>9,.0f} jobs/s  ({median / base:.1%} of no trigger)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
