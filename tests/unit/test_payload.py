"""JSON-only payloads and argument validation against the task's signature."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import pydantic
import pytest

from rota.errors import ArgumentsError, PayloadError, TaskDefinitionError
from rota.payload import ArgsModel, encode

RESERVED = frozenset({"key", "queue"})


def model(func: Any, skip_first: bool = False) -> ArgsModel:
    return ArgsModel(func, skip_first=skip_first, reserved=RESERVED)


def test_encode_refuses_non_json_values() -> None:
    with pytest.raises(PayloadError, match="not JSON"):
        encode({"x": {1, 2}})
    with pytest.raises(PayloadError, match="not JSON"):
        encode({"x": math.nan})
    with pytest.raises(PayloadError, match="not JSON"):
        encode({"x": object()})


def test_encode_names_a_cycle_and_writes_what_the_standard_encoder_writes() -> None:
    # encode reuses one C encoder without cycle markers: a cycle must still be named as
    # one (not as deep nesting), and the text must be the standard compact encoding.
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(PayloadError, match="not JSON: Circular reference"):
        encode({"x": cycle})
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(PayloadError, match="Circular reference"):
        encode(looped)
    standard = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for value in (
        {"n": 1, "f": 0.1, "big": 1e300, "neg": -0.0, "t": True, "none": None},
        ["é", '\n\t"\\', "😀", {"nested": [[], {}]}],
        "plain text",
        12345678901234567890,
    ):
        assert encode(value) == standard.encode(value)


def test_encode_enforces_the_size_limit_in_bytes() -> None:
    assert encode({"s": "a" * 10}, limit=100)
    with pytest.raises(PayloadError, match="over the 100-byte limit"):
        encode({"s": "ü" * 60}, limit=100)  # 60 chars, 120+ bytes


def test_typed_arguments_are_validated_and_round_trip() -> None:
    def f(order_id: int, when: datetime, note: str = "") -> None: ...

    m = model(f)
    stored = m.dump("f", {"order_id": "42", "when": "2026-03-29T02:30:00+02:00"})
    assert stored == {"order_id": 42, "when": "2026-03-29T02:30:00+02:00", "note": ""}
    loaded = m.load("f", stored)
    assert isinstance(loaded["when"], datetime) and loaded["order_id"] == 42


def test_errors_name_the_problem() -> None:
    def f(order_id: int) -> None: ...

    m = model(f)
    with pytest.raises(ArgumentsError, match="missing argument 'order_id'"):
        m.dump("f", {})
    with pytest.raises(
        ArgumentsError, match=r"unexpected argument 'orderid' \(the task takes: order_id\)"
    ):
        m.dump("f", {"orderid": 1})
    with pytest.raises(ArgumentsError, match="order_id"):
        m.dump("f", {"order_id": "forty-two"})


def test_untyped_arguments_must_be_json() -> None:
    def f(payload, items: Any = None) -> None:  # type: ignore[no-untyped-def]
        ...

    m = model(f)
    assert m.dump("f", {"payload": {"a": [1, "b", None]}}) == {
        "payload": {"a": [1, "b", None]},
        "items": None,
    }
    with pytest.raises(ArgumentsError):
        m.dump("f", {"payload": {1, 2}})
    with pytest.raises(ArgumentsError):
        m.dump("f", {"payload": object()})


class Order(pydantic.BaseModel):
    id: int
    seats: list[str]


def test_pydantic_models_as_arguments() -> None:
    def f(order: Order) -> None: ...

    m = model(f)
    stored = m.dump("f", {"order": {"id": 1, "seats": ["A1"]}})
    assert m.load("f", stored)["order"] == Order(id=1, seats=["A1"])
    with pytest.raises(ArgumentsError, match="seats"):
        m.dump("f", {"order": {"id": 1}})


def test_signatures_that_cannot_be_stored_are_refused_at_definition() -> None:
    def star(*args: int) -> None: ...

    def kw(**kwargs: int) -> None: ...

    def reserved(key: str) -> None: ...

    def positional(a: int, /) -> None: ...

    class Opaque:
        pass

    def opaque(x: Opaque) -> None: ...

    for func in (star, kw, reserved, positional, opaque):
        with pytest.raises(TaskDefinitionError):
            model(func)


def test_context_parameter_is_skipped() -> None:
    def f(ctx: object, n: int) -> None: ...

    assert model(f, skip_first=True).names == ("n",)


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_encode_refuses_lone_surrogates_and_deep_nesting_with_a_payload_error() -> None:
    with pytest.raises(PayloadError, match=r"lone surrogate \(\\ud800\)"):
        encode({"s": "a\ud800b"})
    with pytest.raises(PayloadError, match="lone surrogate"):
        encode({"\udfff": 1})
    assert encode({"s": "😀 ü"}) == '{"s":"😀 ü"}'  # a valid pair is just text
    assert encode(nested(256))
    with pytest.raises(PayloadError, match="nested too deeply: at most 256 levels"):
        encode(nested(257))
    with pytest.raises(PayloadError, match="nested too deeply"):
        encode(nested(10_000))  # past Python's own recursion limit
    # Brackets inside strings are text, not nesting.
    assert encode({"s": "[" * 5000})


def test_arguments_nested_too_deeply_are_a_payload_error() -> None:
    def f(x: Any = None) -> None: ...

    with pytest.raises(PayloadError, match="nested too deeply"):
        model(f).dump("f", {"x": nested(10_000)})
