"""Typing (#19): users' type checkers see rota's types (py.typed ships in the wheel) and
check a task's arguments through `task.options(...).enqueue(...)`: mypy --strict passes
a typed example and refuses, line by line, one that passes wrong arguments."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def mypy(tmp_path: Path, source: Path) -> subprocess.CompletedProcess[str]:
    # Run from an empty folder with no config: rota is found as an installed package,
    # the way a user's project sees it, so py.typed decides whether it is checked.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = true\nplugins = pydantic.mypy\n")
    copy = tmp_path / source.name
    copy.write_text(source.read_text())
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental", copy.name],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_typed_example_passes(tmp_path: Path) -> None:
    result = mypy(tmp_path, HERE / "typed_ok.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


def test_wrong_arguments_fail_on_each_marked_line(tmp_path: Path) -> None:
    source = HERE / "typed_bad.py"
    expected = {
        number
        for number, line in enumerate(source.read_text().splitlines(), start=1)
        if "  # error:" in line
    }
    result = mypy(tmp_path, source)
    assert result.returncode == 1, result.stdout + result.stderr
    found = {int(m[1]) for m in re.finditer(r"^typed_bad\.py:(\d+): error", result.stdout, re.M)}
    assert found == expected, result.stdout


@pytest.mark.timeout(300)
def test_the_wheel_ships_py_typed(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=280,
    )
    (wheel,) = tmp_path.glob("rota-*.whl")
    assert "rota/py.typed" in zipfile.ZipFile(wheel).namelist()
