"""API endpoints, one module per area. Each module has `register(api)`; a feature (dead
letters, batches, workflows, sagas, metrics) plugs in by adding its module to ROUTERS."""

from __future__ import annotations

from collections.abc import Callable

from rota.web.api import Api
from rota.web.routes import (
    batches,
    dead_letters,
    jobs,
    queues,
    sagas,
    schedules,
    system,
    tokens,
    workflows,
)

ROUTERS: list[Callable[[Api], None]] = [
    system.register,
    queues.register,
    jobs.register,
    schedules.register,
    dead_letters.register,
    batches.register,
    workflows.register,
    sagas.register,
    tokens.register,
]
