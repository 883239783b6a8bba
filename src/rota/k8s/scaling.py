"""Replica arithmetic for `rota scale-hint`: what KEDA and the HPA will ask for given a
queue's signal, and what the backlog needs given the mean run time. Pure functions."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rota.drivers.base import BacklogReport, DurationReport
from rota.errors import ConfigurationError
from rota.k8s.settings import Signal


@dataclass(frozen=True)
class ScaleHintSettings:
    concurrency: int = 10  # jobs one replica runs at once on this queue
    min_replicas: int = 0
    max_replicas: int = 10
    target: float | None = None  # KEDA's jobs per replica; default 2 x concurrency
    activation: float = 0.0
    drain_within: float = 60.0  # seconds: how soon the work present now should be done
    signal: Signal = Signal.DEMAND

    def __post_init__(self) -> None:
        if not 1 <= self.concurrency <= 10_000:
            raise ConfigurationError("--concurrency must be 1-10000")
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise ConfigurationError("need 0 <= --min <= --max and --max >= 1")
        if self.target is not None and not (math.isfinite(self.target) and self.target > 0):
            raise ConfigurationError("--target must be a positive number")
        if not (math.isfinite(self.activation) and self.activation >= 0):
            raise ConfigurationError("--activation must be >= 0")
        if not (math.isfinite(self.drain_within) and self.drain_within > 0):
            raise ConfigurationError("--drain-within must be a positive number of seconds")

    @property
    def keda_target(self) -> float:
        return self.target if self.target is not None else 2.0 * self.concurrency


@dataclass(frozen=True)
class ScaleHint:
    queue: str
    signal: Signal
    value: int  # what KEDA's query returns for this queue now
    backlog: int
    running: int
    oldest_age_s: float
    mean_s: float | None  # mean run time of recently completed jobs
    samples: int
    active: bool  # value > activation: KEDA keeps at least one replica
    keda_replicas: int  # what KEDA and the HPA settle on with the configured target
    desired: int  # what the work needs: done within drain_within at the mean run time
    suggested_target: float | None  # the target with which KEDA would ask for `desired`
    drain_s: float | None  # how long the present work takes at `desired` replicas


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def keda_replicas(value: float, settings: ScaleHintSettings) -> int:
    """KEDA decides 0 <-> 1 by activation (strictly greater), the HPA 1 <-> N by
    AverageValue: ceil(value / target), within [max(1, min), max] (SEMANTICS §3.1-3.2)."""
    if value <= settings.activation:
        return settings.min_replicas
    wanted = math.ceil(value / settings.keda_target)
    return _clamp(wanted, max(1, settings.min_replicas), settings.max_replicas)


def scale_hint(
    backlog: BacklogReport, durations: DurationReport, settings: ScaleHintSettings
) -> ScaleHint:
    """With a mean run time D, c slots per replica and a drain time L, N replicas finish
    the present work W in about W*D/(N*c) seconds, so N = ceil(W*D/(c*L)). More than
    ceil(W/c) replicas would leave slots idle, so the target per replica is at least c."""
    value = backlog.demand if settings.signal is Signal.DEMAND else backlog.backlog
    concurrency = settings.concurrency
    mean = durations.mean_s if durations.samples else None
    suggested: float | None = None
    drain: float | None = None
    if mean is None or mean <= 0 or value == 0:
        # No run time, or nothing to run: no target to size (on an empty queue the formula
        # would suggest concurrency * drain / mean, thousands of jobs per replica).
        desired = keda_replicas(value, settings)
    else:
        suggested = max(float(concurrency), concurrency * settings.drain_within / mean)
        desired = _clamp(math.ceil(value / suggested), settings.min_replicas, settings.max_replicas)
        if desired and value:
            drain = max(mean, value * mean / (desired * concurrency))
    return ScaleHint(
        queue=backlog.queue,
        signal=settings.signal,
        value=value,
        backlog=backlog.backlog,
        running=backlog.running,
        oldest_age_s=backlog.oldest_age_s,
        mean_s=mean,
        samples=durations.samples,
        active=value > settings.activation,
        keda_replicas=keda_replicas(value, settings),
        desired=desired,
        suggested_target=None if suggested is None else round(suggested, 2),
        drain_s=drain,
    )
