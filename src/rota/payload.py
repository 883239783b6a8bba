"""JSON only: argument models built from task signatures, encoding and size limits."""

from __future__ import annotations

import functools
import inspect
import json
import json.scanner
import re
from collections.abc import Callable
from typing import Any, Protocol, get_type_hints

import pydantic
import pydantic_core

from rota.errors import ArgumentsError, PayloadError, TaskDefinitionError

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
# Levels of lists and objects in one stored value. Deeper JSON cannot be read back
# reliably (Python's json and pydantic stop near 1000 and 255 levels, whatever the stack
# holds at the time), so it is refused when it is written.
MAX_DEPTH = 256

_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _reused_encoder() -> Callable[[Any], str] | None:
    """_ENCODER's C encoder, built once: `JSONEncoder.encode` builds a new one on every
    call, most of the time of encoding a small payload (an enqueue's arguments). Built
    without the markers dict that detects a cycle (a cycle recurses until RecursionError,
    and `encode` then asks _ENCODER, which names it). None where the C encoder is
    missing or is built differently."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        chunks = make(
            None,
            _ENCODER.default,
            json.encoder.encode_basestring,
            None,
            ":",
            ",",
            False,
            False,
            False,
        )
    except TypeError:
        return None

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    probe = {"a": [1, 2.5, None, True, "\u00e9\n"], "b": {"c": -1e100}}
    return encode if encode(probe) == _ENCODER.encode(probe) else None


_REUSED = _reused_encoder()


def _json_text(value: Any) -> str:
    if _REUSED is not None:
        try:
            return _REUSED(value)
        except RecursionError:
            pass  # too deep, or a cycle: _ENCODER tells them apart
    return _ENCODER.encode(value)


# A JSON string literal, or one bracket: what the nesting scan steps over.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def encode(value: Any, *, what: str = "value", limit: int | None = None) -> str:
    """Encode `value` as compact JSON, refusing NaN, non-JSON types, text that cannot be
    stored (NUL, lone surrogates), nesting deeper than MAX_DEPTH and oversize payloads."""
    try:
        text = _json_text(value)
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"{what} is not JSON: {exc}") from None
    except RecursionError:
        raise PayloadError(_too_deep(what)) from None
    # PostgreSQL's jsonb cannot hold U+0000; refuse it on both dialects alike, at the door.
    # (The substring test is cheap; the pattern skips an escaped backslash before "u0000".)
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise PayloadError(f"{what} contains a NUL character (\\u0000), which cannot be stored")
    # ASCII text is one byte a character; other text is encoded once, which also finds a
    # lone surrogate (neither UTF-8 nor storable on either dialect).
    size = len(text)
    if not text.isascii():
        size = len(_utf8(text, what, PayloadError))
    if limit is not None and size > limit:
        raise PayloadError(f"{what} is {size} bytes, over the {limit}-byte limit")
    # Counting brackets is cheap; only a payload with that many is scanned for its depth.
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise PayloadError(_too_deep(what))
    return text


def check_text(value: str, what: str, error: type[Exception] = PayloadError) -> str:
    """Refuse text that no dialect can store the same way: a NUL character (PostgreSQL
    refuses it, SQLite keeps it) or a lone surrogate (not UTF-8 at all)."""
    if "\x00" in value:
        raise error(f"{what} contains a NUL character (\\u0000), which cannot be stored")
    if not value.isascii():
        _utf8(value, what, error)
    return value


def _utf8(text: str, what: str, error: type[Exception]) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise error(
            f"{what} contains a lone surrogate (\\u{code:04x}), which is not valid Unicode "
            "text and cannot be stored"
        ) from None


def _depth(text: str) -> int:
    deepest = depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth -= 1
    return deepest


def _too_deep(what: str) -> str:
    return f"{what} is nested too deeply: at most {MAX_DEPTH} levels of lists and objects"


def _text_scanner() -> Callable[[str, int], tuple[Any, int]]:
    """The C scanner of a default JSON decoder, called directly: `json.loads` spends most
    of the time of reading a small document (a job's arguments, its meta) on checks and
    two whitespace matches around it (1.25 -> 0.23 us for `{}`)."""
    decoder = json.JSONDecoder()
    scanner: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(decoder)  # type: ignore[arg-type]
    return scanner


_SCAN = _text_scanner()


def loads(text: str | bytes) -> Any:
    """`json.loads`, faster on the documents rota stores (UTF-8, no whitespace around
    them). Anything the scanner does not read whole goes to `json.loads`, which reads it
    (with whitespace, a byte order mark, UTF-16) or raises its usual error."""
    doc = text
    if type(doc) is bytes:  # a PostgreSQL json or jsonb value, as psycopg hands it over
        try:
            doc = doc.decode()
        except UnicodeDecodeError:
            return json.loads(text)
    if type(doc) is str:
        try:
            value, end = _SCAN(doc, 0)
        except StopIteration:
            return json.loads(text)
        if end == len(doc):
            return value
    return json.loads(text)


def decode(text: str | bytes | None) -> Any:
    return None if text is None else loads(text)


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
        self._as_stored, self._defaults, self._required = _as_stored(fields)
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
        # pydantic-core's validator and serializer, called directly: model_validate and
        # model_dump add half again to every call for options rota never passes.
        self._validate = self._model.__pydantic_validator__.validate_python
        self._to_json_values = functools.partial(
            self._model.__pydantic_serializer__.to_python, mode="json"
        )

    def dump(self, task_name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Validate `args` and return their JSON form (what is stored)."""
        kinds = self._as_stored
        if kinds is not None and self._required <= args.keys():
            # Scalars where the signature takes them are their own JSON form: a sixth of
            # the time of pydantic's round for one int.
            for name, value in args.items():
                kind = kinds.get(name, _UNKNOWN)
                if type(value) is not kind and (kind is not _ANY or type(value) not in _SCALARS):
                    break
            else:
                defaults = self._defaults
                return {name: args[name] if name in args else defaults[name] for name in self.names}
        try:
            return self._to_json_values(self._validate(args))  # type: ignore[no-any-return]
        except pydantic.ValidationError as exc:
            if any(
                err["type"] == "recursion_depth_exceeded" for err in exc.errors(include_url=False)
            ):
                # Too deep for pydantic is too deep to store: the same error as a result.
                raise PayloadError(_too_deep(f"arguments of {task_name}")) from None
            raise ArgumentsError(_explain(task_name, exc, self.names)) from None
        except pydantic_core.PydanticSerializationError as exc:
            raise PayloadError(f"arguments of {task_name} are not JSON: {exc}") from None

    def load(self, task_name: str, stored: dict[str, Any]) -> dict[str, Any]:
        """Turn stored JSON arguments back into the values the function expects."""
        kinds = self._as_stored
        if kinds is not None and self._required <= stored.keys():
            # Every value already is what pydantic would return for it: pass them on (a
            # fifth of the time of validating a model for one int). Anything else, an
            # unknown name included, goes to pydantic, which coerces or explains.
            for name, value in stored.items():
                kind = kinds.get(name, _UNKNOWN)
                if kind is not _ANY and type(value) is not kind:
                    break
            else:
                return {**self._defaults, **stored}
        try:
            model = self._validate(stored)
        except pydantic.ValidationError as exc:
            raise ArgumentsError(_explain(task_name, exc, self.names)) from None
        return {name: getattr(model, name) for name in self.names}


# The annotations whose stored JSON value, of exactly this type, is what pydantic would
# return for it; _ANY takes every JSON value as it is (a parameter without annotation).
_EXACT = frozenset({int, str, bool, float})
_ANY: Any = object()
_UNKNOWN: Any = object()
_IMMUTABLE = (int, str, bool, float, type(None))
_SCALARS = frozenset({int, str, bool, float, type(None)})  # their own JSON form


def _as_stored(
    fields: dict[str, tuple[Any, Any]],
) -> tuple[dict[str, Any] | None, dict[str, Any], frozenset[str]]:
    """For a task whose parameters are all ints, strings, booleans, floats or
    unannotated: the type each value must have to be passed on without pydantic (exactly:
    pydantic turns True into 1 for an int and 1 into 1.0 for a float), the defaults and
    the required names. (None, ...) for any other task, and for mutable defaults (pydantic
    copies them for each call): pydantic reads every call."""
    kinds: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for name, (annotation, default) in fields.items():
        if annotation is pydantic.JsonValue:
            kinds[name] = _ANY
        elif annotation in _EXACT:
            kinds[name] = annotation
        else:
            return None, {}, frozenset()
        if default is not ...:
            if not isinstance(default, _IMMUTABLE):
                return None, {}, frozenset()
            defaults[name] = default
    return kinds, defaults, frozenset(kinds.keys() - defaults.keys())


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
