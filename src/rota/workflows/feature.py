"""The workflows feature: `app.workflows`, the leader's workflow controller, and
`rota workflows`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from rota.app import App
from rota.context import register_view
from rota.maintenance.service import PeriodicService
from rota.plugin import Feature, ServiceContext
from rota.workflows.context import step_context
from rota.workflows.registry import WorkflowRegistry
from rota.workflows.service import WorkflowController


class WorkflowsFeature(Feature):
    name: ClassVar[str] = "workflows"
    commands: ClassVar[tuple[str, ...]] = ("rota.cli.workflows:workflows",)
    routes: ClassVar[tuple[str, ...]] = ("rota.web.routes.workflows:register",)

    def attach(self, app: App) -> None:
        super().attach(app)
        register_view("workflow", step_context)  # ctx.workflow

    @functools.cached_property
    def api(self) -> WorkflowRegistry:
        return WorkflowRegistry(self.app)

    def services(self, context: ServiceContext) -> Sequence[PeriodicService]:
        settings = context.settings
        return [
            WorkflowController(
                self.api,
                settings.workflow_interval,
                completed_retention=settings.completed_retention,
                failed_retention=settings.discarded_retention,
                prune_interval=settings.prune_interval,
            )
        ]
