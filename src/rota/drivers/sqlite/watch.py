"""Wake-ups on SQLite: a worker learns that another connection committed to the database
file (`PRAGMA data_version` changes), without a server to send it a notification.

On Linux the watcher sleeps until the kernel reports a write to the database's files
(inotify), so an idle worker costs no CPU and a commit wakes it within microseconds;
while commits stream in, one look every GATHER seconds covers them all.
Elsewhere it polls: every millisecond while commits arrive, backing off to POLL_IDLE
once the file has been quiet for QUIET seconds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from rota.drivers.base import WakeFunc

try:  # Linux only (sys_platform marker in pyproject.toml)
    import inotify_simple
except ImportError:  # pragma: no cover - other platforms poll
    inotify_simple = None

POLL_BUSY = 0.001  # seconds between polls while commits arrive
POLL_IDLE = 0.05  # ... once the file has been quiet for QUIET seconds
QUIET = 1.0
# With inotify, how often the watcher looks anyway: a safety net for a write the kernel
# did not report (an event queue overflow), and how soon it notices it should stop.
SAFETY_NET = 0.25
# After a write event, how many times (POLL_BUSY apart) the commit it belongs to is
# looked for: a commit is published after its fsync, which can take milliseconds.
SETTLE_TRIES = 60
# While commits stream in (a busy worker's own claims and completions write the WAL many
# times a second), the writes of this long after the last change seen gather into one
# look: by then their commit is usually published, so one read of data_version finds it
# instead of a dozen, and the worker's threads are not interrupted for each write. The
# first commit after a quiet spell is looked for at once.
GATHER = 0.003


class DataVersionNotifier:
    """Calls `wake(None)` on the worker's loop after each commit by another connection."""

    sees_every_commit = True

    def __init__(self, path: str, busy_ms: int, *, use_inotify: bool = True) -> None:
        self._path = path
        self._busy_ms = busy_ms
        self._use_inotify = use_inotify and inotify_simple is not None
        self.mode = "inotify" if self._use_inotify else "poll"

    async def run(self, wake: WakeFunc, control: Callable[[str], None]) -> None:
        loop = asyncio.get_running_loop()
        stop = threading.Event()

        def changed() -> None:
            # A commit seen as the worker stops (its own last writes: resigning, leaving
            # its presence) may come after its loop has closed: nobody is left to wake.
            if stop.is_set():
                return
            with contextlib.suppress(RuntimeError):  # closed between the check and here
                loop.call_soon_threadsafe(wake, None)

        watch = self._watch_inotify if self._use_inotify else self._watch_poll
        thread = threading.Thread(
            target=watch, args=(stop, changed), name="rota-sqlite-watch", daemon=True
        )
        thread.start()
        try:
            await loop.create_future()  # until cancelled
        finally:
            stop.set()

    def watch(
        self,
        stop: threading.Event,
        changed: Callable[[int | None], None],
        ready: Callable[[], None],
    ) -> None:
        """The blocking form (a thread's target, for `app.wait`): `ready()` once the
        watcher holds the current data version, `changed(None)` after each later commit
        by another connection, until `stop` is set."""
        watch = self._watch_inotify if self._use_inotify else self._watch_poll
        watch(stop, lambda: changed(None), ready)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, timeout=self._busy_ms / 1000)

    def _watch_poll(
        self,
        stop: threading.Event,
        changed: Callable[[], None],
        ready: Callable[[], None] = lambda: None,
    ) -> None:
        conn = self._connect()
        try:
            last = _data_version(conn)
            ready()
            last_change = time.monotonic()
            interval = POLL_BUSY
            while not stop.wait(interval):
                current = _data_version(conn)
                now = time.monotonic()
                if current != last:
                    last, last_change, interval = current, now, POLL_BUSY
                    changed()
                elif now - last_change > QUIET:
                    interval = min(interval * 2, POLL_IDLE)
        finally:
            conn.close()

    def _watch_inotify(
        self,
        stop: threading.Event,
        changed: Callable[[], None],
        ready: Callable[[], None] = lambda: None,
    ) -> None:
        assert inotify_simple is not None
        folder, name = os.path.split(os.path.abspath(self._path))
        # The folder, not the files: the -wal file comes and goes with the connections.
        names = {name, f"{name}-wal"}
        flags = inotify_simple.flags
        conn = self._connect()
        with contextlib.closing(inotify_simple.INotify()) as inotify:
            inotify.add_watch(folder, flags.MODIFY | flags.CREATE | flags.MOVED_TO)
            try:
                last = _data_version(conn)
                ready()
                seen = -GATHER  # time.monotonic() of the last change seen
                while not stop.is_set():
                    events: list[Any] = inotify.read(timeout=int(SAFETY_NET * 1000))
                    if events and not any(event.name in names for event in events):
                        continue
                    if events:
                        gather = seen + GATHER - time.monotonic()
                        if gather > 0:
                            time.sleep(gather)
                    # The WAL is written before the commit is published in the shared
                    # index (which inotify cannot see: it is mapped memory), so a change
                    # may show a moment after the event: look again, briefly.
                    pause = 0.0001
                    for _ in range(SETTLE_TRIES if events else 1):
                        current = _data_version(conn)
                        if current != last:
                            last = current
                            seen = time.monotonic()
                            changed()
                            break
                        time.sleep(pause)
                        pause = min(pause * 2, POLL_BUSY)
            finally:
                conn.close()


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])
