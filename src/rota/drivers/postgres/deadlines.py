"""Deadlines on PostgreSQL connections: libpq's keepalives, tcp_user_timeout,
connect_timeout and a statement_timeout merged into the conninfo (the user's own settings
win), a watch that cuts the socket of a call left unanswered past its deadline (the only
thing that frees a thread blocked on a silent link). The pool's capped reconnect backoff
lives in `pool.py`."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rota.drivers.deadlines import Deadlines, current_deadline

log = logging.getLogger("rota.postgres")

# How often the watch looks at the calls in flight.
WATCH_TICK = 0.1
# What a call without a deadline is watched by: nothing (reentrant, shared by all).
_UNWATCHED = contextlib.nullcontext()


def conninfo_with(conninfo: str, deadlines: Deadlines) -> str:
    """`conninfo` (a URL or key=value string) with rota's deadlines added where the user
    set none: whatever the user's conninfo says about a setting wins."""
    params: dict[str, Any] = conninfo_to_dict(conninfo)
    idle, interval, count = deadlines.keepalives()
    ours: dict[str, Any] = {
        "connect_timeout": str(max(2, round(deadlines.connect))),
        "keepalives": "1",
        "keepalives_idle": str(idle),
        "keepalives_interval": str(interval),
        "keepalives_count": str(count),
        "tcp_user_timeout": str(round(deadlines.detect * 1000)),
    }
    for key, value in ours.items():
        params.setdefault(key, value)
    options = str(params.get("options") or "")
    if deadlines.statement > 0 and "statement_timeout" not in options:
        ms = round(deadlines.statement * 1000)
        params["options"] = f"{options} -c statement_timeout={ms}".strip()
    return make_conninfo("", **params)


@dataclass
class _Call:
    conn: psycopg.Connection[Any]
    started: float
    deadline: Callable[[], float | None]
    thread: str
    cut: bool = False


class CallWatch:
    """A pooled connection checked out in a context with a deadline (a worker's own call,
    a running job: rota.drivers.deadlines) is watched until it is returned. A call still
    unanswered past its deadline has its socket shut down: the thread blocked on it gets
    an error at once, the pool drops the connection, and the slot comes back."""

    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self.cut_total = 0  # calls whose connection was cut at their deadline

    def watching(self, conn: psycopg.Connection[Any]) -> AbstractContextManager[None]:
        deadline = current_deadline()
        if deadline is None:
            return _UNWATCHED  # most calls: no generator to build and run
        return self._watched(conn, deadline)

    @contextlib.contextmanager
    def _watched(
        self, conn: psycopg.Connection[Any], deadline: Callable[[], float | None]
    ) -> Iterator[None]:
        started = time.monotonic()
        key = id(conn)
        with self._lock:
            self._calls[key] = _Call(conn, started, deadline, threading.current_thread().name)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rota-db-watch", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._calls.pop(key, None)

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    def close(self) -> None:
        self._closed.set()

    def _run(self) -> None:
        while not self._closed.wait(WATCH_TICK):
            now = time.monotonic()
            cut_now: list[_Call] = []
            # Decided and cut under the lock: once its owner has returned a connection
            # (watching() pops it under this lock) another thread may be using it, and
            # cutting it then would fail a call that did nothing wrong.
            with self._lock:
                for call in self._calls.values():
                    if call.cut:
                        continue
                    at = call.deadline()
                    if at is not None and now >= at:
                        call.cut = True
                        self.cut_total += 1
                        cut(call.conn)
                        cut_now.append(call)
            for call in cut_now:
                log.warning(
                    "a database call in %s has had no answer for %.1fs, past its "
                    "deadline: its connection was cut (the link is silent)",
                    call.thread,
                    now - call.started,
                )


def cut(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Shut the connection's socket down in both directions: a thread blocked reading it
    wakes with an error, and nothing more is sent on it. shutdown() acts on the socket,
    not the descriptor, so a duplicate of the descriptor is enough (and is closed again).
    Unlike cancelling the query, this sends nothing over the silent link and waits for
    nothing."""
    with contextlib.suppress(Exception):
        fd = conn.pgconn.socket
        dup = socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM)
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()
