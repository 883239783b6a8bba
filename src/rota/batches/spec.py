"""A batch's definition as Kubernetes Job fields under rota names (SEMANTICS §2):
completion mode, parallelism, backoff limits, failure and success rules, deadline, TTL;
validated once, before anything is written, and stored as JSON on the batch row."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rota.errors import BatchError

# Kubernetes' own bounds (SEMANTICS §2.1, §2.3).
MAX_COMPLETIONS = 100_000
MAX_RULES = 20
# backoffLimit when only backoffLimitPerIndex is set: "no global limit".
UNLIMITED = 2_147_483_647
MAX_NAME_LENGTH = 200


class Action(enum.StrEnum):
    """What a failure rule does with a failed attempt (Kubernetes podFailurePolicy)."""

    FAIL_BATCH = "fail_batch"  # FailJob
    FAIL_INDEX = "fail_index"  # FailIndex
    IGNORE = "ignore"  # Ignore
    COUNT = "count"  # Count

    @classmethod
    def parse(cls, value: object) -> Action:
        if isinstance(value, Action):
            return value
        text = str(value)
        k8s = {"FailJob": cls.FAIL_BATCH, "FailIndex": cls.FAIL_INDEX, "Ignore": cls.IGNORE}
        if text in k8s:
            return k8s[text]
        if text == "Count":
            return cls.COUNT
        try:
            return cls(text)
        except ValueError:
            known = ", ".join(a.value for a in cls)
            raise BatchError(
                f"unknown failure action {value!r}; use one of {known} "
                "(or the Kubernetes names FailJob, FailIndex, Ignore, Count)"
            ) from None


# Attempt conditions (SEMANTICS vocabulary): a lost or shut-down worker.
CONDITIONS = frozenset({"DisruptionTarget", "WorkerLost", "WorkerShutdown"})


def _type_name(value: object) -> str:
    if isinstance(value, str):
        if not value:
            raise BatchError("an exception name in a failure rule must not be empty")
        return value
    if isinstance(value, type) and issubclass(value, BaseException):
        # The same spelling the worker stores as an attempt's error_type.
        return f"{value.__module__}.{value.__qualname__}".removeprefix("builtins.")
    raise BatchError(f"failure rules match exception classes (or their names), not {value!r}")


@dataclass(frozen=True)
class FailureRule:
    """Match a failed attempt by exception type (subclasses included) or by attempt
    condition, and apply `action`: `FailureRule("fail_batch", on=[ValueError])`."""

    action: Action
    exceptions: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()

    def __init__(
        self,
        action: Action | str,
        on: Iterable[type[BaseException] | str] | type[BaseException] | str = (),
        *,
        conditions: Iterable[str] = (),
    ) -> None:
        items = [on] if isinstance(on, str | type) else list(on)
        names = tuple(_type_name(e) for e in items)
        conds = tuple(conditions) if not isinstance(conditions, str) else (conditions,)
        for cond in conds:
            if cond not in CONDITIONS:
                raise BatchError(
                    f"unknown attempt condition {cond!r}; known: {', '.join(sorted(CONDITIONS))}"
                )
        if bool(names) == bool(conds):
            raise BatchError(
                "a failure rule matches exceptions (on=[...]) or conditions (conditions=[...]): "
                "give exactly one of them"
            )
        object.__setattr__(self, "action", Action.parse(action))
        object.__setattr__(self, "exceptions", names)
        object.__setattr__(self, "conditions", conds)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": str(self.action),
            "exceptions": list(self.exceptions),
            "conditions": list(self.conditions),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FailureRule:
        return cls(
            data["action"], data.get("exceptions") or (), conditions=data.get("conditions") or ()
        )


@dataclass(frozen=True)
class SuccessRule:
    """Kubernetes successPolicy rule (Indexed only): the batch succeeds once all of
    `succeeded_indexes` succeeded, or `succeeded_count` indexes (of those, if both)."""

    succeeded_indexes: str | None = None
    succeeded_count: int | None = None

    def __post_init__(self) -> None:
        if self.succeeded_indexes is None and self.succeeded_count is None:
            raise BatchError("a success rule needs succeeded_indexes=, succeeded_count= or both")
        if self.succeeded_indexes is not None:
            parse_indexes(self.succeeded_indexes)
        if self.succeeded_count is not None and (
            not isinstance(self.succeeded_count, int)
            or isinstance(self.succeeded_count, bool)
            or self.succeeded_count < 1
        ):
            raise BatchError(
                f"succeeded_count must be an integer >= 1, not {self.succeeded_count!r}"
            )

    def indexes(self) -> frozenset[int] | None:
        return None if self.succeeded_indexes is None else parse_indexes(self.succeeded_indexes)

    def met(self, succeeded: frozenset[int] | set[int]) -> bool:
        wanted = self.indexes()
        if wanted is None:
            return len(succeeded) >= (self.succeeded_count or 0)
        hits = len(wanted & succeeded)
        if self.succeeded_count is None:
            return hits == len(wanted)
        return hits >= self.succeeded_count

    def to_json(self) -> dict[str, Any]:
        return {
            "succeeded_indexes": self.succeeded_indexes,
            "succeeded_count": self.succeeded_count,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SuccessRule:
        return cls(data.get("succeeded_indexes"), data.get("succeeded_count"))


_INTERVAL = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_indexes(text: str) -> frozenset[int]:
    """ "1,3-5,7" -> {1, 3, 4, 5, 7} (the Kubernetes interval form)."""
    if not isinstance(text, str) or not text.strip():
        raise BatchError(f"indexes must be a string such as '0,2-3', not {text!r}")
    found: set[int] = set()
    for part in text.split(","):
        match = _INTERVAL.fullmatch(part)
        if not match:
            raise BatchError(f"bad index interval {part!r} in {text!r}: use e.g. '0,2-3'")
        low = int(match[1])
        high = int(match[2]) if match[2] is not None else low
        if high < low:
            raise BatchError(f"bad index interval {part.strip()!r}: the end is before the start")
        if high >= MAX_COMPLETIONS:
            raise BatchError(f"index {high} is out of range (at most {MAX_COMPLETIONS - 1})")
        found.update(range(low, high + 1))
    return frozenset(found)


def format_indexes(indexes: Iterable[int]) -> str:
    """{1, 3, 4, 5, 7} -> "1,3-5,7"; empty -> ""."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _count(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise BatchError(f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value


def _seconds(name: str, value: object, *, zero: bool = False) -> float | None:
    if value is None:
        return None
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
    ):
        bound = ">= 0" if zero else "> 0"
        raise BatchError(f"{name} must be a finite number of seconds {bound}, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class BatchSpec:
    """The Job spec. `completions` is the number of indexes (items); NonIndexed batches
    created from items run one job per item."""

    completions: int
    indexed: bool = False
    parallelism: int = 1
    backoff_limit: int | None = None  # None: 6, or unlimited when per-index limits are set
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    failure_rules: tuple[FailureRule, ...] = ()
    success_rules: tuple[SuccessRule, ...] = ()
    active_deadline: float | None = None
    ttl_after_finished: float | None = None
    backoff_delay: float = 10.0  # first back-off delay; doubles per failure (SEMANTICS §2.4)
    backoff_cap: float = 360.0

    def __post_init__(self) -> None:
        _count("completions", self.completions, 0, MAX_COMPLETIONS)
        _count("parallelism", self.parallelism, 0, MAX_COMPLETIONS)
        if self.backoff_limit is not None:
            _count("backoff_limit", self.backoff_limit, 0, UNLIMITED)
        if self.backoff_limit_per_index is not None:
            if not self.indexed:
                raise BatchError(
                    "backoff_limit_per_index needs indexed=True (Kubernetes: Indexed only)"
                )
            _count("backoff_limit_per_index", self.backoff_limit_per_index, 0, UNLIMITED)
        if self.max_failed_indexes is not None:
            if self.backoff_limit_per_index is None:
                raise BatchError("max_failed_indexes needs backoff_limit_per_index")
            _count("max_failed_indexes", self.max_failed_indexes, 0, self.completions)
        if len(self.failure_rules) > MAX_RULES:
            raise BatchError(f"at most {MAX_RULES} failure rules")
        for rule in self.failure_rules:
            if not isinstance(rule, FailureRule):
                raise BatchError(f"failure_rules takes rota.FailureRule values, not {rule!r}")
            if rule.action is Action.FAIL_INDEX and self.backoff_limit_per_index is None:
                raise BatchError("a fail_index rule needs backoff_limit_per_index")
        if self.success_rules:
            if not self.indexed:
                raise BatchError("success_policy needs indexed=True (Kubernetes: Indexed only)")
            if len(self.success_rules) > MAX_RULES:
                raise BatchError(f"at most {MAX_RULES} success rules")
            for srule in self.success_rules:
                if not isinstance(srule, SuccessRule):
                    raise BatchError(f"success_policy takes rota.SuccessRule values, not {srule!r}")
                wanted = srule.indexes()
                if wanted and max(wanted) >= self.completions:
                    raise BatchError(
                        f"success rule indexes {srule.succeeded_indexes!r} go past the last "
                        f"index {self.completions - 1}"
                    )
                limit = len(wanted) if wanted is not None else self.completions
                if srule.succeeded_count is not None and srule.succeeded_count > limit:
                    raise BatchError(
                        f"succeeded_count {srule.succeeded_count} is more than the {limit} "
                        "indexes it counts"
                    )
        _seconds("active_deadline", self.active_deadline)
        _seconds("ttl_after_finished", self.ttl_after_finished, zero=True)
        _seconds("backoff_delay", self.backoff_delay, zero=True)
        _seconds("backoff_cap", self.backoff_cap, zero=True)

    @property
    def effective_backoff_limit(self) -> int:
        if self.backoff_limit is not None:
            return self.backoff_limit
        return UNLIMITED if self.backoff_limit_per_index is not None else 6

    def delay(self, failures: int) -> float:
        """Kubernetes' back-off before the next attempt after `failures` (n) failures:
        min(base * 2^(n-1), cap); no delay when n = 0."""
        if failures <= 0 or self.backoff_delay == 0:
            return 0.0
        return min(self.backoff_delay * 2.0 ** min(failures - 1, 60), self.backoff_cap)

    def to_json(self) -> dict[str, Any]:
        return {
            "completions": self.completions,
            "indexed": self.indexed,
            "parallelism": self.parallelism,
            "backoff_limit": self.backoff_limit,
            "backoff_limit_per_index": self.backoff_limit_per_index,
            "max_failed_indexes": self.max_failed_indexes,
            "failure_rules": [r.to_json() for r in self.failure_rules],
            "success_rules": [r.to_json() for r in self.success_rules],
            "active_deadline": self.active_deadline,
            "ttl_after_finished": self.ttl_after_finished,
            "backoff_delay": self.backoff_delay,
            "backoff_cap": self.backoff_cap,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, parallelism: int | None = None) -> BatchSpec:
        return cls(
            completions=data["completions"],
            indexed=data["indexed"],
            parallelism=data["parallelism"] if parallelism is None else parallelism,
            backoff_limit=data.get("backoff_limit"),
            backoff_limit_per_index=data.get("backoff_limit_per_index"),
            max_failed_indexes=data.get("max_failed_indexes"),
            failure_rules=tuple(FailureRule.from_json(r) for r in data.get("failure_rules", ())),
            success_rules=tuple(SuccessRule.from_json(r) for r in data.get("success_rules", ())),
            active_deadline=data.get("active_deadline"),
            ttl_after_finished=data.get("ttl_after_finished"),
            backoff_delay=data.get("backoff_delay", 10.0),
            backoff_cap=data.get("backoff_cap", 360.0),
        )


def check_name(name: object) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise BatchError(
            f"a batch name must be a non-empty string of at most {MAX_NAME_LENGTH} chars"
        )
    if name.isdigit():
        raise BatchError(f"a batch name cannot be all digits ({name!r} reads as a batch id)")
    return name


def as_tuple(values: Sequence[Any] | None, what: str) -> tuple[Any, ...]:
    if values is None:
        return ()
    if isinstance(values, str | bytes | dict | FailureRule | SuccessRule):
        raise BatchError(f"{what} takes a list (e.g. [{values!r}]), not {type(values).__name__}")
    try:
        return tuple(values)
    except TypeError:
        raise BatchError(f"{what} takes a list, not {type(values).__name__}") from None
