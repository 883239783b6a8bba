"""examples/nightly_pipeline.py end to end, as a user runs it (a subprocess with its own
worker), on SQLite and PostgreSQL: extract -> 20 shards -> one receipt per customer ->
a summary that receives every receipt."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The example's data: 37 customers with 5 orders each.
REVENUE = sum(100 + (i * 37 + n * 11) % 900 for i in range(37) for n in range(5)) / 100


def run_example(url: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    env["ROTA_DATABASE_URL"] = url
    done = subprocess.run(
        [sys.executable, "-m", "examples.nightly_pipeline"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def check(out: str) -> None:
    assert "started workflow 1 (nightly-2026-11-29); starting it again returned 1" in out
    assert re.search(r"workflow 1 completed in [\d.]+s", out), out
    assert re.search(r"extract\s+completed\s+1 job", out), out
    assert re.search(r"process\s+completed\s+20 job", out), out
    assert re.search(r"send_receipt\s+completed\s+37 job", out), out
    assert re.search(r"summarize\s+completed\s+1 job", out), out
    assert f"summary: 37 receipts for 37 customers, revenue {REVENUE:.2f}" in out


def test_nightly_pipeline_sqlite(sqlite_url: str) -> None:
    check(run_example(sqlite_url))


@pytest.mark.postgres
def test_nightly_pipeline_postgres(pg_url: str) -> None:
    check(run_example(pg_url))
