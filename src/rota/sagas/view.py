"""The JSON view of a saga: one shape for `rota sagas --json` and the HTTP API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rota.sagas.store import SagaRecord


def _iso(value: Any) -> Any:
    return value.astimezone(UTC).isoformat() if isinstance(value, datetime) else value


def saga_json(saga: SagaRecord) -> dict[str, Any]:
    return {
        "key": saga.key,
        "saga": saga.name,
        "status": str(saga.status),
        "step": saga.step,
        "job_id": saga.job_id,
        "data": saga.data,
        "error": saga.error,
        "steps": [s["name"] for s in saga.plan],
        "deadline_at": _iso(saga.deadline_at),
        "created_at": _iso(saga.created_at),
        "updated_at": _iso(saga.updated_at),
        "history": [{k: _iso(v) for k, v in entry.items()} for entry in saga.history],
    }
