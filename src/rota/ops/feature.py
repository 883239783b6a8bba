"""The operations feature: dead letters and governed replay (`app.dlq`), queue controls
(`app.queues`: limits, windows, breakers, poisoned partition keys), the expiry sweep and
the hold service, with `rota dlq` and `rota queues window|breaker|holds`."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import ClassVar

from rota.maintenance.service import PeriodicService
from rota.ops.bulk import JobControls
from rota.ops.dlq import DeadLetters
from rota.ops.expirer import Expirer
from rota.ops.queues import QueueControls
from rota.ops.service import QueueHoldService
from rota.plugin import Feature, ServiceContext


class OpsFeature(Feature):
    name: ClassVar[str] = "ops"
    claims: ClassVar[Mapping[str, str]] = {
        "gated": "job_claim_gated",
        "limited": "job_claim_limited",
    }
    commands: ClassVar[tuple[str, ...]] = (
        "rota.cli.dlq:dlq",
        "rota.cli.holds:install",
        "rota.cli.bulk:install",
    )
    routes: ClassVar[tuple[str, ...]] = (
        "rota.web.routes.dead_letters:register",
        "rota.web.routes.bulk:register",
    )

    @functools.cached_property
    def dlq(self) -> DeadLetters:
        return DeadLetters(self.app)

    @functools.cached_property
    def jobs(self) -> JobControls:
        return JobControls(self.app)

    @functools.cached_property
    def queues(self) -> QueueControls:
        return QueueControls(self.app)

    def services(self, context: ServiceContext) -> Sequence[PeriodicService]:
        settings, driver = context.settings, context.driver
        return [
            Expirer(driver, settings.stage_interval),
            QueueHoldService(driver, settings.hold_interval),
        ]
