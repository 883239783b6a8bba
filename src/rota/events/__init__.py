"""Events for choreography: a fact published once (with a stable id and a schema
version) and delivered as one job per subscriber, each with its own retries."""

from rota.events.bus import EventBus
from rota.events.store import EventRecord, Subscription

Event = EventRecord  # what a subscriber receives

__all__ = ["Event", "EventBus", "EventRecord", "Subscription"]
