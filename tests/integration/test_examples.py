"""Every example runs, as a user would run it: in a subprocess, against SQLite and (where the
example has a psycopg variant) PostgreSQL. The README's quickstart is checked to be the code
in examples/quickstart.py, and the ```python blocks of each docs page run in order, so the
documentation cannot drift from working code (```py blocks are shown, not run)."""

from __future__ import annotations

import contextlib
import io
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
# A ```python block, and the ```text block right after it if there is one: what it prints.
BLOCK = re.compile(r"^```python\n(.*?)^```\n(?:\n*```text\n(.*?)^```\n)?", re.DOTALL | re.M)


def printed_as_shown(out: str, shown: str) -> bool:
    """`out` is what the page shows, where `...` in it stands for any text (ids, times)."""
    pattern = ".*?".join(re.escape(part) for part in shown.strip().split("..."))
    return re.fullmatch(pattern, out.strip(), flags=re.DOTALL) is not None


@pytest.mark.parametrize("page", DOC_PAGES, ids=[p.stem for p in DOC_PAGES])
def test_doc_page_code_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each block runs in order, and what it prints is what the page shows after it (a
    block that prints must show it); a page that runs code checks something (#19)."""
    blocks = BLOCK.findall(page.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROTA_DATABASE_URL", raising=False)
    # "__main__": as its reader runs it (python page.py), so nothing may depend on the
    # test module's name. A script run that way has no module spec; pytest started as
    # `python -m pytest` (as `make test` does) would otherwise lend it "pytest.__main__".
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", None, raising=False)
    namespace: dict[str, object] = {"__name__": "__main__"}
    checks = 0
    try:
        for number, (block, shown) in enumerate(blocks, 1):
            where = f"{page.name}, python block {number}"
            # dont_inherit: a page runs as its reader runs it, not under this module's
            # `from __future__ import annotations`.
            code = compile(block, where, "exec", dont_inherit=True)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
            printed = out.getvalue()
            if shown:
                assert printed_as_shown(printed, shown), (
                    f"{where} printed:\n{printed}\nbut the page shows:\n{shown}"
                )
            else:
                assert not printed, f"{where} prints, but the page does not show it:\n{printed}"
            checks += bool(shown) + block.count("assert ")
    finally:
        app = namespace.get("app")
        if isinstance(app, rota.App):
            app.close()
    assert not blocks or checks, f"{page.name} runs code but checks nothing it does"


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
