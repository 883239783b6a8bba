"""The connection used last, kept out of the pool between calls.

A caller making one call at a time (a loop of `enqueue()`, a worker's claims) would take a
connection from the pool and give it back on every call: psycopg_pool's getconn and putconn
(its lock, its bookkeeping, the check on checkout) cost a single enqueue about 16 µs of the
~400 µs it takes, 4% of its rate. Here the connection a call gives back is kept aside as
the *spare* and the next call takes it without asking the pool, as long as nobody waits
for the pool: every checkout is counted until it is answered (`_pending`), under the same
lock that decides to keep a spare, so a connection is never kept idle while another
caller waits for one.

What the pool does for a connection it hands out is done for the spare too: it is
probed on every checkout (a server that ended the session has said so on the socket, and
the spare then goes back to the pool, which checks it and replaces it); only an idle,
unbroken connection is kept; and it goes back to the pool at least every
`SPARE_SECONDS`, so the pool's lifetime and drain() apply to it (drop() hands it back at
once)."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from rota.drivers.postgres.pool import Pool, readable

# The longest one connection stays the spare before it goes back to the pool.
SPARE_SECONDS = 30.0

Connection = psycopg.Connection[Any]


class Spare:
    """Checkout and return in front of `pool`: the spare if there is one, else the pool."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._spare: Connection | None = None
        self._since = 0.0  # when the connection now spare (or out as one) was kept first
        self._kept: int | None = None  # id() of that connection
        self._pending = 0  # checkouts gone to the pool and not answered yet
        self._closed = False

    def checkout(self, timeout: float | None) -> Connection:
        with self._lock:
            conn, self._spare = self._spare, None
            # Counted until this checkout is answered: a connection given back meanwhile
            # goes to the pool, where this one may be about to wait.
            self._pending += 1
        try:
            if conn is not None:
                if not readable(conn.pgconn.socket):
                    return conn
                self._pool.putconn(conn)  # the server spoke first: let the pool check it
            return self._pool.getconn(timeout=timeout)
        finally:
            with self._lock:
                self._pending -= 1

    def release(self, conn: Connection) -> None:
        """Keep `conn` as the spare, or give it back to the pool (which rolls back a
        transaction left open and replaces a broken connection)."""
        if not conn.broken and conn.pgconn.transaction_status == TransactionStatus.IDLE:
            now = time.monotonic()
            with self._lock:
                again = id(conn) == self._kept  # the spare coming back from a call
                since = self._since if again else now
                if (
                    self._spare is None
                    and self._pending == 0
                    and not self._closed
                    and now - since < SPARE_SECONDS
                ):
                    self._spare, self._kept, self._since = conn, id(conn), since
                    return
                if again:
                    self._kept = None  # back to the pool: its next turn as spare starts anew
        self._pool.putconn(conn)

    def drop(self) -> None:
        """Give the spare back to the pool (after drain(): the pool replaces it)."""
        with self._lock:
            conn, self._spare, self._kept = self._spare, None, None
        if conn is not None:
            self._pool.putconn(conn)

    def close(self) -> None:
        """Keep nothing from now on (a call still under way gives its connection back to
        the pool, which closes it), and give the spare back."""
        with self._lock:
            self._closed = True
        self.drop()
