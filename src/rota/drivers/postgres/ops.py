"""Operations storage on PostgreSQL: dead letters and their replay (with its audit
record), queue controls, poisoned partition keys, the expiry sweep and retention."""

from __future__ import annotations

import json
from collections.abc import Sequence
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
    from rota.drivers.postgres.driver import PostgresDriver

_Q = queries.load("postgres")


def _control(row: dict[str, Any]) -> QueueControl:
    return QueueControl(
        name=row["name"],
        paused=bool(row["paused"]),
        global_limit=row["global_limit"],
        rate_limit=row["rate_limit"],
        rate_period=row["rate_period"],
        updated_at=row["updated_at"],
    )


def _replay(row: dict[str, Any]) -> ReplayRecord:
    return ReplayRecord(
        id=row["id"],
        created_at=row["created_at"],
        principal=row["principal"],
        reason=row["reason"],
        selection=row["selection"],
        rate=row["rate"],
        count=row["count"],
        job_ids=tuple(row["job_ids"]),
    )


class PostgresOpsStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    # --- dead letters -------------------------------------------------------------------

    def dead_letter_list(
        self, selection: Selection, limit: int, before_id: int | None
    ) -> list[Job]:
        from rota.drivers.postgres.driver import job_from_row

        params = {**selection.params(lambda t: t), "limit": limit, "before_id": before_id}
        return [job_from_row(r) for r in self._d._rows("dead_letter_list", params)]

    def dead_letter_count(self, selection: Selection, limit: int) -> tuple[dict[str, int], int]:
        params = {**selection.params(lambda t: t), "limit": limit}
        rows = self._d._rows("dead_letter_count", params)
        matched = int(rows[0]["matched"]) if rows else 0
        return {r["task"]: int(r["n"]) for r in rows}, matched

    def dead_letter_replay(self, replay: ReplayRequest) -> tuple[int, list[tuple[int, str]]]:
        with self._d._tx() as cur:
            cur.execute(
                _Q["replay_insert"],
                {
                    "principal": replay.principal,
                    "reason": replay.reason,
                    "selection": encode_selection(replay.selection),
                    "rate": replay.rate,
                },
            )
            row = cur.fetchone()
            assert row is not None
            replay_id = int(row["id"])
            params = {
                **replay.selection.params(lambda t: t),
                "limit": replay.limit,
                "rate": replay.rate,
                "attempts": replay.attempts,
                "replay_id": replay_id,
            }
            cur.execute(_Q["dead_letter_replay"], params)
            moved = [(int(r["id"]), str(r["task"])) for r in cur.fetchall()]
            cur.execute(
                _Q["replay_finish"],
                {
                    "id": replay_id,
                    "count": len(moved),
                    "job_ids": json.dumps([i for i, _ in moved]),
                },
            )
        return replay_id, moved

    def dead_letter_dismiss(self, ids: Sequence[int], principal: str, reason: str) -> list[int]:
        params = {"ids": list(ids), "principal": principal, "reason": reason}
        return sorted(int(r["id"]) for r in self._d._rows("dead_letter_dismiss", params))

    def replay_list(self, limit: int, before_id: int | None) -> list[ReplayRecord]:
        rows = self._d._rows("replay_list", {"limit": limit, "before_id": before_id})
        return [_replay(r) for r in rows]

    # --- queues -------------------------------------------------------------------------

    def queue_controls(self, name: str | None = None) -> list[QueueControl]:
        return [_control(r) for r in self._d._rows("queue_controls_list", {"name": name})]

    def queue_limited(self, name: str) -> bool:
        """Whether the queue has a global or rate limit (a read without locks)."""
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
        return _control(self._d._rows("queue_configure", params)[0])

    def queue_partitions(self, queue: str | None, limit: int) -> list[PoisonedKey]:
        rows = self._d._rows("queue_partitions", {"queue": queue, "limit": limit})
        return [
            PoisonedKey(
                queue=r["queue"],
                partition_key=r["partition_key"],
                dead_job_id=int(r["dead_job_id"]),
                dead=int(r["dead"]),
                waiting=int(r["waiting"]),
                since=r["since"],
            )
            for r in rows
        ]

    # --- maintenance --------------------------------------------------------------------

    def job_expire_due(self, limit: int) -> int:
        return len(self._d._rows("job_expire_due", {"limit": limit}))

    def job_prune(self, state: str, age: float, limit: int) -> int:
        with self._d._tx(single=True) as cur:
            cur.execute(_Q["job_prune_finished"], {"state": state, "age": age, "limit": limit})
            return cur.rowcount
