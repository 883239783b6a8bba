"""Operations storage, written once over the dialect seam (SQL: drivers/<dialect>/queries/
dead_letter.sql, replay.sql, queue.sql): dead letters and their governed replay with its
audit record, queue limits, poisoned partition keys and the expiry sweep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rota.drivers.base import Driver
from rota.drivers.database import Row
from rota.drivers.rows import due_in, job_from_row
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


class OpsStore:
    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def _selection(self, selection: Selection) -> dict[str, Any]:
        c = self._db.codec
        params = selection.params(c.time_param)
        if params["ids"] is not None:
            params["ids"] = c.array(params["ids"])
        return params

    def _control(self, row: Row) -> QueueControl:
        c = self._db.codec
        return QueueControl(
            name=row["name"],
            paused=c.flag(row["paused"]),
            global_limit=row["global_limit"],
            rate_limit=row["rate_limit"],
            rate_period=row["rate_period"],
            updated_at=c.time(row["updated_at"]),
        )

    def _replay(self, row: Row) -> ReplayRecord:
        c = self._db.codec
        return ReplayRecord(
            id=row["id"],
            created_at=c.instant(row["created_at"]),
            principal=row["principal"],
            reason=row["reason"],
            selection=c.json(row["selection"]),
            rate=row["rate"],
            count=row["count"],
            job_ids=tuple(c.json(row["job_ids"])),
        )

    # --- dead letters -------------------------------------------------------------------

    def dead_letter_list(
        self, selection: Selection, limit: int, before_id: int | None
    ) -> list[Job]:
        params = {**self._selection(selection), "limit": limit, "before_id": before_id}
        c = self._db.codec
        return [job_from_row(r, c) for r in self._db.query("dead_letter_list", params)]

    def dead_letter_count(self, selection: Selection, limit: int) -> tuple[dict[str, int], int]:
        rows = self._db.query("dead_letter_count", {**self._selection(selection), "limit": limit})
        matched = int(rows[0]["matched"]) if rows else 0
        return {r["task"]: int(r["n"]) for r in rows}, matched

    def dead_letter_replay(self, replay: ReplayRequest) -> tuple[int, list[tuple[int, str]]]:
        """Move the selected dead letters back to the queue (paced: spread over time), and
        record who did it, why and which jobs moved, all in one transaction."""
        with self._db.write() as session:
            inserted = session.one(
                "replay_insert",
                {
                    "principal": replay.principal,
                    "reason": replay.reason,
                    "selection": encode_selection(replay.selection),
                    "rate": replay.rate,
                },
            )
            assert inserted is not None
            replay_id = int(inserted["id"])
            params = {
                **self._selection(replay.selection),
                "limit": replay.limit,
                "rate": None if replay.rate is None else float(replay.rate),
                "attempts": replay.attempts,
                "replay_id": replay_id,
            }
            moved = sorted(
                (int(r["id"]), str(r["task"])) for r in session.all("dead_letter_replay", params)
            )
            session.all(
                "replay_finish",
                {
                    "id": replay_id,
                    "count": len(moved),
                    "job_ids": encode_ids([i for i, _ in moved]),
                },
            )
        return replay_id, moved

    def dead_letter_dismiss(self, ids: Sequence[int], principal: str, reason: str) -> list[int]:
        params = {
            "ids": self._db.codec.array(list(ids)),
            "principal": principal,
            "reason": reason,
        }
        return sorted(int(r["id"]) for r in self._db.execute("dead_letter_dismiss", params))

    def replay_list(self, limit: int, before_id: int | None) -> list[ReplayRecord]:
        rows = self._db.query("replay_list", {"limit": limit, "before_id": before_id})
        return [self._replay(r) for r in rows]

    # --- queues -------------------------------------------------------------------------

    def queue_controls(self, name: str | None = None) -> list[QueueControl]:
        return [self._control(r) for r in self._db.query("queue_controls_list", {"name": name})]

    def queue_limited(self, name: str) -> bool:
        """Whether the queue has a global or rate limit (a read without locks)."""
        return any(c.limited for c in self.queue_controls(name))

    def queue_configure(self, change: QueueChange) -> QueueControl:
        params = {
            "name": change.name,
            "global_limit": change.global_limit,
            "rate_limit": None if change.rate is None else change.rate[0],
            "rate_period": None if change.rate is None else change.rate[1],
            "set_global": change.set_global,
            "set_rate": change.set_rate,
        }
        return self._control(self._db.execute("queue_configure", params)[0])

    def queue_partitions(self, queue: str | None, limit: int) -> list[PoisonedKey]:
        c = self._db.codec
        return [
            PoisonedKey(
                queue=r["queue"],
                partition_key=r["partition_key"],
                dead_job_id=int(r["dead_job_id"]),
                dead=int(r["dead"]),
                waiting=int(r["waiting"]),
                since=c.instant(r["since"]),
            )
            for r in self._db.query("queue_partitions", {"queue": queue, "limit": limit})
        ]

    # --- the expiry sweep ---------------------------------------------------------------

    def job_expire_due(self, limit: int) -> int:
        """Dead-letter up to `limit` waiting jobs whose start deadline passed."""
        return len(self._db.execute("job_expire_due", {"limit": limit}))

    def job_next_expiry(self) -> float | None:
        """Seconds until the earliest waiting job's start deadline passes (negative when
        one has), or None when no waiting job has one."""
        return due_in(self._db, "job_next_expiry")


def encode_ids(ids: Sequence[int]) -> str:
    """Job ids as the JSON array the replay record keeps."""
    return "[" + ",".join(str(int(i)) for i in ids) + "]"
