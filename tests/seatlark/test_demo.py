"""`make demo` as a user runs it, on SQLite and on PostgreSQL (one flag): real API and worker
processes, a SIGKILL mid-job, the report twice, and a summary whose checks all pass."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
ORDERS = 75  # 3 of them (every 25th) for the show without a seat map

pytestmark = pytest.mark.e2e


def run_demo(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROTA_", "SEATLARK_"))}
    env["COLUMNS"] = "120"  # rich wraps at 80 columns when it is not on a terminal
    done = subprocess.run(
        [sys.executable, "-m", "examples.seatlark.demo", "--orders", str(ORDERS), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def check_summary(out: str, folder: Path) -> None:
    broken = ORDERS // 25
    assert re.search(r"migrated: rota's tables \(rota migrate\), then the shop's as\s+one-off", out)
    assert "refused 7 bad requests with 4xx; nothing stored" in out
    assert re.search(r"killed seatlark-worker-1 with SIGKILL after \d+ of", out), out
    assert re.search(rf"orders placed\s+{ORDERS}\b.*lost: 0", out), out
    assert re.search(rf"tickets issued\s+{ORDERS - broken}\b", out), out
    assert re.search(r"duplicate tickets\s+0\b", out), out
    assert re.search(rf"mails delivered\s+{ORDERS - broken}\b", out), out
    assert re.search(rf"dead letters\s+{broken}\b", out), out
    assert re.search(r"SeatMapError: order \d+: The Vanishing Act has no seat map yet", out)
    assert re.search(r"payout report.*run 2 times, same output", out), out
    assert re.search(r"checks\s+✓", out), out

    pdfs = sorted((folder / "tickets").glob("*.pdf"))
    assert len(pdfs) == ORDERS - broken
    assert pdfs[0].read_bytes().startswith(b"%PDF-")
    (report,) = (folder / "reports").glob("payout-*.json")
    figures = json.loads(report.read_text())
    assert figures["orders"] == ORDERS - broken and figures["cents"] > 0


def test_demo_on_sqlite(tmp_path: Path) -> None:
    out = run_demo("--out", str(tmp_path))
    check_summary(out, tmp_path)
    assert "on SQLite" in out
    assert (tmp_path / "seatlark-worker-3.log").exists()


@pytest.mark.postgres
def test_demo_on_postgres(pg_url: str, tmp_path: Path) -> None:
    # The demo drops and recreates its schema: give it the fixture's, dropped after the test.
    found = re.search(r"search_path=(\w+)", unquote(pg_url))
    assert found is not None
    out = run_demo("--database-url", pg_url, "--schema", found.group(1), "--out", str(tmp_path))
    check_summary(out, tmp_path)
    assert "on PostgreSQL" in out
