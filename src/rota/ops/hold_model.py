"""Values of processing windows and circuit breakers as stored (a queue hold itself is
the engine's: rota.drivers.base.QueueHold): pure data,
no storage and no policy here (see rota.ops.windows and rota.ops.breakers)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from rota.drivers.base import HOLD_SOURCES, HoldSource, QueueHold

BreakerState = Literal["closed", "open", "half_open"]
BREAKER_STATES: tuple[BreakerState, ...] = ("closed", "open", "half_open")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@dataclass(frozen=True)
class WindowRecord:
    """A queue's stored processing windows (`windows` as JSON, see rota.ops.windows)."""

    queue: str
    windows_json: str
    tz: str
    updated_at: datetime | None = None


@dataclass(frozen=True)
class BreakerRecord:
    """A queue's circuit breaker: its settings and its state as the leader last wrote it."""

    queue: str
    threshold: float  # open at this failure rate (0 < threshold <= 1) ...
    min_attempts: int  # ... of at least this many finished attempts ...
    window: float  # ... started in the last `window` seconds
    cooldown: float  # seconds open before a trial job is let through
    state: BreakerState = "closed"
    changed_at: datetime | None = None  # when the breaker entered its state
    trips: int = 0  # how often it opened (a failed trial counts too)
    attempts: int = 0  # the attempts and failures the last decision saw
    failures: int = 0
    trial_job_id: int | None = None  # half-open: the job let through, once it started
    trial_attempt: int | None = None
    saved_rate: bool = False  # half-open: the queue's rate limit is borrowed ...
    saved_rate_limit: int | None = None  # ... and was this before
    saved_rate_period: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "state": self.state,
            "threshold": self.threshold,
            "min_attempts": self.min_attempts,
            "window_s": self.window,
            "cooldown_s": self.cooldown,
            "changed_at": _iso(self.changed_at),
            "trips": self.trips,
            "attempts": self.attempts,
            "failures": self.failures,
            "trial_job_id": self.trial_job_id,
        }


__all__ = [
    "BREAKER_STATES",
    "HOLD_SOURCES",
    "BreakerRecord",
    "BreakerState",
    "HoldSource",
    "QueueHold",
    "WindowRecord",
]
