"""Soaks for issue 23, on PostgreSQL, with real `rota worker` processes.

    .venv/bin/python -m bench.soak deadlocks [--jobs 50000]
    .venv/bin/python -m bench.soak retention [--rate 5000 --minutes 10 --retention 1m]

`deadlocks`: two workers with a 2 s heartbeat run jobs that sleep 0-2.5 s, so every beat
renews jobs while completion batches of other jobs are written; it reports the server's
deadlock counter for the database (pg_stat_database.deadlocks) before and after, and the
lines of the workers' logs that mention a deadlock. Target: 0.

`retention`: finished jobs are written with plain SQL at `--rate` per second (the pruner
does not care how a job finished), while a `rota worker --retention completed=1m` leads
and prunes with its default settings; it samples the completed rows and the table's size
every 10 s. Target: both flat (bounded by rate x (retention + prune interval)). rota
leaves dead rows to autovacuum; on a server where it is off (as on the CI machine), the
soak stands in for it with a `VACUUM rota_jobs` every `--vacuum-every` seconds (autovacuum
at its default scale factor would run about as often at this rate).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rota
from bench import soak_app
from bench.db import fresh_database, pg_connect, vacuum_stand_in

PG_URL = os.environ.get("ROTA_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _worker(url: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ROTA_DATABASE_URL": url, "PYTHONPATH": str(Path.cwd())}
    return subprocess.Popen(
        [sys.executable, "-m", "rota", "worker", "--app", "bench.soak_app:app", *args],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _deadlocks(url: str) -> int:
    with pg_connect(url) as conn:
        row = conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def deadlocks(jobs: int) -> int:
    with fresh_database("postgres", pg_url=PG_URL, tmpdir=None) as db:
        rng = random.Random(23)
        with rota.App(db.url) as writer:
            soak_app.register(writer)
            task = writer.get_task(soak_app.LINGER)
            for start in range(0, jobs, 5000):
                end = min(start + 5000, jobs)
                task.enqueue_many(
                    [{"n": i, "ms": rng.randrange(0, 2500)} for i in range(start, end)]
                )
        folder = Path(tempfile.mkdtemp(prefix="rota-soak-"))
        before = _deadlocks(db.url)
        started = time.monotonic()
        procs = [
            _worker(db.url, folder / f"worker-{i}.log", "--queues", "soak=300", "--heartbeat", "2")
            for i in range(2)
        ]
        try:
            while True:
                with pg_connect(db.url) as conn:
                    left = conn.execute(
                        "SELECT count(*) FROM rota_jobs WHERE state <> 'completed'"
                    ).fetchone()
                if left is not None and left[0] == 0:
                    break
                if time.monotonic() - started > 1800:
                    raise SystemExit("soak did not finish in 30 minutes")
                time.sleep(2)
        finally:
            _stop(procs)
        took = time.monotonic() - started
        after = _deadlocks(db.url)
        mentions = [
            line
            for log in folder.glob("*.log")
            for line in log.read_text(errors="replace").splitlines()
            if "deadlock" in line.lower()
        ]
        print(f"{jobs} jobs in {took:.0f} s by 2 workers (heartbeat 2 s, 300 slots each)")
        print(f"server deadlocks during the soak: {after - before}")
        print(f"worker log lines mentioning a deadlock: {len(mentions)}")
        for line in mentions[:5]:
            print("  ", line)
        return after - before + len(mentions)


_FINISHED = """
INSERT INTO rota_jobs (task, queue, args, state, priority, attempt, max_attempts, run_at,
                       created_at, attempted_at, finished_at, worker, result, history)
SELECT 'shop.send_receipt', 'history', jsonb_build_object('order_id', g), 'completed', 0, 1, 3,
       now(), now(), now(), now(), 'soak', '{"ok": true}'::jsonb,
       '[{"attempt": 1, "outcome": "completed"}]'::jsonb
FROM generate_series(1, %s) AS g
"""


def retention(rate: int, minutes: float, keep: str, vacuum_every: float) -> None:
    with (
        fresh_database("postgres", pg_url=PG_URL, tmpdir=None) as db,
        vacuum_stand_in(db, vacuum_every),
    ):
        folder = Path(tempfile.mkdtemp(prefix="rota-soak-"))
        leader = _worker(
            db.url, folder / "leader.log", "--queues", "soak=1", "--retention", f"completed={keep}"
        )
        samples: list[tuple[float, int, int]] = []
        started = time.monotonic()
        tick = 0.2
        written = 0
        try:
            with pg_connect(db.url) as conn:
                next_sample = started
                while (now := time.monotonic()) - started < minutes * 60:
                    due = int((now - started) * rate) - written
                    if due > 0:
                        conn.execute(_FINISHED, (due,))
                        written += due
                    if now >= next_sample:
                        row = conn.execute(
                            "SELECT count(*) FILTER (WHERE state = 'completed'),"
                            " pg_total_relation_size('rota_jobs') FROM rota_jobs"
                        ).fetchone()
                        assert row is not None
                        samples.append((now - started, int(row[0]), int(row[1])))
                        print(
                            f"{now - started:6.0f} s  written {written:>9,}  "
                            f"completed rows {row[0]:>9,}  size {row[1] / 2**20:8.1f} MB",
                            flush=True,
                        )
                        next_sample += 10
                    time.sleep(max(0.0, tick - (time.monotonic() - now)))
        finally:
            _stop([leader])
        achieved = written / (time.monotonic() - started)
        half = len(samples) // 2
        late = samples[half:]
        print(f"written {written:,} finished jobs at {achieved:,.0f}/s")
        if late:
            print(
                "second half: completed rows median "
                f"{statistics.median(s[1] for s in late):,.0f}, max {max(s[1] for s in late):,}; "
                f"size median {statistics.median(s[2] for s in late) / 2**20:.0f} MB, "
                f"max {max(s[2] for s in late) / 2**20:.0f} MB; "
                f"first half max rows {max(s[1] for s in samples[:half] or [(0, 0, 0)]):,}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    dl = sub.add_parser("deadlocks")
    dl.add_argument("--jobs", type=int, default=50_000)
    ret = sub.add_parser("retention")
    ret.add_argument("--rate", type=int, default=5000)
    ret.add_argument("--minutes", type=float, default=10.0)
    ret.add_argument("--retention", default="1m")
    ret.add_argument("--vacuum-every", type=float, default=30.0)
    args = parser.parse_args()
    if args.what == "deadlocks":
        raise SystemExit(1 if deadlocks(args.jobs) else 0)
    retention(args.rate, args.minutes, args.retention, args.vacuum_every)


if __name__ == "__main__":
    main()
