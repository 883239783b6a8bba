"""The engine's API endpoints, one module per area, each with `register(api)`. A feature
adds its own by naming its module's register function in `Feature.routes` (batches,
workflows, sagas, dead letters, schedules, tokens); the server mounts those of the
features plugged into the app."""

from __future__ import annotations

from collections.abc import Callable

from rota.web.api import Api
from rota.web.routes import jobs, queues, system

ROUTERS: list[Callable[[Api], None]] = [
    system.register,
    queues.register,
    jobs.register,
]
