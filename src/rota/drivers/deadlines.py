"""Deadlines of database calls: how soon a silent peer is noticed (TCP keepalives and
tcp_user_timeout), how long a connect, a statement and a whole call may take. Derived
from the job lease, so that a cut link costs a worker seconds, never a slot (#21)."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rota.errors import ConfigurationError

# The deadline of this thread's database calls, when it sets its own: a callable returning a
# time.monotonic() value (None: no deadline), read again while the call waits, so that a
# renewed lease moves the deadline of a ctx.transaction() along.
DeadlineFunc = Callable[[], float | None]
_local = threading.local()

# libpq counts connect_timeout in whole seconds and treats 1 as 2.
MIN_CONNECT = 2.0


@dataclass(frozen=True)
class Deadlines:
    """All in seconds. `statement` 0 means no statement_timeout."""

    detect: float = 10.0  # a peer silent this long is dead (keepalives, tcp_user_timeout)
    connect: float = 10.0  # connect_timeout: opening a connection, authentication included
    statement: float = 10.0  # statement_timeout of rota's own statements, on the server
    call: float = 10.0  # a call unanswered this long has its connection cut by the client

    def __post_init__(self) -> None:
        for name in ("detect", "connect", "call"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (
                isinstance(value, int | float) and value > 0 and math.isfinite(value)
            ):
                raise ConfigurationError(
                    f"the database {name} timeout must be a positive number of seconds, "
                    f"not {value!r}"
                )
        if not (self.statement >= 0 and math.isfinite(self.statement)):
            raise ConfigurationError(
                f"the database statement timeout must be seconds >= 0 (0: none), "
                f"not {self.statement!r}"
            )

    @classmethod
    def from_lease(
        cls,
        lease: float,
        *,
        detect: float | None = None,
        connect: float | None = None,
        statement: float | None = None,
        call: float | None = None,
    ) -> Deadlines:
        """A third of the lease for each, unless given: a silent peer is noticed, and a
        hung call cut, while two thirds of the lease of every job it held are left."""
        third = lease / 3
        return cls(
            detect=detect if detect is not None else third,
            connect=connect if connect is not None else max(MIN_CONNECT, third),
            statement=statement if statement is not None else third,
            call=call if call is not None else third,
        )

    def keepalives(self) -> tuple[int, int, int]:
        """(idle, interval, count) in whole seconds: idle + interval * count <= detect."""
        idle = max(1, int(self.detect * 0.4))
        interval = max(1, int(self.detect * 0.2))
        count = max(1, int((self.detect - idle) // interval))
        return idle, interval, min(count, 10)


@dataclass(frozen=True)
class ServerDetection:
    """Server-side keepalive settings of a session whose loss frees a worker's jobs at once
    (the presence connection of the fast rescue): the server must not notice a silent
    worker before that worker has fenced itself, i.e. stopped its jobs."""

    idle: int
    interval: int
    count: int

    @property
    def earliest(self) -> float:
        """The soonest the server may drop the session after the link is cut: a probe may
        be due just as the cut happens, so only the unanswered probes count."""
        return float(self.interval * self.count)

    @property
    def latest(self) -> float:
        """The latest: a whole idle period, then every probe unanswered."""
        return float(self.idle + self.interval * self.count)

    def options(self) -> dict[str, str]:
        """Session GUCs (for a conninfo `options=-c ...`): tcp_user_timeout stays 0 on the
        server, since the presence session sends nothing whose ack could time out first."""
        return {
            "tcp_keepalives_idle": str(self.idle),
            "tcp_keepalives_interval": str(self.interval),
            "tcp_keepalives_count": str(self.count),
        }


def server_detection(lease: float, fence_after: float) -> ServerDetection:
    """Server keepalives that notice a silent worker about one lease after the cut, and
    never before the worker's own fence (`fence_after` seconds after its last confirmed
    renewal, which came before the cut): the worker always stops its jobs before the
    server can free them."""
    count = 3
    interval = max(1, math.ceil(max(lease, fence_after) / count))
    return ServerDetection(idle=interval, interval=interval, count=count)


def current_deadline() -> DeadlineFunc | None:
    """The deadline this thread set with call_deadline(), if any."""
    return getattr(_local, "deadline", None)


@contextlib.contextmanager
def call_deadline(deadline: DeadlineFunc) -> Iterator[None]:
    """Database calls made by this thread in the block have `deadline` instead of the
    default one (e.g. a job's lease; `lambda: None` for a migration that may take long)."""
    previous = current_deadline()
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = previous
