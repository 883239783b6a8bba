"""Operating rota: dead letters and governed replay, queue controls (global concurrency and
rate limits), partition keys, start deadlines and retention."""

from rota.ops.model import (
    PoisonedKey,
    QueueChange,
    QueueControl,
    ReplayRecord,
    ReplayReport,
    ReplayRequest,
    Selection,
)

__all__ = [
    "PoisonedKey",
    "QueueChange",
    "QueueControl",
    "ReplayRecord",
    "ReplayReport",
    "ReplayRequest",
    "Selection",
]
