"""SQLite wake-ups: a commit by another connection or process wakes the watcher, whether
it sleeps on inotify (Linux) or polls; a watcher that sees no commit stays asleep."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rota.drivers.sqlite import watch
from rota.drivers.sqlite.watch import DataVersionNotifier

MODES = [
    pytest.param(
        True,
        id="inotify",
        marks=pytest.mark.skipif(watch.inotify_simple is None, reason="inotify is Linux-only"),
    ),
    pytest.param(False, id="poll"),
]


def _database(tmp_path: Path) -> tuple[Path, sqlite3.Connection]:
    path = tmp_path / "watched.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x INTEGER)")
    return path, conn


async def _wakes(notifier: DataVersionNotifier, commit: object, settle: float) -> int:
    """How many wake-ups follow `commit()` (after the watcher has settled into idling)."""
    woken = asyncio.Event()
    count = 0

    def wake(queue: str | None) -> None:
        nonlocal count
        assert queue is None
        count += 1
        woken.set()

    task = asyncio.create_task(notifier.run(wake, lambda _: None))
    try:
        await asyncio.sleep(settle)  # idle long enough to back off / block in the kernel
        assert count == 0, "woken although nothing was committed"
        commit()  # type: ignore[operator]
        await asyncio.wait_for(woken.wait(), timeout=5)
        return count
    finally:
        task.cancel()


@pytest.mark.parametrize("use_inotify", MODES)
def test_a_commit_by_another_connection_wakes_the_watcher(
    tmp_path: Path, use_inotify: bool
) -> None:
    path, conn = _database(tmp_path)
    notifier = DataVersionNotifier(str(path), 5000, use_inotify=use_inotify)
    assert notifier.mode == ("inotify" if use_inotify else "poll")
    assert asyncio.run(_wakes(notifier, lambda: conn.execute("INSERT INTO t VALUES (1)"), 1.5))


@pytest.mark.parametrize("use_inotify", MODES)
def test_a_commit_by_another_process_wakes_the_watcher(tmp_path: Path, use_inotify: bool) -> None:
    path, _ = _database(tmp_path)
    script = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('INSERT INTO t VALUES (2)')"
    )

    def commit() -> None:
        subprocess.run([sys.executable, "-c", script, str(path)], check=True)

    notifier = DataVersionNotifier(str(path), 5000, use_inotify=use_inotify)
    assert asyncio.run(_wakes(notifier, commit, 0.3))


@pytest.mark.skipif(watch.inotify_simple is None, reason="inotify is Linux-only")
def test_commits_in_quick_succession_gather_and_the_last_one_still_wakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes within GATHER of the last change seen are looked at together, and the last
    of a stream of commits still wakes the watcher: by its own look, not the safety net's
    poll (pushed out of reach here)."""
    monkeypatch.setattr(watch, "SAFETY_NET", 30.0)
    path, conn = _database(tmp_path)
    notifier = DataVersionNotifier(str(path), 5000)

    async def scenario() -> None:
        woken: list[float] = []
        task = asyncio.create_task(
            notifier.run(lambda _: woken.append(time.monotonic()), lambda _: None)
        )
        try:
            await asyncio.sleep(0.3)
            for i in range(200):
                await asyncio.sleep(0.0005 if i % 2 else 0)  # some back to back, some apart
                before_last = time.monotonic()
                conn.execute("INSERT INTO t VALUES (?)", (i,))
            deadline = time.monotonic() + 5
            while not (woken and woken[-1] >= before_last) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert woken and woken[-1] >= before_last, "the last commit woke nobody"
        finally:
            task.cancel()

    asyncio.run(scenario())
