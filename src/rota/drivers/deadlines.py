"""Deadlines of database calls: how soon a silent peer is noticed (TCP keepalives and
tcp_user_timeout), how long a connect, a statement and a whole call may take. Derived
from the job lease, so that a cut link costs a worker seconds, never a slot (#21)."""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rota.errors import ConfigurationError

T = TypeVar("T")

# The deadline of the database calls made in this context (a worker's own call, or a job
# and the threads it runs in): a callable returning a time.monotonic() value (None: no
# deadline), read again while the call waits, so a renewed lease moves a job's deadline
# along. Calls made outside any (a web process, a user's script) have none.
DeadlineFunc = Callable[[], float | None]
_deadline: contextvars.ContextVar[DeadlineFunc | None] = contextvars.ContextVar(
    "rota_call_deadline", default=None
)
# A worker's statement_timeout is never shorter than this, whatever the lease: rota's
# statements take milliseconds, but a loaded test machine must not see them cancelled.
STATEMENT_FLOOR = 5.0

# libpq counts connect_timeout in whole seconds and treats 1 as 2.
MIN_CONNECT = 2.0


@dataclass(frozen=True)
class Deadlines:
    """All in seconds. `statement` 0 means no statement_timeout."""

    detect: float = 10.0  # a peer silent this long is dead (keepalives, tcp_user_timeout)
    connect: float = 10.0  # connect_timeout: opening a connection, authentication included
    # statement_timeout on the server; none outside a worker (an app's own bulk loads).
    statement: float = 0.0
    call: float = 10.0  # a worker's call unanswered this long has its connection cut

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
        hung call cut, while two thirds of the lease of every job it held are left (for
        very short leases, as in tests, at least 1.5 s or half the lease, so that a busy
        machine's slow answer is not taken for a silent link)."""
        third = max(lease / 3, min(1.5, lease / 2))
        return cls(
            detect=detect if detect is not None else third,
            connect=connect if connect is not None else max(MIN_CONNECT, third),
            statement=statement if statement is not None else max(STATEMENT_FLOOR, third),
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

    def conninfo_options(self) -> str:
        """The same as a libpq `options` value: `-c tcp_keepalives_idle=... ...`."""
        return " ".join(f"-c {key}={value}" for key, value in self.options().items())


def server_detection(lease: float, fence_after: float) -> ServerDetection:
    """Server keepalives that notice a silent worker about one lease after the cut, and
    never before the worker's own fence (`fence_after` seconds after its last confirmed
    renewal, which came before the cut): the worker always stops its jobs before the
    server can free them."""
    count = 3
    interval = max(1, math.ceil(max(lease, fence_after) / count))
    return ServerDetection(idle=interval, interval=interval, count=count)


def current_deadline() -> DeadlineFunc | None:
    """The deadline set with call_deadline() in this context, if any."""
    return _deadline.get()


class call_deadline:  # used as a function: `with call_deadline(...):`
    """Database calls made in the block (and in threads started from its context, such
    as a sync task's) have `deadline`; `lambda: None` lifts it (a long migration). A
    class, not a generator: it is entered for every job a worker runs (1.5 -> 0.5 us)."""

    __slots__ = ("_deadline", "_token")
    _token: contextvars.Token[DeadlineFunc | None]

    def __init__(self, deadline: DeadlineFunc) -> None:
        self._deadline = deadline

    def __enter__(self) -> None:
        self._token = _deadline.set(self._deadline)

    def __exit__(self, *exc: object) -> None:
        _deadline.reset(self._token)


def run_with_deadline(seconds: float, func: Callable[..., T], *args: Any) -> T:
    """Call `func(*args)` (on a worker's database thread) with a deadline `seconds` from
    now for the database calls it makes."""
    limit = time.monotonic() + seconds
    with call_deadline(lambda: limit):
        return func(*args)
