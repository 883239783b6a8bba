"""What the PostgreSQL driver adds to the engine's job storage for callers that do not
block (#19): inserts on psycopg's AsyncConnection (`enqueue_async`, rota.drivers.postgres.
aio) and the LISTEN that wakes `app.wait` when an awaited job finishes."""

from __future__ import annotations

import functools
import logging
import random
import threading
from collections.abc import Callable, Sequence

import psycopg

from rota.drivers.base import JobInsert
from rota.drivers.postgres.aio import AsyncInserter
from rota.drivers.url import DatabaseURL
from rota.job import Job

log = logging.getLogger("rota.postgres")

# Notified with a job's id when a job someone waits for finishes (migration 0017's trigger).
DONE_CHANNEL = "rota_done"
DONE_SAFETY = 0.5  # seconds: how soon a waiting listener notices it should stop


class PostgresJobExtras:
    """Mixed into PostgresDriver, before SQLDriver (whose close it extends)."""

    url: DatabaseURL
    _conninfo: str | Callable[[], str]
    _async_pool_size: int

    @functools.cached_property
    def _async(self) -> AsyncInserter:
        # Made on first use: an app that never enqueues async opens no async pool.
        return AsyncInserter(self.url, self._conninfo, self._async_pool_size)

    async def job_insert_many_async(
        self, rows: Sequence[JobInsert], conn: object = None
    ) -> list[Job]:
        """job_insert_many on psycopg's AsyncConnection: the caller's (`conn=`, e.g. an
        SQLAlchemy AsyncSession's) or one of this driver's async pool."""
        return await self._async.insert(self, rows, conn)  # type: ignore[arg-type]

    def done_watcher(self) -> DoneListener:
        return DoneListener(self._conninfo)

    def close(self) -> None:
        if "_async" in self.__dict__:
            self._async.close()
        super().close()  # type: ignore[misc]

    async def aclose(self) -> None:
        if "_async" in self.__dict__:
            await self._async.aclose()
        super().close()  # type: ignore[misc]


class DoneListener:
    """LISTEN rota_done for `app.wait`: the trigger of migration 0017 notifies the id of
    an awaited job when it finishes. Blocking (a thread's target); reconnects with
    backoff, and after a reconnect reports "anything may have finished" (None)."""

    def __init__(self, conninfo: str | Callable[[], str]) -> None:
        self._conninfo = conninfo

    def watch(
        self,
        stop: threading.Event,
        changed: Callable[[int | None], None],
        ready: Callable[[], None],
    ) -> None:
        delay = 0.1
        first = True
        while not stop.is_set():
            try:
                conninfo = self._conninfo() if callable(self._conninfo) else self._conninfo
                with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {DONE_CHANNEL}")
                    delay = 0.1
                    if first:
                        ready()
                        first = False
                    else:
                        changed(None)  # what finished while we were not listening
                    while not stop.is_set():
                        # Wakes at least every DONE_SAFETY seconds to notice `stop`.
                        for note in conn.notifies(timeout=DONE_SAFETY):
                            changed(int(note.payload) if note.payload.isdigit() else None)
            except psycopg.Error as exc:
                wait = random.uniform(delay / 2, delay)
                log.warning("LISTEN %s lost (%s); retrying in %.1fs", DONE_CHANNEL, exc, wait)
                stop.wait(wait)
                delay = min(delay * 2, 5.0)
