"""The one rule for a job's payload on every route and page: its arguments, result,
checkpoint, step results, progress message, and its attempts' error messages and
tracebacks are shown only to a caller with the `dlq_read` permission. Everyone with `read`
sees the rest (task, queue, state, attempts, times, error types). The same holds for what
carries a job's payload elsewhere: a schedule's arguments, a workflow step's result and
error, a saga's data and errors, a batch's failure message."""

from __future__ import annotations

from typing import Any

from rota.auth import Permission, Principal
from rota.job import Job
from rota.web.models import JobOut

HIDDEN = "<hidden>"


def sees_payload(principal: Principal) -> bool:
    return principal.can(Permission.DLQ_READ)


def job_out(job: Job, principal: Principal, steps: dict[str, Any] | None = None) -> JobOut:
    out = JobOut.of(job, steps=steps)
    if sees_payload(principal):
        return out
    return out.model_copy(
        update={
            # An encrypted task's arguments stay "<encrypted>": that says no more.
            "args": out.args if job.args_encrypted else HIDDEN,
            "payload_hidden": True,
            "result": None,
            "checkpoint": None,
            "steps": None,
            "progress_message": None,
            "history": [
                a.model_copy(update={"message": None, "traceback": None}) for a in out.history
            ],
        }
    )


def workflow(data: dict[str, Any], principal: Principal) -> dict[str, Any]:
    if sees_payload(principal):
        return data
    steps = []
    for step in data.get("steps", []):
        jobs = [{**j, "result": None, "error": None} for j in step.get("jobs", [])]
        hidden = {**step, "result": None, "error": _hidden(step.get("error"))}
        if "jobs" in step:
            hidden["jobs"] = jobs
        steps.append(hidden)
    return {
        **data,
        "args": HIDDEN,
        "error": _hidden(data.get("error")),
        "steps": steps,
        "payload_hidden": True,
    }


def saga(data: dict[str, Any], principal: Principal) -> dict[str, Any]:
    if sees_payload(principal):
        return data
    history = [
        {**entry, "error": _hidden(entry.get("error"))} if "error" in entry else entry
        for entry in data.get("history", [])
    ]
    return {
        **data,
        "data": HIDDEN,
        "error": _hidden(data.get("error")),
        "history": history,
        "payload_hidden": True,
    }


def schedule(data: dict[str, Any], principal: Principal) -> dict[str, Any]:
    if sees_payload(principal) or data.get("args") == "<encrypted>":
        return data
    return {**data, "args": HIDDEN}


def batch(data: dict[str, Any], principal: Principal) -> dict[str, Any]:
    if sees_payload(principal):
        return data
    # A failed batch's message quotes the error of the job that failed it.
    return {**data, "message": _hidden(data.get("message"))}


def _hidden(value: Any) -> str | None:
    return None if value is None else HIDDEN
