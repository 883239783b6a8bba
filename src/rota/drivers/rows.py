"""The engine's rows decoded once for every dialect, through the dialect's codec."""

from __future__ import annotations

import json
from typing import Any

from rota.drivers.base import JobInsert
from rota.drivers.database import Codec, Database, Row
from rota.errors import RotaError
from rota.job import Attempt, Job, JobState, Outcome

# A stored state's text to its JobState, without the enum's call machinery.
_STATES: dict[str, JobState] = {str(state): state for state in JobState}


def due_in(database: Database[Any], name: str) -> float | None:
    """Named query `name`'s one `due_in` value: seconds until the earliest of something
    falls due (negative when it has), or None when nothing waits for its time."""
    due = database.query(name)[0]["due_in"]
    return None if due is None else float(due)


def job_from_row(row: Row, codec: Codec, *, created: bool = True) -> Job:
    """A whole stored job (every column of rota_jobs) as a Job."""
    token = row["lease_token"]
    state = _STATES[row["state"]]
    attempted_at, finished_at = codec.time(row["attempted_at"]), codec.time(row["finished_at"])
    history = tuple(
        Attempt.from_entry(e, codec.json_time) for e in codec.json(row["history"]) or ()
    )
    if state is JobState.COMPLETED and (not history or history[-1].attempt != row["attempt"]):
        # The completed attempt had nothing more to say, so its entry was not stored
        # (COMPLETED_ENTRY in rota.drivers.base): the job's own columns hold all of it.
        implied = Attempt(
            row["attempt"], row["worker"], attempted_at, finished_at, Outcome.COMPLETED
        )
        history = (*history, implied)
    return Job.restore(
        {
            "id": row["id"],
            "task": row["task"],
            "queue": row["queue"],
            "args": codec.json(row["args"]),
            "state": state,
            "priority": row["priority"],
            "attempt": row["attempt"],
            "max_attempts": row["max_attempts"],
            "run_at": codec.instant(row["run_at"]),
            "created_at": codec.instant(row["created_at"]),
            "attempted_at": attempted_at,
            "finished_at": finished_at,
            "key": row["key"],
            "worker": row["worker"],
            "lease_token": None if token is None else str(token),
            "lease_expires_at": codec.time(row["lease_expires_at"]),
            "cancel_requested": codec.flag(row["cancel_requested"]),
            "result": codec.json(row["result"]),
            "checkpoint": codec.json(row["checkpoint"]),
            "meta": codec.json(row["meta"]) or {},
            "progress": row["progress"],
            "progress_message": row["progress_message"],
            "progress_at": codec.time(row["progress_at"]),
            "history": history,
            "created": created,
            "partition_key": row["partition_key"],
            "expires_at": codec.time(row["expires_at"]),
            "requires": tuple(codec.json(row["requires"]) or ()),
            "tenant": row["tenant"],
        }
    )


def inserted_job(row: Row, insert: JobInsert, codec: Codec) -> Job:
    """A job just inserted: what the database drew (id, state, times) and what was sent
    (the rest), so an enqueue reads back only the columns it could not know."""
    return Job.restore(
        {
            "id": row["id"],
            "task": insert.task,
            "queue": insert.queue,
            "args": json.loads(insert.args_json) if insert.args is None else insert.args,
            "state": _STATES[row["state"]],
            "priority": insert.priority,
            "attempt": 0,
            "max_attempts": insert.max_attempts,
            "run_at": codec.instant(row["run_at"]),
            "created_at": codec.instant(row["created_at"]),
            "key": insert.key,
            "meta": json.loads(insert.meta_json) if insert.meta_json else {},
            "partition_key": insert.partition_key,
            "expires_at": insert.expires_at,
            "requires": insert.requires or (),
            "tenant": insert.tenant,
        }
    )


def uniform_jobs(row: Row, inserts: list[JobInsert], codec: Codec) -> list[Job]:
    """The jobs of job_insert_many_uniform: its one row holds the ids drawn (in input
    order once sorted) and the state and times all of them share; the rest was sent."""
    ids = sorted(int(i) for i in codec.json(row["ids"]))
    if len(ids) != len(inserts):
        # Cannot happen while the ids of one insert are contiguous (see the SQL).
        raise RotaError(
            f"an insert of {len(inserts)} jobs reported {len(ids)} ids: they are stored, "
            "but cannot be matched to their arguments here"
        )
    first = inserts[0]
    shared = {
        "task": first.task,
        "queue": first.queue,
        "state": _STATES[row["state"]],
        "priority": first.priority,
        "attempt": 0,
        "max_attempts": first.max_attempts,
        "run_at": codec.instant(row["run_at"]),
        "created_at": codec.instant(row["created_at"]),
        "requires": (),
    }
    meta_json = first.meta_json
    return Job.restore_each(
        shared,
        (
            {
                "id": job_id,
                "args": json.loads(insert.args_json) if insert.args is None else insert.args,
                # A dict of its own for each job: meta is mutable.
                "meta": json.loads(meta_json) if meta_json else {},
            }
            for job_id, insert in zip(ids, inserts, strict=True)
        ),
    )


def claimed_job(row: Row, codec: Codec) -> Job:
    """A job as a claim returns it: what the runner needs, not its history or result."""
    token = row["lease_token"]
    requires = row["requires"]
    return Job.restore(
        {
            "id": row["id"],
            "task": row["task"],
            "queue": row["queue"],
            "args": codec.json(row["args"]),
            "state": JobState.RUNNING,
            "priority": row["priority"],
            "attempt": row["attempt"],
            "max_attempts": row["max_attempts"],
            "run_at": codec.instant(row["run_at"]),
            "created_at": codec.instant(row["created_at"]),
            "attempted_at": codec.time(row["attempted_at"]),
            "key": row["key"],
            "worker": row["worker"],
            "lease_token": None if token is None else str(token),
            "lease_expires_at": codec.time(row["lease_expires_at"]),
            "checkpoint": codec.json(row["checkpoint"]),
            "meta": codec.json(row["meta"]) or {},
            "partition_key": row["partition_key"],
            "expires_at": codec.time(row["expires_at"]),
            "requires": () if requires is None else tuple(codec.json(requires)),
            "tenant": row["tenant"],
        }
    )
