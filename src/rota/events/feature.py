"""The events feature: `app.events` (with `app.on` and `app.publish`), subscriptions
stored when a worker starts, event retention, and `rota events`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from rota.events.bus import EventBus
from rota.events.store import EventStore
from rota.maintenance.pruner import RetentionService
from rota.maintenance.service import PeriodicService
from rota.plugin import Feature, ServiceContext


class EventRetention(RetentionService):
    """Published events past `event_retention` (replay and publish-once keys reach back
    this far)."""

    name: ClassVar[str] = "event-retention"


class EventsFeature(Feature):
    name: ClassVar[str] = "events"
    commands: ClassVar[tuple[str, ...]] = ("rota.cli.events:events",)

    @functools.cached_property
    def api(self) -> EventBus:
        return EventBus(self.app)

    def prepare(self) -> None:
        # Stored subscriptions are what publishers deliver to, whatever code they run.
        if self.api.subscribers:
            self.api.sync()

    def database_changed(self) -> None:
        if "api" in self.__dict__:  # functools.cached_property: only if it was used
            self.api.database_changed()

    def services(self, context: ServiceContext) -> Sequence[PeriodicService]:
        settings, driver = context.settings, context.driver
        return [
            EventRetention(
                driver,
                settings.prune_interval,
                prune=EventStore(driver).prune,
                age=settings.event_retention,
                batch=settings.prune_batch,
            )
        ]
