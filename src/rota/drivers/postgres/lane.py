"""A named statement run on libpq directly (psycopg.pq), for the one call whose time is
mostly the client's: a single enqueue without the caller's connection.

psycopg's cursor sends a statement without blocking and waits for the answer in its own
loop (a cursor, a query object, a generator and a readiness poll per call); libpq's
blocking `PQexecPrepared` (GIL released) does the same exchange with about 60 µs less
client CPU on this machine, a tenth of the call. The lane runs only
what it can run exactly as psycopg would: text parameters of plain Python types, binary
results of the column types listed in `_LOADERS`, the same conninfo, the same deadlines
(the call watch shuts the socket down; statement_timeout and tcp_user_timeout are the
connection's). Anything else gets `None` back, and the caller runs psycopg's path.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

from rota.drivers.database import Params, Row

# psycopg's named placeholders, text (`%(name)s`) or binary (`%(name)b`), and its `%%`.
_PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]|%%")
_BINARY_PLACEHOLDER = re.compile(r"%\(\w+\)b")
_INVALID_STATEMENT_NAME = b"26000"  # the prepared statement is gone (DISCARD ALL)
_DUPLICATE_STATEMENT = b"42P05"  # prepared already (by another Lane of this process)
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
BINARY = pq.Format.BINARY
SQLSTATE = pq.DiagnosticField.SQLSTATE


def _int(value: bytes, tz: tzinfo) -> int:
    return int.from_bytes(value, "big", signed=True)


def _text(value: bytes, tz: tzinfo) -> str:
    return value.decode()


def _timestamptz(value: bytes, tz: tzinfo) -> datetime:
    # Microseconds since 2000-01-01 UTC, shown in the session's time zone as psycopg does.
    micros = int.from_bytes(value, "big", signed=True)
    return (_PG_EPOCH + timedelta(microseconds=micros)).astimezone(tz)


def _void(value: bytes, tz: tzinfo) -> None:
    return None


Loader = Callable[[bytes, tzinfo], Any]
# Binary result loaders by type OID: int8, int4, int2, text, varchar, timestamptz, void.
_LOADERS: dict[int, Loader] = {
    20: _int,
    23: _int,
    21: _int,
    25: _text,
    1043: _text,
    1184: _timestamptz,
    2278: _void,
}


def positional(sql: str) -> tuple[str, list[str]]:
    """`sql` with psycopg's named placeholders as libpq's `$n` (a name used twice keeps its
    number; `%%` becomes `%`), and the names in number order."""
    names: list[str] = []

    def number(found: re.Match[str]) -> str:
        name = found.group(1)
        if name is None:
            return "%"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PLACEHOLDER.sub(number, sql), names


def _param(value: Any) -> bytes | None:
    """`value` in PostgreSQL's text input format; TypeError for what the lane leaves to
    psycopg: a subclass (an enum, which psycopg sends by name), or a NUL byte, which
    libpq's text parameters would cut short."""
    kind = type(value)
    if value is None:
        return None
    if kind is str:
        if "\x00" in value:
            raise TypeError("NUL in a text parameter")
        return value.encode()  # type: ignore[no-any-return]
    if kind is bool:
        return b"t" if value else b"f"
    if kind is int or kind is float:  # repr: exact for floats, 'inf' and 'nan' too
        return repr(value).encode()
    if kind is datetime and value.tzinfo is not None:
        return value.isoformat().encode()  # type: ignore[no-any-return]
    raise TypeError(f"the lane sends no {kind.__name__}")


@dataclass
class _Statement:
    key: bytes  # the prepared statement's name on the server
    sql: bytes  # with $n placeholders
    names: tuple[str, ...]  # the parameter of each $n
    # The result's columns and their loaders, from the server's description of it; None
    # until described, () if a column has a type the lane does not load (psycopg runs it).
    columns: tuple[tuple[str, Loader], ...] | None = None
    # The connections it is prepared on, each with its session's time zone.
    prepared: weakref.WeakKeyDictionary[psycopg.Connection[Any], tzinfo] = field(
        default_factory=weakref.WeakKeyDictionary
    )

    @classmethod
    def of(cls, name: str, text: str) -> _Statement:
        if _BINARY_PLACEHOLDER.search(text):
            raise ValueError(f"{name}: only %(name)s placeholders can go by the lane")
        sql, names = positional(text)
        return cls(f"rota_{name}".encode(), sql.encode(), tuple(names))

    def rows(self, result: pq.abc.PGresult, tz: tzinfo) -> list[Row]:
        columns = self.columns or ()
        return [
            {
                name: None if (value := result.get_value(r, i)) is None else load(value, tz)
                for i, (name, load) in enumerate(columns)
            }
            for r in range(result.ntuples)
        ]


class Lane:
    """The statements `names` of `queries`, each prepared once per connection."""

    def __init__(self, queries: Mapping[str, str], names: frozenset[str]) -> None:
        self._statements = {name: _Statement.of(name, queries[name]) for name in names}

    def __contains__(self, name: str) -> bool:
        return name in self._statements

    def run(self, conn: psycopg.Connection[Any], name: str, params: Params) -> list[Row] | None:
        """The rows of statement `name` on `conn` (autocommit, idle), or None where the
        lane cannot run it as psycopg would (then nothing was sent). Errors are psycopg's."""
        statement = self._statements[name]
        if statement.columns == ():
            return None
        try:
            values = [_param(params[p]) for p in statement.names]
        except TypeError:
            return None
        pgconn = conn.pgconn
        for again in (False, True):
            tz = statement.prepared.get(conn) or self._prepare(conn, statement)
            if tz is None:
                return None
            # NULLs as None, as psycopg itself sends them (the stub's type omits None).
            result = pgconn.exec_prepared(statement.key, values, result_format=BINARY)  # type: ignore[arg-type]
            if again or result.error_field(SQLSTATE) != _INVALID_STATEMENT_NAME:
                _check(conn, result, pq.ExecStatus.TUPLES_OK)
                return statement.rows(result, tz)
            statement.prepared.pop(conn, None)  # the server forgot it (DISCARD ALL): again
        return None  # not reached: the second pass returns

    @staticmethod
    def _prepare(conn: psycopg.Connection[Any], statement: _Statement) -> tzinfo | None:
        """Prepare `statement` on `conn` and return the session's time zone; None (and
        never again) if a result column has a type the lane does not load."""
        pgconn = conn.pgconn
        prepared = pgconn.prepare(statement.key, statement.sql)
        if prepared.error_field(SQLSTATE) != _DUPLICATE_STATEMENT:  # else: prepared before
            _check(conn, prepared, pq.ExecStatus.COMMAND_OK)
        described = pgconn.describe_prepared(statement.key)
        _check(conn, described, pq.ExecStatus.COMMAND_OK)
        fields = range(described.nfields)
        types = [described.ftype(i) for i in fields]
        if any(oid not in _LOADERS for oid in types):
            statement.columns = ()
            return None
        statement.columns = tuple(
            ((described.fname(i) or b"").decode(), _LOADERS[oid])
            for i, oid in zip(fields, types, strict=True)
        )
        tz = statement.prepared[conn] = conn.info.timezone
        return tz


def _check(conn: psycopg.Connection[Any], result: pq.abc.PGresult, ok: pq.ExecStatus) -> None:
    """Raise what psycopg's own path would for a `result` that is not `ok`."""
    if result.status == ok:
        return
    if conn.pgconn.status != pq.ConnStatus.OK:
        # The link broke (or the call watch cut it).
        message = conn.pgconn.get_error_message(conn.info.encoding)
        raise psycopg.OperationalError(message or "the connection was lost")
    raise error_from_result(result, conn.info.encoding)
