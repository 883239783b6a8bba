"""One rota drain in this very process, for profilers: prefill a fresh database, then run
one worker until it is empty (`py-spy record -- python -m bench.profile`, or `--cprofile`)."""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
from collections.abc import Sequence

from bench import rota_runs, tasks
from bench.db import check_drained, fresh_database, prefill
from bench.runner import DEFAULT_PG_URL


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile",
        description="Drain one prefilled database with one rota worker in this process, e.g. "
        "`py-spy record -o drain.svg -- .venv/bin/python -m bench.profile --dialect postgres`.",
    )
    parser.add_argument("--dialect", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--task", choices=("async", "sync"), default="async")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--cprofile", metavar="PATH", help="write cProfile stats (loop thread)")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("ROTA_BENCH_POSTGRES_URL") or DEFAULT_PG_URL,
    )
    parser.add_argument("--tmpdir", default=None)
    args = parser.parse_args(argv)
    task_name = tasks.NOOP_ASYNC if args.task == "async" else tasks.NOOP_SYNC
    with fresh_database(args.dialect, pg_url=args.postgres_url, tmpdir=args.tmpdir) as db:
        prefill(db, task_name, args.jobs)
        profiler = cProfile.Profile() if args.cprofile else None
        if profiler is not None:
            profiler.enable()
        result = rota_runs.drain_child(db.url, args.jobs, 300.0)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.cprofile)
        check_drained(db, args.jobs, "profiled drain")
    rate = args.jobs / result["elapsed"]
    cpu = result["cpu"] / args.jobs * 1e6
    print(
        f"{args.dialect} {args.task}: {rate:,.0f} jobs/s, client CPU {cpu:.0f} us/job "
        f"({result['batches']} claims)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
