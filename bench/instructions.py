"""Client instructions per single enqueue, counted by valgrind (callgrind): rota's
`task.enqueue(n=i)` beside the raw insert on one plain connection, in the same database.

Wall time on a shared machine moves by a third between phases, and a single enqueue's
client work is a tenth of its wall time beside the commit: a change of 5% in that work
drowns in the noise of paired rounds. Instructions do not move with the machine. Each
subject runs in a child process under callgrind twice, once with no calls and once with
`--calls`, after the same warm-up; the difference over the calls is the count per call
(about +-2k between identical runs at 1,000 calls).

    python -m bench.instructions --dialect postgres --calls 1000

It needs `valgrind` (Debian's package); it takes about a minute per child, two at a time."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.cli import CHECKOUT_PATH
from bench.db import Database, fresh_database, pg_connect, sqlite_connect
from bench.raw import PG_INSERT, SQLITE_INSERT
from bench.runner import DEFAULT_PG_URL
from bench.tasks import NOOP_ASYNC, QUEUE, make_app

SUBJECTS = ("raw", "rota")
WARMUP = 50


def child(subject: str, calls: int, dialect: str, url: str, path: str) -> None:
    """Warm both subjects up, then make `calls` calls of `subject` (run under callgrind)."""
    conn: Any = pg_connect(url) if dialect == "postgres" else sqlite_connect(path)
    sql = PG_INSERT if dialect == "postgres" else SQLITE_INSERT
    with make_app(url) as app:
        task = app.get_task(NOOP_ASYNC)

        def raw(i: int) -> None:
            params = {"task": NOOP_ASYNC, "queue": QUEUE, "args": json.dumps({"n": i})}
            conn.execute(sql, params).fetchone()

        def rota(i: int) -> None:
            task.enqueue(n=i)

        calls_of: dict[str, Callable[[int], None]] = {"raw": raw, "rota": rota}
        for i in range(WARMUP):  # statements prepared, pools open, caches warm: for both
            raw(i)
            rota(i)
        call = calls_of[subject]
        for i in range(calls):
            call(i)
    conn.close()


def counted(subject: str, calls: int, db: Database) -> int:
    """Instructions callgrind counted in a child making `calls` calls of `subject`."""
    with tempfile.TemporaryDirectory(prefix="rota-callgrind-") as folder:
        out = Path(folder, "callgrind.out")
        argv = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "bench.instructions",
            "--child",
            subject,
            str(calls),
            db.dialect,
            db.url,
            db.sqlite_path,
        ]
        env = dict(os.environ, PYTHONPATH=CHECKOUT_PATH)
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{subject} under callgrind failed:\n{done.stderr[-2000:]}")
        for line in out.read_text().splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise SystemExit("callgrind wrote no totals line")


def measure(db: Database, calls: int) -> dict[str, float]:
    """Instructions per call of each subject, two children at a time."""
    runs = [("rota", 0), *((subject, calls) for subject in SUBJECTS)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        counts = pool.map(lambda run: counted(run[0], run[1], db), runs)
        totals = dict(zip(runs, counts, strict=True))
    base = totals[("rota", 0)]
    return {subject: (totals[(subject, calls)] - base) / calls for subject in SUBJECTS}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        subject, calls, dialect, url, path = argv[1:6]
        child(subject, int(calls), dialect, url, path)
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.instructions",
        description="Client instructions per single enqueue (rota and the raw insert), "
        "counted by valgrind's callgrind.",
    )
    parser.add_argument("--dialect", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("ROTA_BENCH_POSTGRES_URL") or DEFAULT_PG_URL,
    )
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian: apt install valgrind)", file=sys.stderr)
        return 2
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    dialects = ("sqlite", "postgres") if args.dialect == "both" else (args.dialect,)
    for dialect in dialects:
        with fresh_database(dialect, pg_url=args.postgres_url, tmpdir=None) as db:
            per_call = measure(db, args.calls)
        rota, raw = per_call["rota"], per_call["raw"]
        print(
            f"{dialect}: single enqueue {rota / 1000:,.1f}k instructions a call, raw insert "
            f"{raw / 1000:,.1f}k ({rota / raw:.2f}x), over {args.calls:,} calls"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
