"""The batches feature: `app.batches`, the leader's batch controller, and `rota batches`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from rota.batches.registry import BatchRegistry
from rota.batches.service import BatchController
from rota.maintenance.service import PeriodicService
from rota.plugin import Feature, ServiceContext


class BatchesFeature(Feature):
    name: ClassVar[str] = "batches"
    commands: ClassVar[tuple[str, ...]] = ("rota.cli.batches:batches",)
    routes: ClassVar[tuple[str, ...]] = ("rota.web.routes.batches:register",)

    @functools.cached_property
    def api(self) -> BatchRegistry:
        return BatchRegistry(self.app)

    def services(self, context: ServiceContext) -> Sequence[PeriodicService]:
        return [BatchController(context.driver, context.settings.batch_interval)]
