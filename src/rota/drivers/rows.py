"""The engine's rows decoded once for every dialect, through the dialect's codec."""

from __future__ import annotations

import json
from collections.abc import Sequence
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


# The columns of a claimed job, in the order claimed_jobs reads them.
_CLAIMED = (
    "id",
    "task",
    "queue",
    "args",
    "priority",
    "attempt",
    "max_attempts",
    "run_at",
    "created_at",
    "attempted_at",
    "key",
    "worker",
    "lease_token",
    "lease_expires_at",
    "checkpoint",
    "meta",
    "partition_key",
    "expires_at",
    "requires",
    "tenant",
)


def claimed_jobs(rows: Sequence[Row], codec: Codec) -> list[Job]:
    """The jobs one claim statement returned (so one column order for all its rows): what
    the runner needs, not their history or result. The key that reads each column is
    found once for the batch (SQLite: its position, as a lookup by name on an sqlite3.Row
    compares names), and the dialect's batch decoder decodes each distinct time once on
    SQLite. SQLite 7.0 -> 4.5 us a job in a loop over 400 claimed rows."""
    if not rows:
        return []
    where = codec.positions(rows[0])
    (
        p_id,
        p_task,
        p_queue,
        p_args,
        p_priority,
        p_attempt,
        p_max_attempts,
        p_run_at,
        p_created_at,
        p_attempted_at,
        p_key,
        p_worker,
        p_token,
        p_lease,
        p_checkpoint,
        p_meta,
        p_partition_key,
        p_expires_at,
        p_requires,
        p_tenant,
    ) = (where[name] for name in _CLAIMED)
    time = codec.time_decoder()
    jobs = []
    for v in rows:
        token = v[p_token]
        requires = v[p_requires]
        jobs.append(
            Job.restore(
                {
                    "id": v[p_id],
                    "task": v[p_task],
                    "queue": v[p_queue],
                    "args": codec.json(v[p_args]),
                    "state": JobState.RUNNING,
                    "priority": v[p_priority],
                    "attempt": v[p_attempt],
                    "max_attempts": v[p_max_attempts],
                    "run_at": time(v[p_run_at]),
                    "created_at": time(v[p_created_at]),
                    "attempted_at": time(v[p_attempted_at]),
                    "key": v[p_key],
                    "worker": v[p_worker],
                    "lease_token": None if token is None else str(token),
                    "lease_expires_at": time(v[p_lease]),
                    "checkpoint": codec.json(v[p_checkpoint]),
                    "meta": codec.json(v[p_meta]) or {},
                    "partition_key": v[p_partition_key],
                    "expires_at": time(v[p_expires_at]),
                    "requires": () if requires is None else tuple(codec.json(requires)),
                    "tenant": v[p_tenant],
                }
            )
        )
    return jobs
