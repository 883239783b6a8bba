"""What app.wait's trigger (migration 0017) costs the PostgreSQL drain. One drain runs
rota's own claim statement (which carries the last batch's completions) in a raw loop and
switches, every BLOCK batches, between three modes: the trigger disabled, enabled with no
job awaited (the usual case), and enabled with every job awaited (each finish sends a
NOTIFY). Interleaving the modes inside one drain puts them under the same load, which on
a shared machine moves far more than the trigger does; the first batch after each switch
(a re-plan) is left out. Reported: the median time per batch of 100 claimed and completed
jobs in each mode, and the fastest batch (the least disturbed by other load).

    python -m bench.awaited --jobs 60000
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from typing import Any

from psycopg.rows import dict_row

from bench.db import fresh_database, pg_connect, prefill, settle
from bench.raw import BATCH, LEASE_SECONDS, QUEUE, _pg_complete_params, statements
from bench.tasks import NOOP_SYNC

MODES = ("trigger disabled", "trigger, none awaited", "trigger, all awaited")
BLOCK = 10  # batches per mode before switching
DEFAULT_URL = os.environ.get(
    "ROTA_BENCH_POSTGRES_URL",
    os.environ.get("ROTA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
)


def measure(pg_url: str, jobs: int) -> tuple[dict[str, list[float]], int, int]:
    """Seconds per batch (claim + the previous batch's completions) by mode, the jobs
    flagged awaited, and the NOTIFYs rota_done sent (the same, or the trigger is off)."""
    times: dict[str, list[float]] = {m: [] for m in MODES}
    with fresh_database("postgres", pg_url=pg_url, tmpdir=None) as db:
        prefill(db, NOOP_SYNC, jobs)
        claim_sql, _ = statements("postgres", "rota")
        params = {
            "queue": QUEUE,
            "limit": BATCH,
            "worker": f"awaited-{uuid.uuid4().hex[:6]}",
            "lease": LEASE_SECONDS,
            "caps": None,
        }
        with (
            pg_connect(db.url, row_factory=dict_row) as conn,
            pg_connect(db.url) as listener,
        ):
            listener.execute("LISTEN rota_done")
            first = int(conn.execute("SELECT min(id) AS m FROM rota_jobs").fetchone()["m"])
            # Jobs are claimed in id order, BATCH at a time: the blocks of the third mode
            # hold awaited jobs, the others none.
            period = BLOCK * BATCH * len(MODES)
            flagged = conn.execute(
                "UPDATE rota_jobs SET awaited = true "
                "WHERE (id - %(first)s) %% %(period)s >= %(start)s",
                {"first": first, "period": period, "start": 2 * BLOCK * BATCH},
            ).rowcount
            settle(db)
            carried: list[dict[str, Any]] = []
            batch = 0
            while True:
                # `carried` is batch-1's jobs; their completion rides on this claim.
                mode = MODES[((batch - 1) // BLOCK) % len(MODES)] if batch else MODES[0]
                if batch and (batch - 1) % BLOCK == 0:
                    action = "DISABLE" if mode == MODES[0] else "ENABLE"
                    conn.execute(f"ALTER TABLE rota_jobs {action} TRIGGER rota_jobs_awaited_done")
                started = time.perf_counter()
                found = conn.execute(
                    claim_sql[0], {**params, **_pg_complete_params("rota", carried)}
                ).fetchall()
                elapsed = time.perf_counter() - started
                if batch and (batch - 1) % BLOCK != 0 and len(carried) == BATCH:
                    times[mode].append(elapsed)
                carried = [r for r in found if r["kind"] == "job"]
                if not carried:
                    break
                batch += 1
            notified = sum(1 for _ in listener.notifies(timeout=2.0))
    return times, flagged, notified


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=60_000)
    parser.add_argument("--postgres-url", default=DEFAULT_URL)
    args = parser.parse_args(argv)
    times, flagged, notified = measure(args.postgres_url, args.jobs)
    base = statistics.median(times[MODES[0]])
    print(
        f"PostgreSQL, rota's claim+complete statement, {args.jobs:,} jobs in batches of "
        f"{BATCH}, modes interleaved every {BLOCK} batches:"
    )
    fastest = min(times[MODES[0]])
    for mode in MODES:
        median = statistics.median(times[mode])
        least = min(times[mode])
        print(
            f"  {mode:<24} median {median * 1000:6.2f} ms/batch ({median / base:.1%} of "
            f"disabled), fastest {least * 1000:6.2f} ms ({least / fastest:.1%}), "
            f"n={len(times[mode])}"
        )
    print(f"  awaited jobs {flagged:,}, NOTIFY rota_done sent {notified:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
