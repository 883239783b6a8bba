"""Errors as RFC 9457 problem details (`application/problem+json`): one mapping from
rota's exceptions to HTTP statuses, shared by every endpoint."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from rota.errors import (
    ArgumentsError,
    AuthenticationError,
    BatchError,
    BatchNotFoundError,
    ConfigurationError,
    DatabaseUnavailableError,
    InvalidTransitionError,
    JobNotFoundError,
    PayloadError,
    PermissionDeniedError,
    RotaError,
    SagaError,
    SagaNotFoundError,
    ScheduleNotFoundError,
    SchemaError,
    UnknownTaskError,
    WorkflowError,
    WorkflowNotFoundError,
)

log = logging.getLogger("rota.web")

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://rota.dev/problems/"

# Most specific first: the first class an error is an instance of decides its status.
_STATUS: list[tuple[type[RotaError], int, str]] = [
    (AuthenticationError, 401, "unauthenticated"),
    (PermissionDeniedError, 403, "forbidden"),
    (JobNotFoundError, 404, "not-found"),
    (ScheduleNotFoundError, 404, "not-found"),
    (BatchNotFoundError, 404, "not-found"),
    (WorkflowNotFoundError, 404, "not-found"),
    (SagaNotFoundError, 404, "not-found"),
    (UnknownTaskError, 422, "unknown-task"),
    (InvalidTransitionError, 409, "conflict"),
    (BatchError, 409, "conflict"),
    (WorkflowError, 409, "conflict"),
    (SagaError, 409, "conflict"),
    (ArgumentsError, 422, "invalid-arguments"),
    (PayloadError, 422, "invalid-arguments"),
    (DatabaseUnavailableError, 503, "unavailable"),
    (SchemaError, 503, "unavailable"),
    (ConfigurationError, 422, "invalid-arguments"),
]

_TITLES = {
    400: "Bad request",
    401: "Authentication required",
    403: "Permission denied",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "Invalid input",
    500: "Internal error",
    503: "Service unavailable",
}


class Problem(Exception):
    """Raise in a handler to answer with a problem document."""

    def __init__(self, status: int, detail: str, *, kind: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.kind = kind or _TITLES.get(status, "error").lower().replace(" ", "-")
        self.extra = extra


def problem_response(
    status: int, detail: str, *, kind: str | None = None, instance: str | None = None, **extra: Any
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_BASE + (kind or _TITLES.get(status, "error").lower().replace(" ", "-")),
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    body.update(extra)
    headers = {"WWW-Authenticate": 'Bearer realm="rota"'} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def from_exception(exc: BaseException, request: Request) -> JSONResponse:
    """The problem document for any exception a handler raised."""
    path = request.url.path
    if isinstance(exc, Problem):
        return problem_response(exc.status, exc.detail, kind=exc.kind, instance=path, **exc.extra)
    if isinstance(exc, ValidationError):
        return validation_problem(exc, path)
    if isinstance(exc, RotaError):
        for cls, status, kind in _STATUS:
            if isinstance(exc, cls):
                return problem_response(status, str(exc), kind=kind, instance=path)
        return problem_response(422, str(exc), kind="invalid-arguments", instance=path)
    if isinstance(exc, HTTPException):
        return problem_response(exc.status_code, str(exc.detail), instance=path)
    log.exception("unexpected error on %s %s", request.method, path, exc_info=exc)
    return problem_response(500, "the server failed to answer; see its log", instance=path)


def validation_problem(exc: ValidationError, instance: str | None = None) -> JSONResponse:
    errors = [
        {
            "loc": [str(p) for p in e["loc"]],
            "msg": e["msg"],
            "type": e["type"],
        }
        for e in exc.errors(include_url=False, include_input=False)
    ]
    detail = "; ".join(f"{'.'.join(e['loc']) or 'body'}: {e['msg']}" for e in errors)
    return problem_response(
        422, detail or "invalid input", kind="validation", instance=instance, errors=errors
    )
