"""Presence on PostgreSQL: each worker holds a session-level advisory lock on one
connection of its own (never a pooled one, which another thread could hand back and
close); the server releases it the moment that session ends, e.g. when the process is
killed and the kernel closes its socket. The sweep's SQL reads pg_locks itself."""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from rota.drivers.postgres.database import PostgresDatabase
from rota.drivers.postgres.pool import readable
from rota.drivers.presence import PresenceStore, PresenceTakenError
from rota.errors import DatabaseUnavailableError

# Seconds to connect the presence session: a worker that cannot is not claiming anyway.
CONNECT_TIMEOUT = 5


class SessionHold:
    """The advisory lock of one worker, held by the session of `conn`."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def alive(self) -> bool:
        conn = self._conn
        if conn.closed:
            return False
        # An idle session has nothing to read; one the server ended (terminated, crashed,
        # restarted) has its goodbye or EOF waiting. Only then is a round trip spent.
        if not readable(conn.pgconn.socket):
            return True
        try:
            psycopg_pool.ConnectionPool.check_connection(conn)
        except psycopg.Error:
            return False
        return True

    def close(self) -> None:
        # Closing the session releases its lock: no statement needed.
        self._conn.close()


class PostgresPresence(PresenceStore):
    # A worker whose presence session alone was cut notices it within a second and
    # registers again in milliseconds; this covers that, and rescue still comes in ~3 s.
    grace = 1.5
    # After a server restart every worker registers again within its retry pace (2 s at
    # most, worker.presence); their jobs are not taken meanwhile.
    settle = 10.0

    def __init__(self, database: PostgresDatabase) -> None:
        super().__init__(database)
        self._pg = database

    def _hold(self, worker: str, host: str, pid: int, server_options: str) -> SessionHold:
        conninfo = self._pg.conninfo() if callable(self._pg.conninfo) else self._pg.conninfo
        if server_options:  # after the URL's own options (a search_path, say), not instead
            params = conninfo_to_dict(conninfo)
            params["options"] = f"{params.get('options', '')} {server_options}".strip()
            conninfo = make_conninfo("", **params)
        try:
            conn = psycopg.connect(
                conninfo,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=CONNECT_TIMEOUT,
                application_name=f"rota presence {worker}"[:63],
            )
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(
                f"presence session: {self._pg.url.scrub(str(exc))}"
            ) from None
        try:
            with conn.transaction(), self._pg.write(conn) as session:
                row = session.one("presence_register", {"worker": worker, "host": host, "pid": pid})
                assert row is not None
                if not row["locked"]:
                    # Roll the row back: it is the other process's, and stays as it was.
                    raise PresenceTakenError(
                        f"worker id {worker!r} is held by another live worker process "
                        "(two workers share it): give each worker its own --worker-id"
                    )
        except psycopg.OperationalError as exc:
            conn.close()
            raise DatabaseUnavailableError(
                f"presence session: {self._pg.url.scrub(str(exc))}"
            ) from None
        except BaseException:
            conn.close()
            raise
        return SessionHold(conn)
