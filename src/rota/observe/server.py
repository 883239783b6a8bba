"""Deprecated location: the /metrics HTTP endpoint now lives in rota.telemetry.server."""

from rota.telemetry.server import MetricsServer, metrics_app
from rota.worker.metrics import worker_metrics_server

__all__ = ["MetricsServer", "metrics_app", "worker_metrics_server"]
