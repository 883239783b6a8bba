"""Events for choreography: a fact published once (with a stable id and a schema
version) and delivered as one job per subscriber, each with its own retries."""

from rota.drivers.base import EventRecord, Subscription
from rota.events.bus import EventBus

Event = EventRecord  # what a subscriber receives

__all__ = ["Event", "EventBus", "EventRecord", "Subscription"]
