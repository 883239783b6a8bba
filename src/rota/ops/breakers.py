"""Circuit breakers: settings with validation, and the decision of one pass, kept pure
so tests can walk every transition. The hold service applies the decisions.

closed --(failure rate >= threshold over >= min_attempts)--> open (queue held)
open --(cool-down over)--> half_open (one trial job may start)
half_open --(trial completed)--> closed; --(trial failed)--> open again."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rota.errors import ArgumentsError

# Attempt outcomes (job history) a breaker counts as failures; `completed` is a success;
# snoozed, cancelled and shut-down attempts say nothing about the downstream.
FAILED_OUTCOMES = ("failed", "discarded", "lost")


@dataclass(frozen=True)
class BreakerConfig:
    """Open when at least `threshold` of at least `min_attempts` attempts started in the
    last `window` seconds failed; stay open `cooldown` seconds, then try one job."""

    threshold: float = 0.5
    min_attempts: int = 20
    window: float = 60.0
    cooldown: float = 30.0

    def __post_init__(self) -> None:
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t <= 1:
            raise ArgumentsError(
                f"threshold must be a failure rate above 0 and at most 1 (0.5 is 50%), not {t!r}"
            )
        n = self.min_attempts
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1_000_000:
            raise ArgumentsError(f"min_attempts must be an integer from 1 to 1000000, not {n!r}")
        for name, low in (("window", 1.0), ("cooldown", 1.0)):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not low <= value <= 7 * 86400
            ):
                raise ArgumentsError(
                    f"{name} must be seconds from {low:g} to 604800 (a week), not {value!r}"
                )


def should_open(config: BreakerConfig, attempts: int, failures: int) -> bool:
    """Whether a closed breaker opens on these counts."""
    return attempts >= config.min_attempts and failures >= config.threshold * attempts


def trial_verdict(outcome: str | None) -> str | None:
    """What the trial attempt's outcome means: "close", "reopen", "retry" (inconclusive:
    let another job try) or None (still running)."""
    if outcome is None:
        return None
    if outcome == "completed":
        return "close"
    if outcome in FAILED_OUTCOMES:
        return "reopen"
    return "retry"
