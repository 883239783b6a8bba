"""The peers rota is measured against (pgqueuer on PostgreSQL, huey on SQLite), each in its
own virtualenv under `.venv-bench/<peer>/`, made on first use from the pinned requirements
file beside this module and never mixed with rota's dependencies. Each measurement runs the
peer's script (`<peer>_peer.py`) in a subprocess with that venv's python; it answers JSON."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.db import BenchError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENVS = Path(os.environ.get("ROTA_BENCH_VENVS") or ROOT / ".venv-bench")


@dataclass(frozen=True)
class Peer:
    name: str
    dialect: str  # the database it is compared on

    @property
    def requirements(self) -> Path:
        return HERE / f"{self.name}.txt"

    @property
    def script(self) -> Path:
        return HERE / f"{self.name}_peer.py"

    @property
    def venv(self) -> Path:
        return VENVS / self.name

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def pinned_version(self) -> str:
        for line in self.requirements.read_text().splitlines():
            name, _, version = line.partition("==")
            if name.strip().lower() == self.name:
                return version.strip()
        return "?"


PEERS = {"pgqueuer": Peer("pgqueuer", "postgres"), "huey": Peer("huey", "sqlite")}


def _stamp(peer: Peer) -> str:
    """What the venv was built from: the requirements file and the base interpreter."""
    digest = hashlib.sha256(peer.requirements.read_bytes())
    digest.update(_base_python().encode())
    return digest.hexdigest()


def _base_python() -> str:
    # The interpreter rota's venv was made from, not the venv itself: a peer's venv must
    # not see rota's site-packages.
    return str(getattr(sys, "_base_executable", None) or sys.executable)


def ensure(peer: Peer, log: Any = print) -> Path:
    """The python of `peer`'s venv, created (or rebuilt when its pins changed) first."""
    stamp_file = peer.venv / ".bench-stamp"
    stamp = _stamp(peer)
    if peer.python.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return peer.python
    log(f"  creating {peer.venv} for {peer.name} {peer.pinned_version()} (first use only)")
    made = subprocess.run(
        [_base_python(), "-m", "venv", "--clear", str(peer.venv)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        raise BenchError(f"creating {peer.venv} failed:\n{made.stderr.strip()[-2000:]}")
    install = subprocess.run(
        [
            str(peer.python),
            *("-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"),
            *("-r", str(peer.requirements)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if install.returncode != 0:
        raise BenchError(
            f"installing {peer.requirements.name} into {peer.venv} failed:\n"
            + install.stderr.strip()[-2000:]
        )
    stamp_file.write_text(stamp)
    return peer.python


def run(peer: Peer, spec: dict[str, Any], *, timeout: float) -> dict[str, Any]:
    """One measurement by `peer` (its script, its venv's python); the JSON it printed."""
    try:
        proc = subprocess.run(
            [str(peer.python), str(peer.script), json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(HERE),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"{peer.name} {spec['op']}: no answer within {timeout:.0f}s") from None
    if proc.returncode != 0:
        raise BenchError(
            f"{peer.name} {spec['op']} failed (exit {proc.returncode}):\n"
            + (proc.stderr.strip() or proc.stdout.strip())[-2000:]
        )
    lines = proc.stdout.strip().splitlines()
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise BenchError(f"{peer.name} {spec['op']}: no JSON in {proc.stdout!r}") from None
    return result
