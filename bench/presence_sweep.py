"""What the presence sweep costs on PostgreSQL (#17): every worker runs it once a second,
so it must stay cheap beside many workers. Registers N workers as present (their rows, and
their advisory locks held by one session, to spare the server's connections: the lock
table the sweep reads is the same), then times the sweep when all are alive.

    python -m bench.presence_sweep --workers 10 50 200
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import psycopg
from psycopg.rows import dict_row

import rota

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def measure(url: str, workers: int, rounds: int) -> dict[str, float]:
    schema = f"rota_bench_presence_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    scoped = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    app = rota.App(scoped)
    holder = psycopg.connect(scoped, autocommit=True, row_factory=dict_row)
    try:
        app.migrate()
        with app.driver.database.write(holder) as session:
            for n in range(workers):
                row = session.one("presence_register", {"worker": f"w{n}", "host": "h", "pid": n})
                assert row is not None and row["locked"]
        sweep = app.driver.presence.sweep
        sweep()  # warm: connection, plan
        took = []
        for _ in range(rounds):
            started = time.perf_counter()
            report = sweep()
            took.append((time.perf_counter() - started) * 1000)
            assert report.rescued == 0
        took.sort()
        return {
            "workers": workers,
            "mean_ms": round(statistics.fmean(took), 3),
            "p50_ms": round(took[len(took) // 2], 3),
            "p99_ms": round(took[int(len(took) * 0.99) - 1], 3),
        }
    finally:
        holder.close()
        app.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.presence_sweep", description=__doc__)
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--workers", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args()
    for n in args.workers:
        print(measure(args.url, n, args.rounds))


if __name__ == "__main__":
    main()
