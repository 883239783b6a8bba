"""Values of the operations features: a dead-letter selection, queue controls, poisoned
partition keys and replay records. Pure data with validation; no storage here."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from rota.errors import ArgumentsError

MAX_IDS = 10_000
MAX_TEXT = 500


@dataclass(frozen=True)
class Selection:
    """Which dead letters: every given filter must match (an empty selection matches all,
    which a replay refuses unless `all=True`). Times bound when the job was discarded."""

    ids: tuple[int, ...] | None = None
    task: str | None = None
    queue: str | None = None
    error_type: str | None = None  # "ValueError" or "myapp.errors.Declined" (suffix match)
    text: str | None = None  # case-insensitive substring of the last error message
    since: datetime | None = None  # discarded at or after
    until: datetime | None = None  # discarded before
    partition_key: str | None = None
    all: bool = False  # an explicit "every dead letter"

    def __post_init__(self) -> None:
        if self.ids is not None:
            ids = tuple(self.ids)
            if not ids or len(ids) > MAX_IDS:
                raise ArgumentsError(f"ids must list 1 to {MAX_IDS} job ids")
            for job_id in ids:
                if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
                    raise ArgumentsError(f"job ids are positive integers, not {job_id!r}")
            object.__setattr__(self, "ids", ids)
        for name in ("task", "queue", "error_type", "text", "partition_key"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT
            ):
                raise ArgumentsError(f"{name} must be a non-empty string (at most {MAX_TEXT})")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, datetime):
                    raise ArgumentsError(f"{name} must be a datetime, not {type(value).__name__}")
                if value.tzinfo is None:
                    raise ArgumentsError(f"{name} must be timezone-aware (e.g. UTC)")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ArgumentsError("since must be earlier than until")
        if not isinstance(self.all, bool):
            raise ArgumentsError("all must be True or False")

    @classmethod
    def of(cls, value: Selection | Mapping[str, Any] | None = None, **filters: Any) -> Selection:
        """A Selection from a Selection, a dict of filters, or keyword filters."""
        if isinstance(value, Selection):
            if filters:
                raise ArgumentsError("pass a Selection or keyword filters, not both")
            return value
        merged = dict(value or {})
        merged.update({k: v for k, v in filters.items() if v is not None})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(merged) - known)
        if unknown:
            names = ", ".join(sorted(known))
            raise ArgumentsError(
                f"unknown selection filter(s) {', '.join(unknown)}; known: {names}"
            )
        if merged.get("ids") is not None:
            ids = merged["ids"]
            if isinstance(ids, int | str):
                raise ArgumentsError("ids takes a list of job ids")
            merged["ids"] = tuple(ids)
        return cls(**merged)

    @property
    def bounded(self) -> bool:
        """True when at least one filter narrows the selection."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name != "all")

    def params(self, when: Callable[[datetime | None], Any]) -> dict[str, Any]:
        """The named parameters of the dead_letter queries; `when` converts times for the
        dialect, and ids are passed as a list (PostgreSQL) by default."""
        return {
            "ids": None if self.ids is None else list(self.ids),
            "task": self.task,
            "queue": self.queue,
            "partition_key": self.partition_key,
            "error_type": self.error_type,
            "text": self.text,
            "since": when(self.since),
            "until": when(self.until),
        }

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name == "all" and not value):
                continue
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


@dataclass(frozen=True)
class QueueControl:
    """A queue's stored controls. None means unlimited."""

    name: str
    paused: bool = False
    global_limit: int | None = None  # jobs running at once across all workers
    rate_limit: int | None = None  # jobs started ...
    rate_period: float | None = None  # ... per this many seconds, across all workers
    updated_at: datetime | None = None

    @property
    def limited(self) -> bool:
        return self.global_limit is not None or self.rate_limit is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "paused": self.paused,
            "global_limit": self.global_limit,
            "rate": None
            if self.rate_limit is None
            else {"limit": self.rate_limit, "period_s": self.rate_period},
            "updated_at": None if self.updated_at is None else self.updated_at.isoformat(),
        }


def check_global_limit(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise ArgumentsError(
            f"global_limit must be an integer from 1 to 1000000 or None, not {value!r}"
        )
    return value


def check_rate(value: object) -> tuple[int, float] | None:
    """(jobs, seconds) or None; e.g. (100, 60) is 100 jobs per minute."""
    if value is None:
        return None
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise ArgumentsError(
            f"rate must be (jobs, seconds), e.g. (100, 60), or None; not {value!r}"
        )
    jobs, period = value
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= 1_000_000:
        raise ArgumentsError(f"rate jobs must be an integer from 1 to 1000000, not {jobs!r}")
    if (
        isinstance(period, bool)
        or not isinstance(period, int | float)
        or not math.isfinite(period)
        or not 0.1 <= period <= 30 * 24 * 3600
    ):
        raise ArgumentsError(f"rate period must be from 0.1 seconds to 30 days, not {period!r}")
    return jobs, float(period)


@dataclass(frozen=True)
class PoisonedKey:
    """A partition key held up by a dead letter: later jobs of the key wait for it."""

    queue: str
    partition_key: str
    dead_job_id: int  # the oldest dead letter of the key (replay or dismiss it)
    dead: int  # dead letters of the key
    waiting: int  # jobs of the key waiting behind them
    since: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "partition_key": self.partition_key,
            "dead_job_id": self.dead_job_id,
            "dead": self.dead,
            "waiting": self.waiting,
            "since": None if self.since is None else self.since.isoformat(),
        }


@dataclass(frozen=True)
class ReplayRecord:
    """The audit record of one replay."""

    id: int
    created_at: datetime
    principal: str  # Principal.describe(): "direct:alice@host (admin)"
    reason: str
    selection: dict[str, Any]
    rate: float | None
    count: int
    job_ids: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at.isoformat(),
            "principal": self.principal,
            "reason": self.reason,
            "selection": self.selection,
            "rate": self.rate,
            "count": self.count,
            "job_ids": list(self.job_ids),
        }


@dataclass(frozen=True)
class ReplayReport:
    """What a replay did (or, for a dry run, would do)."""

    dry_run: bool
    count: int  # dead letters replayed (or that would be)
    per_task: dict[str, int]
    matched: int  # dead letters matching the selection (count is at most `limit` of them)
    principal: str
    replay_id: int | None = None  # the audit record; None for a dry run
    job_ids: tuple[int, ...] = field(default=())
    rate: float | None = None

    @property
    def seconds(self) -> float:
        """How long the paced replay takes to release its last job."""
        if self.rate is None or self.count <= 1:
            return 0.0
        return (self.count - 1) / self.rate

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "replay_id": self.replay_id,
            "count": self.count,
            "matched": self.matched,
            "per_task": self.per_task,
            "principal": self.principal,
            "rate": self.rate,
            "seconds": self.seconds,
            "job_ids": list(self.job_ids),
        }


def encode_selection(selection: Selection) -> str:
    return json.dumps(selection.to_json(), sort_keys=True)


@dataclass(frozen=True)
class QueueChange:
    """A change to a queue's limits: only the limits flagged `set_*` change."""

    name: str
    global_limit: int | None = None
    rate: tuple[int, float] | None = None
    set_global: bool = False
    set_rate: bool = False


@dataclass(frozen=True)
class ReplayRequest:
    """One replay as the store performs it, in one transaction with its audit record."""

    selection: Selection
    limit: int  # at most this many dead letters (the oldest first)
    rate: float | None  # jobs per second; None: all at once
    attempts: int  # attempts each replayed job gets
    principal: str
    reason: str
