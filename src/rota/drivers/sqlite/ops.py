"""Operations storage on SQLite: dead letters and their replay (with its audit record),
queue controls, poisoned partition keys, the expiry sweep and retention."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.job import Job
from rota.ops.model import (
    PoisonedKey,
    QueueChange,
    QueueControl,
    ReplayRecord,
    ReplayRequest,
    Selection,
    encode_selection,
)

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _params(selection: Selection) -> dict[str, Any]:
    params = selection.params(_epoch)
    if params["ids"] is not None:
        params["ids"] = json.dumps(params["ids"])
    return params


def _control(row: sqlite3.Row) -> QueueControl:
    return QueueControl(
        name=row["name"],
        paused=bool(row["paused"]),
        global_limit=row["global_limit"],
        rate_limit=row["rate_limit"],
        rate_period=row["rate_period"],
        updated_at=_ts(row["updated_at"]),
    )


def _replay(row: sqlite3.Row) -> ReplayRecord:
    return ReplayRecord(
        id=row["id"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        principal=row["principal"],
        reason=row["reason"],
        selection=json.loads(row["selection"]),
        rate=row["rate"],
        count=row["count"],
        job_ids=tuple(json.loads(row["job_ids"])),
    )


class SQLiteOpsStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    # --- dead letters -------------------------------------------------------------------

    def dead_letter_list(
        self, selection: Selection, limit: int, before_id: int | None
    ) -> list[Job]:
        from rota.drivers.sqlite.driver import job_from_row

        params = {**_params(selection), "limit": limit, "before_id": before_id}
        return [job_from_row(r) for r in self._d._read("dead_letter_list", params)]

    def dead_letter_count(self, selection: Selection, limit: int) -> tuple[dict[str, int], int]:
        rows = self._d._read("dead_letter_count", {**_params(selection), "limit": limit})
        matched = int(rows[0]["matched"]) if rows else 0
        return {r["task"]: int(r["n"]) for r in rows}, matched

    def dead_letter_replay(self, replay: ReplayRequest) -> tuple[int, list[tuple[int, str]]]:
        with self._d._write() as db:
            row = db.execute(
                _Q["replay_insert"],
                {
                    "principal": replay.principal,
                    "reason": replay.reason,
                    "selection": encode_selection(replay.selection),
                    "rate": replay.rate,
                },
            ).fetchone()
            replay_id = int(row[0])
            params = {
                **_params(replay.selection),
                "limit": replay.limit,
                "rate": None if replay.rate is None else float(replay.rate),
                "attempts": replay.attempts,
                "replay_id": replay_id,
            }
            moved = sorted(
                (int(r[0]), str(r[1])) for r in db.execute(_Q["dead_letter_replay"], params)
            )
            db.execute(
                _Q["replay_finish"],
                {
                    "id": replay_id,
                    "count": len(moved),
                    "job_ids": json.dumps([i for i, _ in moved]),
                },
            ).fetchall()
        return replay_id, moved

    def dead_letter_dismiss(self, ids: Sequence[int], principal: str, reason: str) -> list[int]:
        params = {"ids": json.dumps(list(ids)), "principal": principal, "reason": reason}
        with self._d._write() as db:
            return sorted(int(r[0]) for r in db.execute(_Q["dead_letter_dismiss"], params))

    def replay_list(self, limit: int, before_id: int | None) -> list[ReplayRecord]:
        rows = self._d._read("replay_list", {"limit": limit, "before_id": before_id})
        return [_replay(r) for r in rows]

    # --- queues -------------------------------------------------------------------------

    def queue_controls(self, name: str | None = None) -> list[QueueControl]:
        return [_control(r) for r in self._d._read("queue_controls_list", {"name": name})]

    def queue_limited(self, name: str) -> bool:
        return any(c.limited for c in self.queue_controls(name))

    def queue_limited_hint(self, name: str) -> bool:
        return name in self._d._held_back

    def queue_configure(self, change: QueueChange) -> QueueControl:
        params = {
            "name": change.name,
            "global_limit": change.global_limit,
            "rate_limit": None if change.rate is None else change.rate[0],
            "rate_period": None if change.rate is None else change.rate[1],
            "set_global": change.set_global,
            "set_rate": change.set_rate,
        }
        with self._d._write() as db:
            return _control(db.execute(_Q["queue_configure"], params).fetchone())

    def queue_partitions(self, queue: str | None, limit: int) -> list[PoisonedKey]:
        rows = self._d._read("queue_partitions", {"queue": queue, "limit": limit})
        return [
            PoisonedKey(
                queue=r["queue"],
                partition_key=r["partition_key"],
                dead_job_id=int(r["dead_job_id"]),
                dead=int(r["dead"]),
                waiting=int(r["waiting"]),
                since=_ts(r["since"]),
            )
            for r in rows
        ]

    # --- maintenance --------------------------------------------------------------------

    def job_expire_due(self, limit: int) -> int:
        with self._d._write() as db:
            return len(db.execute(_Q["job_expire_due"], {"limit": limit}).fetchall())

    def job_prune(self, state: str, age: float, limit: int) -> int:
        params = {"state": state, "age": age, "limit": limit}
        with self._d._write() as db:
            return db.execute(_Q["job_prune_finished"], params).rowcount
