"""Retention periods per finished state, as `rota worker --retention STATE=AGE` gives them."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from rota.errors import ConfigurationError

_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)?$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# Job states, and the finished sagas and published events the pruner also deletes.
STATES = ("completed", "cancelled", "discarded", "saga", "event")


def parse_retention(values: Iterable[str]) -> dict[str, float]:
    """`["completed=1h", "discarded=30d", "cancelled=forever"]` -> the WorkerSettings fields
    `completed_retention`, ... in seconds (`forever`: math.inf)."""
    out: dict[str, float] = {}
    for value in values:
        state, sep, age = value.partition("=")
        state, age = state.strip().lower(), age.strip().lower()
        if not sep or state not in STATES:
            raise ConfigurationError(
                f"bad retention {value!r}: use STATE=AGE with STATE one of "
                f"{', '.join(STATES)} (e.g. completed=1h, discarded=30d, event=7d, saga=forever)"
            )
        if age in ("forever", "inf", "never"):
            seconds = math.inf
        else:
            match = _AGE.match(age)
            if not match:
                raise ConfigurationError(
                    f"bad age {age!r} in retention {value!r}: use seconds or 30m, 12h, 14d, forever"
                )
            seconds = float(match[1]) * _UNITS[match[2] or "s"]
        out[f"{state}_retention"] = seconds
    return out
