"""The engine's rows decoded once for every dialect, through the dialect's codec."""

from __future__ import annotations

from rota.drivers.database import Codec, Row
from rota.job import Attempt, Job, JobState


def job_from_row(row: Row, codec: Codec, *, created: bool = True) -> Job:
    """A whole stored job (every column of rota_jobs) as a Job."""
    token = row["lease_token"]
    history = codec.json(row["history"])
    return Job(
        id=row["id"],
        task=row["task"],
        queue=row["queue"],
        args=codec.json(row["args"]),
        state=JobState(row["state"]),
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        run_at=codec.instant(row["run_at"]),
        created_at=codec.instant(row["created_at"]),
        attempted_at=codec.time(row["attempted_at"]),
        finished_at=codec.time(row["finished_at"]),
        key=row["key"],
        worker=row["worker"],
        lease_token=None if token is None else str(token),
        lease_expires_at=codec.time(row["lease_expires_at"]),
        cancel_requested=codec.flag(row["cancel_requested"]),
        result=codec.json(row["result"]),
        checkpoint=codec.json(row["checkpoint"]),
        meta=codec.json(row["meta"]) or {},
        progress=row["progress"],
        progress_message=row["progress_message"],
        progress_at=codec.time(row["progress_at"]),
        history=tuple(Attempt.from_entry(e, codec.json_time) for e in history) if history else (),
        created=created,
        partition_key=row["partition_key"],
        expires_at=codec.time(row["expires_at"]),
        requires=tuple(codec.json(row["requires"]) or ()),
        tenant=row["tenant"],
    )


def claimed_job(row: Row, codec: Codec) -> Job:
    """A job as a claim returns it: what the runner needs, not its history or result."""
    token = row["lease_token"]
    requires = row["requires"]
    return Job(
        id=row["id"],
        task=row["task"],
        queue=row["queue"],
        args=codec.json(row["args"]),
        state=JobState.RUNNING,
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        run_at=codec.instant(row["run_at"]),
        created_at=codec.instant(row["created_at"]),
        attempted_at=codec.time(row["attempted_at"]),
        key=row["key"],
        worker=row["worker"],
        lease_token=None if token is None else str(token),
        lease_expires_at=codec.time(row["lease_expires_at"]),
        checkpoint=codec.json(row["checkpoint"]),
        meta=codec.json(row["meta"]) or {},
        partition_key=row["partition_key"],
        expires_at=codec.time(row["expires_at"]),
        requires=() if requires is None else tuple(codec.json(requires)),
        tenant=row["tenant"],
    )
