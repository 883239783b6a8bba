"""PostgreSQL driver: psycopg 3 with a connection pool, `FOR UPDATE SKIP LOCKED`
claims, array-parameter batch writes and LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, LiteralString, cast

import psycopg

from rota.drivers import queries
from rota.drivers.base import WakeFunc
from rota.drivers.deadlines import Deadlines, call_deadline
from rota.drivers.postgres.copy import PostgresCopyStore
from rota.drivers.postgres.database import PostgresDatabase, has_rows
from rota.drivers.postgres.deadlines import cut
from rota.drivers.postgres.jobs import PostgresJobExtras
from rota.drivers.postgres.presence import PostgresPresence
from rota.drivers.sql import SQLDriver
from rota.drivers.url import DatabaseURL
from rota.errors import (
    SchemaError,
)

_Q = queries.load("postgres")
_MIGRATIONS = queries.migrations("postgres")
log = logging.getLogger("rota.postgres")

JOBS_CHANNEL = "rota_jobs"
CONTROL_CHANNEL = "rota_control"


class PostgresDriver(PostgresJobExtras, SQLDriver):
    dialect = "postgres"
    latest_schema_version = len(_MIGRATIONS)

    def __init__(self, url: DatabaseURL, *, pool_size: int = 4) -> None:
        self._async_pool_size = pool_size  # enqueue_async's own pool (PostgresJobExtras)
        self._pg = PostgresDatabase(url, pool_size=pool_size)
        super().__init__(self._pg)
        self._conninfo = self._pg.conninfo
        self.copy = PostgresCopyStore(self)
        self.presence = PostgresPresence(self._pg)

    # --- connections (through the dialect seam) ----------------------------------------

    def _conn(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        return self._pg.connection()

    @contextlib.contextmanager
    def _tx(
        self, conn: psycopg.Connection[Any] | None = None, *, single: bool = False
    ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor in the caller's transaction (`conn`), or on a pooled connection in a
        transaction of its own (in autocommit when the caller runs a `single` statement)."""
        opened = self._pg.read(conn) if single else self._pg.write(conn)
        with opened as session:
            yield session._cursor

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one named statement (in autocommit) and return its rows."""
        with self._tx(single=True) as cur:
            cur.execute(_Q[name], params or {})
            return cur.fetchall() if has_rows(cur) else []

    # --- schema -------------------------------------------------------------------------

    def deadlines_set(self, deadlines: Deadlines) -> None:
        self._pg.set_deadlines(deadlines)

    def schema_migrate(self) -> list[int]:
        applied: list[int] = []
        # A migration may rewrite a big table: no call deadline, no statement timeout.
        with call_deadline(lambda: None), self._tx() as cur:
            cur.execute("SET LOCAL statement_timeout = 0")
            cur.execute(_Q["schema_lock"])
            cur.execute(_Q["schema_create_migrations"])
            cur.execute(_Q["schema_version"])
            row = cur.fetchone()
            current = int(next(iter(row.values()))) if row else 0
            if current > self.latest_schema_version:
                raise SchemaError(
                    f"the database schema is at version {current}, newer than this rota knows "
                    f"({self.latest_schema_version}): upgrade rota"
                )
            for version, name, sql in _MIGRATIONS:
                if version <= current:
                    continue
                cur.execute(sql.encode())  # a whole file: several statements
                cur.execute(_Q["schema_record"], {"version": version, "name": name})
                applied.append(version)
        return applied

    # --- jobs ---------------------------------------------------------------------------

    # --- leadership and queues ------------------------------------------------------------

    # --- steps, inbox and user transactions -------------------------------------------------

    def execute_rendered(self, statements: Sequence[str]) -> None:
        """Run statements rota rendered itself (from identifiers and fixed text, e.g. the
        role grants of `rota db roles`) in one transaction: all of them, or none."""
        with self._tx() as cur:
            for statement in statements:
                # Rendered by rota from identifiers and fixed text: as trusted as a literal.
                cur.execute(cast(LiteralString, statement))  # type: ignore[redundant-cast]

    # --- wake-ups -------------------------------------------------------------------------

    def notifier(self) -> ListenNotifier:
        # Probed within the time a silent peer takes to be noticed, every three of them.
        detect = self._pg.deadlines.detect
        return ListenNotifier(self._conninfo, probe_every=3 * detect, probe_timeout=detect)


class ListenNotifier:
    """LISTEN on the jobs and control channels; reconnects with backoff when the
    connection drops (polling covers the gap, so nothing waits forever).

    The connection proves itself: every `probe_every` seconds it NOTIFYs itself and
    waits up to `probe_timeout` for that to come back. A LISTEN connection can stop
    delivering without any error (a NAT timeout, a cut link, a transaction-mode pooler
    that runs LISTEN on whichever server connection is free): then the worker would
    poll without anyone knowing. Silence is logged once, counted and reconnected; a
    probe that never came back on a connection that answers queries means notifications
    cannot reach it (a pooler), and the worker says it polls instead (#21)."""

    sees_every_commit = False  # NOTIFY tells of new jobs and control messages only

    def __init__(
        self,
        conninfo: str | Callable[[], str],
        *,
        probe_every: float = 30.0,
        probe_timeout: float = 10.0,
    ) -> None:
        self._conninfo = conninfo
        self.probe_every = probe_every
        self.probe_timeout = probe_timeout
        self.silences = 0  # probes that did not come back (each followed by a reconnect)
        self.proved_at: float | None = None  # time.monotonic() of the last probe back
        self.polling = False  # notifications cannot reach this worker: it polls
        # A channel of this notifier's own: its probes reach no other worker.
        self._channel = f"rota_probe_{random.getrandbits(48):012x}"
        self._probes = 0

    @property
    def state(self) -> str:
        """ "listening", "polling" (notifications cannot reach it) or "connecting"."""
        if self.polling:
            return "polling"
        return "listening" if self.proved_at is not None else "connecting"

    async def run(self, wake: WakeFunc, control: Callable[[str], None]) -> None:
        delay = 0.1
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conninfo = self._conninfo() if callable(self._conninfo) else self._conninfo
                conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
                for channel in (JOBS_CHANNEL, CONTROL_CHANNEL, self._channel):
                    await self._bounded(conn, conn.execute(f"LISTEN {channel}"))
                delay = 0.1
                wake(None)  # anything inserted while we were not listening
                await self._listen(conn, wake, control)
            except _Unreached:
                # Queries pass but notifications never come back: a transaction-mode
                # pooler. Try again now and then (the route may change), poll meanwhile.
                await asyncio.sleep(10 * self.probe_every)
            except (psycopg.Error, OSError, TimeoutError, _Silent) as exc:
                # Jittered, so the workers of a restarted server do not reconnect in step.
                wait = random.uniform(delay / 2, delay)
                if not isinstance(exc, _Silent):
                    log.warning("LISTEN connection lost (%s); retrying in %.1fs", exc, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, 5.0)
            finally:
                if conn is not None:
                    # close() does not wait for the server: safe on a silent link, where
                    # `async with` could block sending its goodbye.
                    with contextlib.suppress(Exception):
                        await conn.close()

    async def _bounded(self, conn: psycopg.AsyncConnection[Any], call: Any) -> Any:
        """Await `call` for probe_timeout at most. Past it the socket is cut rather than
        the call cancelled: psycopg would first try to cancel the query on the server,
        over the same silent link, for up to ten seconds."""
        task = asyncio.ensure_future(call)
        done, _ = await asyncio.wait({task}, timeout=self.probe_timeout)
        if not done:
            cut(conn)
            with contextlib.suppress(BaseException):
                await task
            raise TimeoutError(f"no answer in {self.probe_timeout:g}s")
        return task.result()

    async def _listen(
        self,
        conn: psycopg.AsyncConnection[Any],
        wake: WakeFunc,
        control: Callable[[str], None],
    ) -> None:
        """Deliver notifications; return never, raise when the connection goes quiet."""
        loop = asyncio.get_running_loop()
        first = True
        while True:
            self._probes += 1
            probe = str(self._probes)
            try:
                await self._bounded(
                    conn, conn.execute("SELECT pg_notify(%s, %s)", (self._channel, probe))
                )
            except TimeoutError:
                self._silent(f"its probe got no answer in {self.probe_timeout:g}s")
                raise _Silent() from None
            back_by = loop.time() + self.probe_timeout
            proved = False
            next_probe = loop.time() + self.probe_every
            while True:
                until = next_probe if proved else back_by
                left = until - loop.time()
                if left <= 0:
                    break
                async for note in conn.notifies(timeout=left):
                    if note.channel == JOBS_CHANNEL:
                        wake(note.payload or None)
                    elif note.channel != self._channel:
                        control(note.payload)
                    elif note.payload == probe:
                        proved = True
                        self.proved_at = time.monotonic()
                        if self.polling:
                            log.info("LISTEN works again: notifications wake this worker")
                        self.polling = False
                    if proved and until is back_by:
                        break
            if proved:
                first = False
                continue
            if first:
                self.silences += 1
                if not self.polling:
                    self.polling = True
                    log.warning(
                        "LISTEN: this worker's own NOTIFY did not come back within %gs on a "
                        "connection that answers queries: notifications cannot reach it "
                        "(a transaction-mode pooler such as PgBouncer between worker and "
                        "database?); it falls back to polling every poll interval. Point "
                        "LISTEN at a session-mode port or the database itself.",
                        self.probe_timeout,
                    )
                raise _Unreached()
            self._silent(f"its own NOTIFY did not come back within {self.probe_timeout:g}s")
            raise _Silent()

    def _silent(self, why: str) -> None:
        self.silences += 1
        log.warning("LISTEN connection went silent (%s): reconnecting; polling covers the gap", why)


class _Silent(Exception):
    """The LISTEN connection stopped answering."""


class _Unreached(Exception):
    """Notifications do not reach the LISTEN connection, though it answers queries."""


__all__ = ["PostgresDriver"]
