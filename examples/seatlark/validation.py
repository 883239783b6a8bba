"""The checkout API's door: every request body and query is checked here, before anything
touches the database, and refused with a status code and a message a client can act on.

Names and emails are checked against what they may contain (an allow-list), not against
what an attack looks like: `O'Brien` is a name, `x'); DROP TABLE orders;--` is not, and the
queries use parameters whichever passes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_BODY_BYTES = 4 * 1024
MAX_QUANTITY = 8
ORDER_FIELDS = {"ref", "customer", "email", "show", "quantity"}
SEARCH_FIELDS = {"customer", "show", "status", "limit"}
STATUSES = {"paid", "ticketed"}

_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})+")
_NAME_PUNCTUATION = frozenset(" '.-")


class Refused(Exception):
    """A request the API refuses: `status` is the HTTP status, `code` a stable name."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}


@dataclass(frozen=True)
class OrderRequest:
    ref: str
    customer: str
    email: str
    show: str
    quantity: int


@dataclass(frozen=True)
class Search:
    customer: str | None
    show: str | None
    status: str | None
    limit: int


def parse_json_object(body: bytes) -> dict[str, Any]:
    """Decode a request body that must be one JSON object."""
    if len(body) > MAX_BODY_BYTES:
        raise Refused(413, "too_large", f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "bad_encoding", "the body is not UTF-8") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise Refused(400, "malformed_json", f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise Refused(400, "malformed_json", "the body nests too deeply") from None
    except ValueError as exc:  # from the two hooks
        raise Refused(400, "malformed_json", str(exc)) from None
    if not isinstance(value, dict):
        raise Refused(422, "not_an_object", f"the body must be a JSON object, not {_kind(value)}")
    return value


def parse_order(data: Mapping[str, Any], shows: Mapping[str, Any]) -> OrderRequest:
    """Check an order's fields: all known, all present, each well-formed."""
    unknown = sorted(set(data) - ORDER_FIELDS)
    if unknown:
        raise Refused(
            422,
            "unknown_field",
            f"unknown field(s) {', '.join(map(repr, unknown))}; an order has "
            f"{', '.join(sorted(ORDER_FIELDS))}",
            unknown[0],
        )
    missing = sorted(ORDER_FIELDS - set(data))
    if missing:
        raise Refused(422, "missing_field", f"missing field(s) {', '.join(missing)}", missing[0])
    ref = _string(data, "ref", 64)
    if not _REF.fullmatch(ref):
        raise Refused(
            422,
            "invalid",
            "ref: 1-64 letters, digits, _ and -, starting with a letter or digit",
            "ref",
        )
    show = _string(data, "show", 64)
    if show not in shows:
        raise Refused(
            422, "unknown_show", f"no show {show!r} on sale; on sale: {', '.join(shows)}", "show"
        )
    quantity = data["quantity"]
    if not isinstance(quantity, int) or isinstance(quantity, bool):
        raise Refused(
            422, "invalid", f"quantity must be an integer, not {_kind(quantity)}", "quantity"
        )
    if not 1 <= quantity <= MAX_QUANTITY:
        raise Refused(
            422, "invalid", f"quantity must be from 1 to {MAX_QUANTITY}, not {quantity}", "quantity"
        )
    return OrderRequest(
        ref=ref,
        customer=check_name(_string(data, "customer", 100), "customer"),
        email=check_email(_string(data, "email", 254)),
        show=show,
        quantity=quantity,
    )


def parse_search(query: Mapping[str, str], shows: Mapping[str, Any]) -> Search:
    """Check the query string of GET /orders."""
    unknown = sorted(set(query) - SEARCH_FIELDS)
    if unknown:
        raise Refused(
            422,
            "unknown_field",
            f"unknown search field(s) {', '.join(map(repr, unknown))}; search by "
            f"{', '.join(sorted(SEARCH_FIELDS))}",
            unknown[0],
        )
    customer = query.get("customer")
    if customer is not None:
        if len(customer) > 100:
            raise Refused(422, "invalid", "customer: at most 100 characters", "customer")
        check_name(customer, "customer")
    show = query.get("show")
    if show is not None and show not in shows:
        raise Refused(422, "unknown_show", f"no show {show[:64]!r}", "show")
    status = query.get("status")
    if status is not None and status not in STATUSES:
        raise Refused(422, "invalid", f"status is one of {', '.join(sorted(STATUSES))}", "status")
    raw_limit = query.get("limit", "20")
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 100:
        raise Refused(422, "invalid", "limit must be an integer from 1 to 100", "limit")
    return Search(customer, show, status, int(raw_limit))


def check_name(value: str, field: str) -> str:
    """Letters (any script) with single spaces, apostrophes, dots and hyphens between
    them: `Léa O'Brien-Smith`, `J. R. Okafor`; not `Ada'--` nor `Robert');`."""
    if (
        not value
        or not value[0].isalpha()
        or any(not (c.isalpha() or c in _NAME_PUNCTUATION) for c in value)
        or any(pair in value for pair in ("  ", "--", "''", "..", "'-", "-'"))
        or value[-1] in "'-"
    ):
        raise Refused(
            422,
            "invalid",
            f"{field}: use letters, spaces, apostrophes, dots and hyphens, starting with a letter",
            field,
        )
    return value


def check_email(value: str) -> str:
    if not _EMAIL.fullmatch(value):
        raise Refused(422, "invalid", "email is not an address like name@example.com", "email")
    return value


def _string(data: Mapping[str, Any], field: str, limit: int) -> str:
    value = data[field]
    if not isinstance(value, str):
        raise Refused(422, "invalid", f"{field} must be a string, not {_kind(value)}", field)
    if not value or len(value) > limit:
        raise Refused(422, "invalid", f"{field} must be 1-{limit} characters", field)
    return value


def _kind(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, int | float) else "a value")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the field {key!r} appears twice")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
