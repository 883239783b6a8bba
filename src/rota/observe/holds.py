"""Cluster metrics of queue holds and circuit breakers (read by rota.observe.cluster):
why queues are paused, each breaker's state, and how often each breaker opened."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from rota.drivers.base import QueueHold
from rota.ops.hold_model import BREAKER_STATES, HOLD_SOURCES, BreakerRecord


def hold_families(holds: list[QueueHold], breakers: list[BreakerRecord]) -> list[Metric]:
    held = GaugeMetricFamily(
        "rota_queue_held",
        "1 while the queue is held by this source (manual, window, breaker); "
        "a queue with any hold starts nothing new.",
        labels=("queue", "source"),
    )
    for hold in holds:
        if hold.source in HOLD_SOURCES:
            held.add_metric([hold.queue, hold.source], 1)
    state = GaugeMetricFamily(
        "rota_queue_breaker_state",
        "1 for the state the queue's circuit breaker is in (closed, open, half_open).",
        labels=("queue", "state"),
    )
    trips = CounterMetricFamily(
        "rota_queue_breaker_opened",
        "Times the queue's circuit breaker opened (a failed trial counts too).",
        labels=("queue",),
    )
    for breaker in breakers:
        for name in BREAKER_STATES:
            state.add_metric([breaker.queue, name], 1 if breaker.state == name else 0)
        trips.add_metric([breaker.queue], breaker.trips)
    return [held, state, trips]
