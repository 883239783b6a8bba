"""JSON only: argument models built from task signatures, encoding and size limits."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from typing import Any, Protocol, get_type_hints

import pydantic
import pydantic_core

from rota.errors import ArgumentsError, PayloadError, TaskDefinitionError

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024

_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode(value: Any, *, what: str = "value", limit: int | None = None) -> str:
    """Encode `value` as compact JSON, refusing NaN, non-JSON types and oversize payloads."""
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"{what} is not JSON: {exc}") from None
    # PostgreSQL's jsonb cannot hold U+0000; refuse it on both dialects alike, at the door.
    # (The substring test is cheap; the pattern skips an escaped backslash before "u0000".)
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise PayloadError(f"{what} contains a NUL character (\\u0000), which cannot be stored")
    if limit is not None:
        # ASCII text is one byte a character; only other text needs encoding to count.
        size = len(text) if text.isascii() else len(text.encode())
        if size > limit:
            raise PayloadError(f"{what} is {size} bytes, over the {limit}-byte limit")
    return text


def decode(text: str | bytes | None) -> Any:
    return None if text is None else json.loads(text)


class ArgsModel:
    """Validates a task's keyword arguments against its signature.

    Parameters without an annotation (or annotated Any) must be JSON values;
    annotated ones are validated (and coerced) by pydantic, and a parameter may
    itself be a pydantic model. What is stored is the JSON form, and the worker
    validates it back into Python values before the call.
    """

    def __init__(self, func: Callable[..., Any], *, skip_first: bool, reserved: frozenset[str]):
        signature = inspect.signature(func)
        try:
            hints = get_type_hints(func)
        except Exception as exc:  # an annotation that does not resolve
            raise TaskDefinitionError(f"cannot read the annotations of {func!r}: {exc}") from exc
        fields: dict[str, Any] = {}
        params = list(signature.parameters.values())[1 if skip_first else 0 :]
        for param in params:
            if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
                raise TaskDefinitionError(
                    f"task parameter {param.name!r}: tasks take keyword arguments only"
                )
            if param.kind is param.VAR_KEYWORD:
                raise TaskDefinitionError(
                    f"task parameter **{param.name}: declare each argument by name"
                )
            if param.name in reserved:
                raise TaskDefinitionError(
                    f"task parameter {param.name!r} collides with an enqueue option; rename it"
                )
            annotation = hints.get(param.name, Any)
            if annotation is Any or annotation is object:
                annotation = pydantic.JsonValue
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (annotation, default)
        self.names = tuple(fields)
        config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False)
        try:
            self._model: type[pydantic.BaseModel] = pydantic.create_model(
                f"{getattr(func, '__name__', 'task')}_args", __config__=config, **fields
            )
        except (pydantic.PydanticSchemaGenerationError, TypeError) as exc:
            raise TaskDefinitionError(
                f"task {getattr(func, '__qualname__', func)!r} has a parameter type that is "
                f"not JSON-serialisable: {exc}"
            ) from exc

    def dump(self, task_name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Validate `args` and return their JSON form (what is stored)."""
        try:
            model = self._model.model_validate(args)
            return model.model_dump(mode="json")
        except pydantic.ValidationError as exc:
            raise ArgumentsError(_explain(task_name, exc, self.names)) from None
        except pydantic_core.PydanticSerializationError as exc:
            raise PayloadError(f"arguments of {task_name} are not JSON: {exc}") from None

    def load(self, task_name: str, stored: dict[str, Any]) -> dict[str, Any]:
        """Turn stored JSON arguments back into the values the function expects."""
        try:
            model = self._model.model_validate(stored)
        except pydantic.ValidationError as exc:
            raise ArgumentsError(_explain(task_name, exc, self.names)) from None
        return {name: getattr(model, name) for name in self.names}


def _explain(task_name: str, exc: pydantic.ValidationError, names: tuple[str, ...]) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "extra_forbidden":
            known = ", ".join(names) or "none"
            problems.append(f"unexpected argument {where!r} (the task takes: {known})")
        elif err["type"] == "missing":
            problems.append(f"missing argument {where!r}")
        else:
            problems.append(f"{where}: {err['msg']}")
    return f"bad arguments for task {task_name}: " + "; ".join(problems)


class ArgsSealer(Protocol):
    """Sealed arguments at rest (the encryption feature plugs one into the App): sealed
    at enqueue, opened only by the worker that runs the job."""

    def seal(self, args_json: str) -> str: ...

    def open(self, args: dict[str, Any]) -> dict[str, Any]: ...
