"""Sagas (app.sagas): each saga step by step with its history; retry and abort."""

from __future__ import annotations

from rota.auth import Permission, Principal
from rota.sagas.store import SagaRecord
from rota.sagas.view import saga_json
from rota.web import visibility
from rota.web.api import Api, Call
from rota.web.models import AbortBody, FeatureQuery, KeyPath, SagaOut


def _json(saga: SagaRecord, principal: Principal) -> SagaOut:
    return SagaOut.model_validate(visibility.saga(saga_json(saga), principal))


def register(api: Api) -> None:
    api.tags["sagas"] = "Sagas: steps with compensations."

    @api.route(
        "GET",
        "/api/sagas",
        permission=Permission.READ,
        summary="List sagas",
        tag="sagas",
        query=FeatureQuery,
        response=SagaOut,
        many=True,
    )
    def list_sagas(call: Call) -> list[SagaOut]:
        """Sagas, newest first, optionally by status."""
        q: FeatureQuery = call.query
        found = call.app.sagas.list(status=q.state, limit=q.limit)
        return [_json(s, call.principal) for s in found]

    @api.route(
        "GET",
        "/api/sagas/{key}",
        permission=Permission.READ,
        summary="Show a saga",
        tag="sagas",
        path_model=KeyPath,
        response=SagaOut,
        errors=(404,),
    )
    def get_saga(call: Call) -> SagaOut:
        """One saga by its business key: status, current step, data and history."""
        return _json(call.app.sagas.get(call.path.key), call.principal)

    @api.route(
        "POST",
        "/api/sagas/{key}/retry",
        permission=Permission.OPERATE,
        summary="Retry a saga step",
        tag="sagas",
        path_model=KeyPath,
        response=SagaOut,
        errors=(404, 409),
    )
    def retry_saga(call: Call) -> SagaOut:
        """Run the current step (or compensation) again now."""
        return _json(call.app.sagas.retry(call.path.key), call.principal)

    @api.route(
        "POST",
        "/api/sagas/{key}/abort",
        permission=Permission.OPERATE,
        summary="Abort a saga",
        tag="sagas",
        path_model=KeyPath,
        body=AbortBody,
        response=SagaOut,
        errors=(404, 409),
    )
    def abort_saga(call: Call) -> SagaOut:
        """Stop a running saga and compensate its completed steps, newest first."""
        saga = call.app.sagas.abort(call.path.key, reason=call.body.reason)
        return _json(saga, call.principal)
