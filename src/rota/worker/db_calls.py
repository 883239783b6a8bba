"""What a worker knows about its own database calls: how long they take, which are
waiting for an answer now, and which have waited too long (each such hung call is logged
once, with its age). Health and /metrics read it; nothing here touches the database."""

from __future__ import annotations

import bisect
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("rota.worker")

# Upper bounds (seconds) of the latency histogram's buckets; the last is +Inf.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class _Call:
    name: str
    started: float
    logged: bool = False


class DbCalls:
    def __init__(self, hang_after: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.hang_after = hang_after
        self.clock = clock
        self._ids = itertools.count()
        self._in_flight: dict[int, _Call] = {}
        self.counts = [0] * (len(BUCKETS) + 1)  # per bucket, not cumulative
        self.total_seconds = 0.0
        self.failed = 0
        self.hung_total = 0  # calls that waited past hang_after (each counted once)
        self.last_ok: float | None = None  # when the last call that succeeded ended
        self.last_failed: float | None = None

    def begin(self, name: str) -> int:
        key = next(self._ids)
        self._in_flight[key] = _Call(name, self.clock())
        return key

    def end(self, key: int, ok: bool) -> None:
        call = self._in_flight.pop(key, None)
        if call is None:
            return
        now = self.clock()
        seconds = now - call.started
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total_seconds += seconds
        if ok:
            self.last_ok = now
        else:
            self.failed += 1
            self.last_failed = now
        if call.logged:
            log.warning(
                "database call %s %s after %.1fs",
                call.name,
                "answered" if ok else "failed",
                seconds,
            )

    def check(self) -> int:
        """Log each call that has just passed hang_after (once); returns how many wait
        past it now."""
        now = self.clock()
        hung = 0
        for call in list(self._in_flight.values()):
            age = now - call.started
            if age <= self.hang_after:
                continue
            hung += 1
            if not call.logged:
                call.logged = True
                self.hung_total += 1
                log.warning(
                    "database call %s has had no answer for %.1fs (the database or the link "
                    "to it is silent)",
                    call.name,
                    age,
                )
        return hung

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def oldest_age(self) -> float:
        """Seconds the oldest call in flight has waited (0 when none is waiting)."""
        if not self._in_flight:
            return 0.0
        return self.clock() - min(c.started for c in self._in_flight.values())

    def hung(self) -> int:
        now = self.clock()
        return sum(1 for c in self._in_flight.values() if now - c.started > self.hang_after)
