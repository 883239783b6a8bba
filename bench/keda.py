"""`python -m bench.keda`: how long KEDA's query takes on PostgreSQL, on a table of many
finished jobs with a backlog of a given size (SEMANTICS §3.3 asks for < 10 ms at 1 M rows).

    python -m bench.keda --rows 1000000 --backlog 1000 10000 100000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence

from bench.db import fresh_database, pg_connect
from bench.runner import DEFAULT_PG_URL
from rota.k8s import Signal, keda_query

# Finished jobs with a realistic spread over two queues; the backlog is added per step.
FILL = """
INSERT INTO rota_jobs (task, queue, state, max_attempts, run_at, attempted_at, finished_at)
SELECT 't', CASE WHEN i %% 4 = 0 THEN 'other' ELSE 'q' END, 'completed', 3,
       now() - interval '1 hour', now() - interval '1 hour', now() - interval '59 minutes'
FROM generate_series(1, %(rows)s) AS i
"""
BACKLOG = """
INSERT INTO rota_jobs (task, queue, state, max_attempts, run_at)
SELECT 't', 'q', CASE WHEN i %% 10 = 0 THEN 'retryable' ELSE 'available' END, 3,
       now() - interval '1 second'
FROM generate_series(1, %(rows)s) AS i
"""


def measure(url: str, samples: int) -> list[float]:
    query = keda_query("q", Signal.DEMAND).encode()
    with pg_connect(url) as conn:
        for _ in range(20):  # warm the plan cache and the buffers
            conn.execute(query)
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            conn.execute(query).fetchone()
            times.append((time.perf_counter() - start) * 1000)
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.keda", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="finished jobs")
    parser.add_argument("--backlog", type=int, nargs="+", default=[0, 1_000, 10_000, 100_000])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument(
        "--postgres-url", default=os.environ.get("ROTA_BENCH_POSTGRES_URL") or DEFAULT_PG_URL
    )
    args = parser.parse_args(argv)
    with fresh_database("postgres", pg_url=args.postgres_url, tmpdir=None) as db:
        with pg_connect(db.url) as conn:
            conn.execute(FILL, {"rows": args.rows})
        added = 0
        print(f"{args.rows} finished jobs; query: {keda_query('q')}")
        print(f"{'backlog':>8} {'median ms':>10} {'p99 ms':>8}")
        for backlog in sorted(args.backlog):
            with pg_connect(db.url) as conn:
                if backlog > added:
                    conn.execute(BACKLOG, {"rows": backlog - added})
                    added = backlog
                conn.execute("VACUUM (ANALYZE) rota_jobs")  # as autovacuum would, soon
            times = sorted(measure(db.url, args.samples))
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            print(f"{backlog:>8} {statistics.median(times):>10.3f} {p99:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
