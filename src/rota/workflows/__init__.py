"""Workflows: a DAG of task steps with dependencies, static and dynamic fan-out, fan-in,
per-step retry budgets and a failure policy, advanced by the leader's controller."""

from rota.workflows.definition import Step, Workflow, chain
from rota.workflows.spec import FailurePolicy, StepState, WorkflowState
from rota.workflows.status import StepJob, StepStatus, WorkflowRun

__all__ = [
    "FailurePolicy",
    "Step",
    "StepJob",
    "StepState",
    "StepStatus",
    "Workflow",
    "WorkflowRun",
    "WorkflowState",
    "chain",
]
