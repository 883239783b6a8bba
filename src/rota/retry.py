"""Backoff as pure functions: exponential growth, capped, with full jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass

from rota.errors import TaskDefinitionError


@dataclass(frozen=True)
class Backoff:
    """Delay before retry n is uniform in [0, min(cap, base * factor**(n-1))] (full jitter).

    Full jitter spreads a burst of failures over the whole window, so a
    downstream outage does not get a synchronised thundering herd back.
    """

    base: float = 1.0
    factor: float = 2.0
    cap: float = 300.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.base < 0 or self.cap < 0:
            raise TaskDefinitionError("backoff base and cap must be >= 0 seconds")
        if self.factor < 1:
            raise TaskDefinitionError("backoff factor must be >= 1")

    def ceiling(self, attempt: int) -> float:
        """The largest delay after failed attempt number `attempt` (1-based)."""
        if attempt < 1:
            return 0.0
        # Guard the exponent: factor**1000 overflows a float long before the cap matters.
        exponent = min(attempt - 1, 64)
        return float(min(self.cap, self.base * self.factor**exponent))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The delay to wait after failed attempt number `attempt`."""
        top = self.ceiling(attempt)
        if not self.jitter:
            return top
        return (rng or random).uniform(0.0, top)
