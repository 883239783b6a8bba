"""What the dashboard's store reads: search filters and the small rows behind the overview
(throughput series, workers seen, leaders). Plain frozen dataclasses, no web imports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# Jobs a search by task name or by text in the arguments looks through, newest first: an
# id or a key is found at any age through its index, the rest only this far back (#23).
# PostgreSQL's web_job_search repeats the number as a literal LIMIT, for the planner.
SEARCH_SCAN = 50_000


@dataclass(frozen=True)
class JobSearch:
    """Job search: `q` matches an id, an idempotency key, a task or (with `args`) text in
    the arguments; the other fields narrow the result (all optional). A task or text
    match, `q`'s or `text`'s, looks only through the newest `scan` jobs."""

    q: str | None = None
    id: int | None = None
    key: str | None = None
    task: str | None = None
    queue: str | None = None
    tenant: str | None = None
    states: tuple[str, ...] = ()
    text: str | None = None
    before_id: int | None = None
    limit: int = 50
    args: bool = True  # False: `q` does not look into the arguments (no dlq_read)
    scan: int = SEARCH_SCAN

    @property
    def q_id(self) -> int | None:
        """`q` as a job id when it is a number that fits a BIGINT."""
        if self.q is None or not self.q.isdigit() or len(self.q) > 18:
            return None
        return int(self.q)


@dataclass(frozen=True)
class SeriesPoint:
    """Jobs of one queue that were enqueued (`kind="enqueued"`) or finished in a state
    (`kind` = the state) within time bucket `bucket` (0 = the oldest of the window)."""

    queue: str
    kind: str
    bucket: int
    count: int


@dataclass(frozen=True)
class WorkerSeen:
    """A worker as the jobs table knows it: jobs it runs now and when it last started one."""

    worker: str
    running: int
    queues: tuple[str, ...]
    last_seen: datetime | None


@dataclass(frozen=True)
class LeaderRecord:
    name: str
    leader: str
    elected_at: datetime
    expires_at: datetime
    live: bool
