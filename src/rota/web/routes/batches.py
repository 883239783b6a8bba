"""Batches (app.batches): progress, indexes and jobs; suspend, resume and cancel."""

from __future__ import annotations

from rota.auth import Permission
from rota.web import visibility
from rota.web.api import Api, Call
from rota.web.models import BatchDetailOut, BatchOut, FeatureQuery, RefPath


def register(api: Api) -> None:
    api.tags["batches"] = "Batches with Kubernetes Job semantics."

    @api.route(
        "GET",
        "/api/batches",
        permission=Permission.READ,
        summary="List batches",
        tag="batches",
        query=FeatureQuery,
        response=BatchOut,
        many=True,
    )
    def list_batches(call: Call) -> list[BatchOut]:
        """Batches, newest first; `state=running` lists the unfinished ones."""
        q: FeatureQuery = call.query
        found = call.app.batches.list(open_only=q.state == "running", limit=q.limit)
        return [
            BatchOut.model_validate(visibility.batch(b.to_json(), call.principal))
            for b in found
            if q.state in (None, "running") or b.state == q.state
        ]

    @api.route(
        "GET",
        "/api/batches/{ref}",
        permission=Permission.READ,
        summary="Show a batch",
        tag="batches",
        path_model=RefPath,
        response=BatchDetailOut,
        errors=(404,),
    )
    def get_batch(call: Call) -> BatchDetailOut:
        """One batch by id or name, with its completed and failed indexes and its jobs."""
        ref = call.path.value
        status = call.app.batches.get(ref)
        jobs = [visibility.job_out(j, call.principal) for j in call.app.batches.jobs(status.id)]
        shown = visibility.batch(status.to_json(), call.principal)
        return BatchDetailOut.model_validate({**shown, "jobs": jobs})

    for action, doc in (
        ("suspend", "Stop starting jobs and cancel running ones; progress is kept."),
        ("resume", "Start jobs again."),
        ("cancel", "Fail the batch now: no new jobs, running ones are asked to stop."),
    ):
        _action(api, action, doc)


def _action(api: Api, action: str, doc: str) -> None:
    def handler(call: Call) -> BatchOut:
        status = getattr(call.app.batches, action)(call.path.value)
        return BatchOut.model_validate(visibility.batch(status.to_json(), call.principal))

    handler.__name__ = f"{action}_batch"
    handler.__doc__ = doc
    api.route(
        "POST",
        f"/api/batches/{{ref}}/{action}",
        permission=Permission.OPERATE,
        summary=f"{action.capitalize()} a batch",
        tag="batches",
        path_model=RefPath,
        response=BatchOut,
        errors=(404, 409),
    )(handler)
