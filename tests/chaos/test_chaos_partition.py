"""The partition chaos run (`python -m bench.chaos --fault partition`, #21) in a short
form: three workers, one behind the standard-library proxy, cut for longer than the lease.
The runner checks the figures (nothing started while cut off, no effect after a lease ran
out, nothing lost or applied twice, every slot back within 5 s, one leader at a time) and
exits non-zero otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import PG_URL, require_postgres

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("variant", ["blackhole", "leader"])
def test_a_cut_off_worker_stops_in_time_and_is_whole_again(tmp_path: Path, variant: str) -> None:
    require_postgres()
    server = urlunsplit(urlsplit(PG_URL)._replace(path="/postgres"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.chaos",
            "--fault",
            "partition",
            "--variant",
            variant,
            "--lease",
            "4",
            "--heartbeat",
            "1",
            "--leader-ttl",
            "3",
            "--cut",
            "6",
            "--task-seconds",
            "6",
            "--server",
            server,
            "--dbname",
            f"rota_partition_{uuid.uuid4().hex[:10]}",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "PASSED" in out
    figures = json.loads((tmp_path / "out" / "result.json").read_text())["figures"]
    assert figures["started_while_cut_off"] == 0 and figures["lost"] == 0
    assert figures["lease_lost_s"] is not None and figures["lease_lost_s"] < 4
