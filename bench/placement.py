"""Where new jobs land beside finished ones, and what a claim then reads (issue 23).

    python -m bench.placement --finished 1M --jobs 50000

Fills a fresh PostgreSQL schema with N finished jobs (bench.sizes), enqueues a burst of
jobs through rota, and reports how many heap pages the burst occupies (against an empty
schema) and the buffers one claim of 100 reads from outside shared_buffers, from
`EXPLAIN (ANALYZE, BUFFERS)`. A burst spread over one page per job no longer fits in
memory, and each claim and completion reads its pages back: the drain beside a large
history falls for that reason (docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from psycopg.rows import dict_row

from bench import raw, tasks
from bench.db import checkpoint, fresh_database, pg_connect, prefill
from bench.runner import DEFAULT_PG_URL, _size
from bench.sizes import VARIANTS, fill

PAGES = "SELECT count(DISTINCT (ctid::text::point)[0]) AS pages FROM rota_jobs WHERE queue = %s"
CLAIM_PARAMS = {"queue": tasks.QUEUE, "limit": 100, "worker": "placement", "lease": 30.0}


def claim_reads(url: str) -> dict[str, int]:
    """One claim of 100 jobs under EXPLAIN (ANALYZE, BUFFERS): shared buffers hit and read."""
    claim, _ = raw.statements("postgres", "rota")
    params: dict[str, Any] = {**CLAIM_PARAMS, "caps": None, **raw._pg_complete_params("rota", [])}
    with pg_connect(url, row_factory=dict_row) as conn:
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claim[0], params).fetchone()
    assert row is not None
    plan = row["QUERY PLAN"][0]["Plan"]
    return {"hit": int(plan["Shared Hit Blocks"]), "read": int(plan["Shared Read Blocks"])}


def measure(pg_url: str, finished: int, variant: str, jobs: int) -> dict[str, int]:
    with fresh_database("postgres", pg_url=pg_url, tmpdir=None) as db:
        fill(db, finished, variant)
        checkpoint(db)
        prefill(db, tasks.NOOP_ASYNC, jobs)
        with pg_connect(db.url, row_factory=dict_row) as conn:
            row = conn.execute(PAGES, (tasks.QUEUE,)).fetchone()
        assert row is not None
        return {"pages": int(row["pages"]), **claim_reads(db.url)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.placement", description=__doc__)
    parser.add_argument("--finished", type=_size, default=1_000_000)
    parser.add_argument("--variant", choices=VARIANTS, default="finished")
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("ROTA_BENCH_POSTGRES_URL") or DEFAULT_PG_URL,
    )
    args = parser.parse_args(argv)
    for n in (0, args.finished):
        got = measure(args.postgres_url, n, args.variant, args.jobs)
        print(
            f"{args.jobs:,} new jobs beside {n:,} {args.variant} rows: on {got['pages']:,} "
            f"heap pages; one claim of 100 read {got['read']} buffers, hit {got['hit']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
