"""Deprecated location: the worker's settings now live in rota.settings."""

from rota.settings import WorkerSettings, default_worker_id, parse_queues

__all__ = ["WorkerSettings", "default_worker_id", "parse_queues"]
