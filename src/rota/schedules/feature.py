"""The schedules feature: `app.schedules`, the leader's cron service, and `rota cron`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from rota.maintenance.service import PeriodicService
from rota.plugin import Feature, ServiceContext
from rota.schedules.registry import ScheduleRegistry
from rota.schedules.service import CronService


class SchedulesFeature(Feature):
    name: ClassVar[str] = "schedules"
    commands: ClassVar[tuple[str, ...]] = ("rota.cli.cron:cron",)
    routes: ClassVar[tuple[str, ...]] = ("rota.web.routes.schedules:register",)

    @functools.cached_property
    def api(self) -> ScheduleRegistry:
        return ScheduleRegistry(self.app)

    def prepare(self) -> None:
        # The schedules declared in code become rows, which the leader's cron service
        # reconciles and the CLI suspends, resumes and triggers.
        self.api.sync()

    def services(self, context: ServiceContext) -> Sequence[PeriodicService]:
        settings = context.settings
        return [CronService(context.driver, settings.cron_interval, scheduler=context.worker_id)]
