"""The worker: fetch -> execute -> complete, with heartbeats and graceful shutdown."""

from rota.settings import WorkerSettings
from rota.worker.worker import Worker

__all__ = ["Worker", "WorkerSettings"]
