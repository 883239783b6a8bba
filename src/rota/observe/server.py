"""Deprecated location: the /metrics HTTP endpoint now lives in rota.telemetry.server."""

from rota.telemetry.server import (
    METRICS_TOKEN_ENV,
    MetricsServer,
    metrics_app,
    metrics_token,
    token_ok,
    unauthorized,
)
from rota.worker.metrics import worker_metrics_server

__all__ = [
    "METRICS_TOKEN_ENV",
    "MetricsServer",
    "metrics_app",
    "metrics_token",
    "token_ok",
    "unauthorized",
    "worker_metrics_server",
]
