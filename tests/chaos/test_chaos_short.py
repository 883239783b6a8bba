"""The short chaos run (`python -m bench.chaos`) on PostgreSQL, as CI runs it: 500 orders
over HTTP, three workers with one SIGKILLed every 1.5 s, every backend of the run's own
database terminated half-way (the CI stand-in for a server restart, which would disturb the
other tests sharing the server), and a SIGTERM drain. The runner checks lost orders = 0,
duplicate tickets = 0, every job terminal, no poison job stuck and no job run twice after
it succeeded, and exits non-zero otherwise. Then five workers with the default settings are
SIGKILLed holding jobs, for the rescue time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import PG_URL, require_postgres

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.mark.timeout(420)
def test_short_chaos_run_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    require_postgres()
    # The runner creates (and drops) a database of its own, so terminating its backends
    # touches no other test's connections.
    server = urlunsplit(urlsplit(PG_URL)._replace(path="/postgres"))
    dbname = f"rota_chaos_{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    env["COLUMNS"] = "120"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.chaos",
            "--orders",
            "500",
            "--workers",
            "3",
            "--kill-every",
            "1.5",
            "--min-kills",
            "3",
            "--restart",
            "terminate",
            "--server",
            server,
            "--dbname",
            dbname,
            "--out",
            str(tmp_path / "chaos"),
            "--timeout",
            "300",
            "--rescue-kills",
            "5",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "PASSED" in out
    for check in (
        "lost orders",
        "duplicate tickets",
        "duplicate mails",
        "jobs not terminal",
        "poison jobs stuck",
        "run twice after success",
    ):
        assert re.search(rf"✓ {check}\s+0\b", out), (check, out)
    result = json.loads((tmp_path / "chaos" / "result.json").read_text())
    figures, audit = result["figures"], result["audit"]
    assert figures["orders"] == 500 and audit["orders"] == 500
    assert figures["kills"] >= 3 and figures["restart_seconds"] is not None
    assert audit["tickets"] == audit["pdfs"] == 500 - audit["broken"] > 0
    assert audit["dead_letters"] == audit["broken"] == 10
    assert figures["unexpected_exits"] == 0 and not any(figures["sigterm_exit_codes"])
    # The poison jobs (#17): each ended with its outcome recorded, beside healthy probes.
    poison = figures["poison"]
    assert poison["poison_jobs"] == 8 and poison["stuck"] == poison["wrong_outcome"] == 0
    assert poison["probes_completed"] == poison["probes"] == 20
    assert poison["run_twice_after_success"] == 0
    # The rescue phase (#17): workers with the default 30 s lease, SIGKILLed holding jobs;
    # every job they held ran again, rescued as gone (their presence), not on the lease.
    rescue = figures["rescue"]
    assert rescue["kills"] == 5 and rescue["jobs"] >= 5
    assert rescue["rescued_as"] == {"WorkerGone": rescue["jobs"]}
    assert "rescue after kill -9" in out
