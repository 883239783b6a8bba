"""The routing feature: `app.routing`, the capabilities a worker advertises, and
`rota queues unroutable`."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import ClassVar

from rota.maintenance.service import PeriodicService
from rota.plugin import Feature, ServiceContext
from rota.routing.advertiser import Advertiser
from rota.routing.api import Routing


class RoutingFeature(Feature):
    name: ClassVar[str] = "routing"
    # Jobs with required labels make their queue gated (the same statement as ops).
    claims: ClassVar[Mapping[str, str]] = {"gated": "job_claim_gated"}
    commands: ClassVar[tuple[str, ...]] = ("rota.cli.routing:install",)

    @functools.cached_property
    def api(self) -> Routing:
        return Routing(self.app)

    def services(self, context: ServiceContext) -> Sequence[PeriodicService]:
        settings = context.settings
        # Every worker keeps a heartbeat row (its queues and capabilities, none for a plain
        # one): routing reads the capabilities, the dashboard's Workers page every row.
        return [
            Advertiser(
                context.driver,
                worker_id=context.worker_id,
                queues=list(settings.queues),
                capabilities=sorted(settings.capabilities),
                interval=settings.heartbeat_interval,
                ttl=settings.lease,
            )
        ]
