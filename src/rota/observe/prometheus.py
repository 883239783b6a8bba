"""Deprecated location: the Prometheus collectors now live in rota.telemetry.prometheus
(the process's counters) and rota.worker.metrics (a worker's slots)."""

from rota.telemetry.prometheus import (
    TASK_QUEUE,
    ProcessCollector,
    Renderer,
    registry_of,
    render_text,
    renderer,
)
from rota.worker.metrics import WorkerCollector, worker_registry

__all__ = [
    "TASK_QUEUE",
    "ProcessCollector",
    "Renderer",
    "WorkerCollector",
    "registry_of",
    "render_text",
    "renderer",
    "worker_registry",
]
