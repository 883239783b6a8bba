"""The worker's fast paths for reading a job: `rota.payload.loads` reads what `json.loads`
reads (the same value, or the same error), and `ArgsModel.load` passes stored arguments
on without pydantic only where pydantic would return exactly them."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rota.errors import ArgumentsError
from rota.payload import ArgsModel, loads

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
WHITESPACE = st.text(alphabet=" \t\r\n", max_size=2)


def outcome(read: Any, text: str | bytes) -> tuple[str, Any]:
    try:
        return "value", read(text)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    # repr tells 1 from 1.0 and True from 1, which == does not.
    return a[0] == b[0] and repr(a[1]) == repr(b[1])


@given(JSON_VALUES, st.sampled_from([None, 0, 2]), WHITESPACE, WHITESPACE)
def test_loads_reads_any_document_as_json_loads_does(
    value: Any, indent: int | None, before: str, after: str
) -> None:
    text = before + json.dumps(value, indent=indent, ensure_ascii=False) + after
    assert same(outcome(loads, text), outcome(json.loads, text))
    for data in (text.encode(), text.encode("utf-16"), b"\xef\xbb\xbf" + text.encode()):
        assert same(outcome(loads, data), outcome(json.loads, data))


@given(st.text(max_size=30) | st.binary(max_size=30))
def test_loads_refuses_what_json_loads_refuses_with_the_same_error(text: str | bytes) -> None:
    assert same(outcome(loads, text), outcome(json.loads, text))


@pytest.mark.parametrize(
    "text",
    ['{"a": 1} x', '{"a": 1', "NaN", '"\\ud800"', "1e400", "[1,]", "\ufeff{}", "", "  "],
)
def test_loads_edge_cases(text: str) -> None:
    assert same(outcome(loads, text), outcome(json.loads, text))


def simple(a, b: str, c: bool = False, d: int = 3, e: int | None = None):  # type: ignore[no-untyped-def]
    """A task whose arguments take the fast path (and `e`, which does not)."""


def fast_only(a, b: str, c: bool = False, d: int = 3):  # type: ignore[no-untyped-def]
    """All parameters of kinds the fast path passes on."""


def reference_model(func: Any) -> type[pydantic.BaseModel]:
    """The model ArgsModel builds for `func`, built here by pydantic alone (no fast path)."""
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(func, eval_str=True).parameters.items():
        annotation = param.annotation
        if annotation is param.empty:
            annotation = pydantic.JsonValue
        fields[name] = (annotation, ... if param.default is param.empty else param.default)
    return pydantic.create_model(
        "expected", __config__=pydantic.ConfigDict(extra="forbid"), **fields
    )


def pydantic_load(func: Any, stored: dict[str, Any]) -> tuple[str, Any]:
    """What pydantic alone makes of `stored`."""
    model = reference_model(func)
    try:
        made = model.model_validate(stored)
    except pydantic.ValidationError:
        return "ArgumentsError", None
    return "value", {name: getattr(made, name) for name in model.model_fields}


def ours(read: Any, args: dict[str, Any]) -> tuple[str, Any]:
    """What ArgsModel's `read` (load or dump) makes of a copy of `args`, as pydantic_load
    and pydantic_dump say it."""
    try:
        return "value", read("t", dict(args))
    except ArgumentsError:
        return "ArgumentsError", None


STORED = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d", "e", "x"]),
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=3)
    | st.lists(st.integers(), max_size=2),
    max_size=6,
)


@settings(max_examples=300)
@given(STORED)
def test_arguments_read_without_pydantic_are_what_pydantic_returns(
    stored: dict[str, Any],
) -> None:
    for func in (simple, fast_only, floaty):
        model = ArgsModel(func, skip_first=False, reserved=frozenset())
        expected = pydantic_load(func, stored)
        got = ours(model.load, stored)
        assert got[0] == expected[0], (func.__name__, stored, got, expected)
        if got[0] == "value":
            # The same values of the same types (True is not 1, 1 is not 1.0).
            assert {k: (type(v), v) for k, v in got[1].items()} == {
                k: (type(v), v) for k, v in expected[1].items()
            }


def test_fast_path_leaves_the_stored_arguments_alone() -> None:
    model = ArgsModel(fast_only, skip_first=False, reserved=frozenset())
    stored = {"a": [1], "b": "x"}
    kwargs = model.load("t", stored)
    assert kwargs == {"a": [1], "b": "x", "c": False, "d": 3}
    kwargs["b"] = "changed"
    assert stored == {"a": [1], "b": "x"}


def floaty(a, b: float = 1.5, c=float("inf")):  # type: ignore[no-untyped-def]
    """Floats: an int where a float is taken becomes a float."""


def pydantic_dump(func: Any, args: dict[str, Any]) -> tuple[str, Any]:
    """What pydantic alone stores for `args`."""
    try:
        made = reference_model(func).model_validate(args)
    except pydantic.ValidationError:
        return "ArgumentsError", None
    return "value", made.model_dump(mode="json")


@settings(max_examples=300)
@given(STORED)
def test_arguments_stored_without_pydantic_are_what_pydantic_stores(args: dict[str, Any]) -> None:
    for func in (simple, fast_only, floaty):
        model = ArgsModel(func, skip_first=False, reserved=frozenset())
        expected = pydantic_dump(func, args)
        got = ours(model.dump, args)
        assert got[0] == expected[0], (func.__name__, args, got, expected)
        if got[0] == "value":
            # The same JSON text: values, their types and the order of the names.
            assert json.dumps(got[1]) == json.dumps(expected[1]), (func.__name__, args)
