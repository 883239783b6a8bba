"""Sagas: orchestrated multi-step processes with compensations, persisted as one row
each (status, step, data, history) and moved on by their step jobs in one transaction
per transition."""

from rota.sagas.definition import Saga, SagaStep
from rota.sagas.registry import SagaRegistry
from rota.sagas.store import SagaRecord, SagaStatus

__all__ = ["Saga", "SagaRecord", "SagaRegistry", "SagaStatus", "SagaStep"]
