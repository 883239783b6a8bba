"""Batches: run-to-completion groups of jobs with Kubernetes Job semantics (definitions,
the pure reconciler and status; storage is in the drivers, the controller in maintenance)."""

from rota.batches.spec import (
    Action,
    BatchSpec,
    FailureRule,
    SuccessRule,
    format_indexes,
    parse_indexes,
)
from rota.batches.status import BatchStatus
from rota.errors import BatchError, BatchNotFoundError

__all__ = [
    "Action",
    "BatchError",
    "BatchNotFoundError",
    "BatchSpec",
    "BatchStatus",
    "FailureRule",
    "SuccessRule",
    "format_indexes",
    "parse_indexes",
]
