"""Workflows (app.workflows): runs step by step (the dashboard draws the graph), cancel
a run and retry a failed step."""

from __future__ import annotations

from rota.auth import Permission
from rota.web import visibility
from rota.web.api import Api, Call
from rota.web.models import FeatureQuery, RefPath, StepPath, WorkflowOut


def register(api: Api) -> None:
    api.tags["workflows"] = "Workflows: DAGs of steps."

    @api.route(
        "GET",
        "/api/workflows",
        permission=Permission.READ,
        summary="List workflows",
        tag="workflows",
        query=FeatureQuery,
        response=WorkflowOut,
        many=True,
    )
    def list_workflows(call: Call) -> list[WorkflowOut]:
        """Runs, newest first, with each step's state (not its jobs)."""
        q: FeatureQuery = call.query
        runs = call.app.workflows.all(state=q.state, limit=q.limit)
        return [
            WorkflowOut.model_validate(visibility.workflow(r.to_json(jobs=False), call.principal))
            for r in runs
        ]

    @api.route(
        "GET",
        "/api/workflows/{ref}",
        permission=Permission.READ,
        summary="Show a workflow",
        tag="workflows",
        path_model=RefPath,
        response=WorkflowOut,
        errors=(404,),
    )
    def get_workflow(call: Call) -> WorkflowOut:
        """One run by id or key: every step with its dependencies, jobs, results and errors."""
        run = call.app.workflows.get(call.path.value)
        return WorkflowOut.model_validate(visibility.workflow(run.to_json(), call.principal))

    @api.route(
        "POST",
        "/api/workflows/{ref}/cancel",
        permission=Permission.OPERATE,
        summary="Cancel a workflow",
        tag="workflows",
        path_model=RefPath,
        response=WorkflowOut,
        errors=(404, 409),
    )
    def cancel_workflow(call: Call) -> WorkflowOut:
        """Cancel a running workflow: waiting step jobs are cancelled, running ones asked
        to stop."""
        run = call.app.workflows.cancel(call.path.value)
        return WorkflowOut.model_validate(visibility.workflow(run.to_json(), call.principal))

    @api.route(
        "POST",
        "/api/workflows/{ref}/steps/{step}/retry",
        permission=Permission.OPERATE,
        summary="Retry a workflow step",
        tag="workflows",
        path_model=StepPath,
        response=WorkflowOut,
        errors=(404, 409),
    )
    def retry_workflow_step(call: Call) -> WorkflowOut:
        """Run a failed step again (and what depends on it)."""
        p: StepPath = call.path
        ref: int | str = int(p.ref) if p.ref.isdigit() and len(p.ref) < 19 else p.ref
        run = call.app.workflows.retry_step(ref, p.step)
        return WorkflowOut.model_validate(visibility.workflow(run.to_json(), call.principal))
