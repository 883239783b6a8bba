"""The sagas feature: `app.sagas`, the leader's saga supervisor and saga retention, and
`rota sagas`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from rota.maintenance.pruner import RetentionService
from rota.maintenance.service import PeriodicService
from rota.plugin import Feature, ServiceContext
from rota.sagas.registry import SagaRegistry
from rota.sagas.service import SagaSupervisor
from rota.sagas.store import SagaStore


class SagaRetention(RetentionService):
    """Finished sagas (completed, compensated) past `saga_retention`; failed ones wait
    for a person."""

    name: ClassVar[str] = "saga-retention"


class SagasFeature(Feature):
    name: ClassVar[str] = "sagas"
    commands: ClassVar[tuple[str, ...]] = ("rota.cli.sagas:sagas",)
    routes: ClassVar[tuple[str, ...]] = ("rota.web.routes.sagas:register",)

    @functools.cached_property
    def api(self) -> SagaRegistry:
        return SagaRegistry(self.app)

    def services(self, context: ServiceContext) -> Sequence[PeriodicService]:
        settings, driver = context.settings, context.driver
        return [
            # Moves waiting work forward like the stager, so it shares its interval.
            SagaSupervisor(driver, settings.stage_interval),
            SagaRetention(
                driver,
                settings.prune_interval,
                prune=SagaStore(driver).prune,
                age=settings.saga_retention,
                batch=settings.prune_batch,
            ),
        ]
