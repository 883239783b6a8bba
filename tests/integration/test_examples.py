"""Every example runs, as a user would run it: in a subprocess, against SQLite and (where the
example has a psycopg variant) PostgreSQL. The README's quickstart is checked to be the code
in examples/quickstart.py, and the ```python blocks of each docs page run in order, so the
documentation cannot drift from working code (```py blocks are shown, not run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rota

REPO = Path(__file__).resolve().parents[2]


def run(args: list[str], *, cwd: Path = REPO, url: str | None = None, timeout: float = 60) -> str:
    """Run `python ARGS`; fail with its output unless it exits 0; return stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    if url is not None:
        env["ROTA_DATABASE_URL"] = url
    env["COLUMNS"] = "120"  # rich wraps at 80 columns when it is not on a terminal
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_quickstart(tmp_path: Path) -> None:
    out = run([str(REPO / "examples" / "quickstart.py")], cwd=tmp_path)
    assert "enqueued job 1 (available)" in out
    assert "job 2 runs in an hour (scheduled)" in out  # typed enqueue with options
    assert "refused: bad arguments for task" in out
    assert "unexpected argument 'emial'" in out
    assert "job 1 is completed: Hello Ada, welcome aboard! (sent to ada@example.com)" in out
    assert (tmp_path / "quickstart.db").exists()


def test_readme_quickstart_is_the_tested_example() -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    assert blocks, "README.md has no python code block"
    example = (REPO / "examples" / "quickstart.py").read_text()
    assert blocks[0].strip() in example, "README quickstart differs from examples/quickstart.py"


DOC_PAGES = sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "benchmarks.md")


@pytest.mark.parametrize("page", DOC_PAGES, ids=[p.stem for p in DOC_PAGES])
def test_doc_page_code_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.DOTALL | re.M)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROTA_DATABASE_URL", raising=False)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    try:
        for number, block in enumerate(blocks, 1):
            # dont_inherit: a page runs as its reader runs it, not under this module's
            # `from __future__ import annotations`.
            code = compile(block, f"{page.name}, python block {number}", "exec", dont_inherit=True)
            exec(code, namespace)
    finally:
        app = namespace.get("app")
        if isinstance(app, rota.App):
            app.close()


def test_transactional_enqueue_sqlite(sqlite_url: str) -> None:
    out = run(["-m", "examples.transactional_enqueue"], url=sqlite_url)
    assert "committed:   job 1 for order 1 is stored" in out
    assert "rolled back: job 2 for order 2 is gone" in out
    assert "drained 1 job: receipt for order 1 sent" in out


@pytest.mark.postgres
def test_transactional_enqueue_postgres(pg_url: str) -> None:
    out = run(["-m", "examples.transactional_enqueue"], url=pg_url)
    assert "committed:   job 1 for order 1 is stored" in out
    assert "rolled back: job 2 for order 2 is gone" in out
    assert "drained 1 job: receipt for order 1 sent" in out


# The Seatlark demo's tests are in tests/seatlark/test_demo.py.
