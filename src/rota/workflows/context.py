"""`ctx.workflow`: where a running job sits in its workflow (step, index, total), with the
workflow's arguments and the results of completed steps read on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rota.errors import WorkflowNotFoundError
from rota.workflows.store import WorkflowStore

if TYPE_CHECKING:
    from rota.drivers.base import Driver
    from rota.workflows.status import WorkflowRun


class StepContext:
    """The workflow part of a job's context; None outside workflows."""

    def __init__(self, meta: dict[str, Any], driver: Driver | None) -> None:
        self.id: int = int(meta["id"])
        self.name: str = meta["name"]
        self.step: str = meta["step"]
        self.index: int = int(meta.get("index", 0))  # this job's place in its step's fan-out
        self.total: int = int(meta.get("total", 1))  # jobs of this step
        self._driver = driver
        self._run: WorkflowRun | None = None

    def __repr__(self) -> str:
        return f"<StepContext workflow={self.id} step={self.step} {self.index + 1}/{self.total}>"

    def _load(self) -> WorkflowRun:
        if self._run is None:
            from rota.workflows.status import WorkflowRun

            if self._driver is None:
                raise WorkflowNotFoundError("this context has no database to read it from")
            snapshot = WorkflowStore(self._driver).find(self.id)
            if snapshot is None:
                raise WorkflowNotFoundError(f"workflow {self.id} no longer exists")
            self._run = WorkflowRun.of(snapshot)
        return self._run

    @property
    def args(self) -> dict[str, Any]:
        """The arguments the workflow was started with."""
        return self._load().args

    @property
    def results(self) -> dict[str, Any]:
        """The results of the workflow's completed steps by step name (a list for a step
        that fans out), as of the first read in this attempt."""
        return self._load().results

    @property
    def key(self) -> str | None:
        return self._load().key


def step_context(meta: dict[str, Any], driver: Driver | None) -> StepContext | None:
    found = meta.get("workflow")
    return StepContext(found, driver) if isinstance(found, dict) else None
