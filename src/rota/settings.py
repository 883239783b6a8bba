"""WorkerSettings: validated once, frozen, with defaults for production."""

from __future__ import annotations

import math
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from rota.drivers.deadlines import Deadlines, ServerDetection, server_detection
from rota.errors import ConfigurationError
from rota.labels import check_labels, check_queue_name


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def parse_queues(spec: str) -> dict[str, int]:
    """`tickets=4,reports=1` -> {"tickets": 4, "reports": 1}; a bare name gets 10."""
    queues: dict[str, int] = {}
    for raw in spec.split(","):
        part = raw.strip()
        if not part:
            continue
        name, _, count = part.partition("=")
        name = name.strip()
        check_queue_name(name, ConfigurationError)
        try:
            concurrency = int(count) if count else 10
        except ValueError:
            raise ConfigurationError(f"bad concurrency {count!r} for queue {name!r}") from None
        if name in queues:
            raise ConfigurationError(f"queue {name!r} is listed twice")
        queues[name] = concurrency
    if not queues:
        raise ConfigurationError("no queues given: use e.g. --queues tickets=4,reports=1")
    return queues


def _positive(name: str, value: float | None) -> None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ConfigurationError(f"{name} must be a positive number of seconds, not {value!r}")


@dataclass(frozen=True)
class WorkerSettings:
    queues: Mapping[str, int] = field(default_factory=lambda: {"default": 10})
    lease: float = 30.0  # seconds a job's lease lasts without a heartbeat
    heartbeat: float | None = None  # default: lease / 3
    poll_interval: float = 1.0  # fallback when no notification arrives
    # Most jobs one claim takes: a claim takes min(free slots, fetch_batch), so a worker
    # with many slots fills them in one round trip (per-claim costs spread over more jobs).
    fetch_batch: int = 1000
    grace: float = 30.0  # on SIGTERM, how long running jobs may take to finish
    worker_id: str = field(default_factory=default_worker_id)
    maintenance: bool = True  # take part in leader election and run the services
    stage_interval: float = 1.0
    rescue_interval: float = 5.0
    # Every worker checks this often for peers whose process died (their presence lock
    # is free) and rescues their jobs at once; a peer must stay gone presence_grace
    # seconds first (None: the dialect's, 1.5 s on PostgreSQL, 0 on SQLite).
    presence_interval: float = 1.0
    presence_grace: float | None = None
    # Register presence (False: behind a transaction-mode pooler, where a session-level
    # lock would outlive this process or vanish under it; rescue then waits for leases).
    presence: bool = True
    leader_ttl: float = 15.0
    prune_interval: float = 60.0
    cron_interval: float = 1.0  # leader: seconds between passes over the cron schedules
    batch_interval: float = 0.5  # leader: seconds between batch controller passes
    # Leader: seconds between workflow controller passes (each step waits up to this long).
    workflow_interval: float = 0.5
    # Leader: seconds between passes over processing windows and circuit breakers.
    hold_interval: float = 0.5
    # Seconds finished jobs are kept, per state (math.inf: keep them), pruned by the
    # leader in batches of prune_batch rows (docs/operations.md#retention).
    completed_retention: float = 24 * 3600.0
    cancelled_retention: float = 24 * 3600.0
    discarded_retention: float = 14 * 24 * 3600.0
    prune_batch: int = 1000
    inbox_retention: float = 7 * 24 * 3600.0  # how long outside message ids are remembered
    # Finished sagas (completed, compensated; failed ones wait for a person) and published
    # events (replay and publish-once keys reach back this far); math.inf keeps them.
    saga_retention: float = 30 * 24 * 3600.0
    event_retention: float = 30 * 24 * 3600.0
    threads: int | None = None  # sync-task threads; default: total concurrency
    db_threads: int = 4
    # Liveness, readiness and /metrics/keda over HTTP (off by default; 0: any free port).
    health_port: int | None = None
    health_host: str = "0.0.0.0"
    # Prometheus /metrics of this worker process (off by default; 0: any free port).
    metrics_port: int | None = None
    metrics_host: str = "0.0.0.0"
    # Resource labels this worker has (`{"gpu", "mem:large"}`): it claims jobs whose
    # `requires` are all among them, and advertises them in rota_workers (rota.routing).
    capabilities: frozenset[str] = frozenset()
    # Leave (exit status 4) once every slot is held by a sync task hung past its timeout,
    # so that a supervisor starts a fresh process: `--processes` sets it for its children.
    exit_when_hung: bool = False
    # Deadlines of database calls (docs/workers.md#deadlines-of-database-calls; default: a third of
    # the lease each): a silent peer is noticed (TCP keepalives, tcp_user_timeout), a
    # connect given up, a statement of rota's cancelled by the server, and a call left
    # unanswered cut by the worker, while two thirds of every lease are left.
    db_detect_timeout: float | None = None
    db_connect_timeout: float | None = None
    db_statement_timeout: float | None = None  # 0: no statement_timeout
    db_call_timeout: float | None = None
    # The worker stops a job this long before its lease can run out in the database,
    # counted from the last renewal it saw confirmed (default: a tenth of the lease): room
    # for the database's clock to run faster than ours and for the task to stop.
    lease_margin: float | None = None
    # Queues whose finished jobs get no INFO line each (hot queues); "*": every queue.
    # Retries and dead letters are logged at WARNING whatever this says.
    quiet_queues: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.queues:
            raise ConfigurationError("a worker needs at least one queue")
        if isinstance(self.quiet_queues, str):
            raise ConfigurationError(
                f"quiet_queues is a set of queue names, e.g. {{{self.quiet_queues!r}}}"
            )
        object.__setattr__(self, "quiet_queues", frozenset(self.quiet_queues))
        for name in self.quiet_queues:
            if name != "*":
                check_queue_name(name, ConfigurationError)
        object.__setattr__(
            self,
            "capabilities",
            frozenset(check_labels(self.capabilities, "capabilities", ConfigurationError)),
        )
        for name, concurrency in self.queues.items():
            check_queue_name(name, ConfigurationError)
            if not isinstance(concurrency, int) or not 1 <= concurrency <= 10_000:
                raise ConfigurationError(
                    f"concurrency of queue {name!r} must be 1-10000, not {concurrency!r}"
                )
        for name in (
            "lease",
            "heartbeat",
            "poll_interval",
            "stage_interval",
            "rescue_interval",
            "presence_interval",
            "leader_ttl",
            "prune_interval",
            "cron_interval",
            "batch_interval",
            "workflow_interval",
            "hold_interval",
            "db_detect_timeout",
            "db_connect_timeout",
            "db_call_timeout",
            "lease_margin",
        ):
            _positive(name, getattr(self, name))
        if self.db_statement_timeout is not None and not (
            self.db_statement_timeout >= 0 and math.isfinite(self.db_statement_timeout)
        ):
            raise ConfigurationError(
                "db_statement_timeout must be seconds >= 0 (0: none), "
                f"not {self.db_statement_timeout!r}"
            )
        if self.lease_margin is not None and self.lease_margin >= self.lease / 2:
            raise ConfigurationError(
                f"lease_margin ({self.lease_margin}s) must be under half the lease "
                f"({self.lease}s): the worker would stop its jobs before renewing them"
            )
        if self.db_call_timeout is not None and self.db_call_timeout >= self.fence_after:
            raise ConfigurationError(
                f"db_call_timeout ({self.db_call_timeout}s) must be shorter than the lease "
                f"less its margin ({self.fence_after:g}s), or a hung heartbeat could not be "
                "retried before the worker stops its jobs"
            )
        for name in (
            "completed_retention",
            "cancelled_retention",
            "discarded_retention",
            "saga_retention",
            "event_retention",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ConfigurationError(
                    f"{name} must be seconds >= 0 (math.inf keeps them), not {value!r}"
                )
        if not 1 <= self.prune_batch <= 100_000:
            raise ConfigurationError("prune_batch must be 1-100000")
        if self.presence_grace is not None and not 0 <= self.presence_grace < math.inf:
            raise ConfigurationError(
                f"presence_grace must be seconds >= 0, not {self.presence_grace!r}"
            )
        if self.grace < 0:
            raise ConfigurationError("grace must be >= 0 seconds")
        if self.heartbeat is not None and self.heartbeat >= self.lease:
            raise ConfigurationError(
                f"heartbeat ({self.heartbeat}s) must be shorter than the lease ({self.lease}s)"
            )
        if self.heartbeat is not None and self.heartbeat >= self.fence_after:
            # The lease clock stops a job fence_after seconds after its last renewal: a
            # beat that comes later would stop jobs on a healthy database.
            raise ConfigurationError(
                f"heartbeat ({self.heartbeat}s) must be shorter than the lease less its "
                f"margin ({self.fence_after:g}s = lease - lease_margin); the default, "
                "lease / 3, leaves room for a slow beat"
            )
        if not 1 <= self.fetch_batch <= 10_000:
            raise ConfigurationError("fetch_batch must be 1-10000")
        if self.health_port is not None and (
            isinstance(self.health_port, bool)
            or not isinstance(self.health_port, int)
            or not 0 <= self.health_port <= 65_535
        ):
            raise ConfigurationError(
                f"health_port must be a TCP port from 0 to 65535, not {self.health_port!r}"
            )
        if self.metrics_port is not None and (
            isinstance(self.metrics_port, bool)
            or not isinstance(self.metrics_port, int)
            or not 0 <= self.metrics_port <= 65_535
        ):
            raise ConfigurationError(
                f"metrics_port must be a TCP port from 0 to 65535, not {self.metrics_port!r}"
            )
        if (
            self.metrics_port
            and self.health_port == self.metrics_port
            and self.health_host == self.metrics_host
        ):
            raise ConfigurationError(
                f"metrics_port and health_port are both {self.metrics_port}: give each its own"
            )

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat if self.heartbeat is not None else self.lease / 3

    @property
    def margin(self) -> float:
        """Seconds before the lease can end that a job is stopped (lease_margin)."""
        return self.lease_margin if self.lease_margin is not None else self.lease / 10

    @property
    def fence_after(self) -> float:
        """Seconds after the last confirmed renewal at which a job is stopped."""
        return self.lease - self.margin

    @property
    def deadlines(self) -> Deadlines:
        return Deadlines.from_lease(
            self.lease,
            detect=self.db_detect_timeout,
            connect=self.db_connect_timeout,
            statement=self.db_statement_timeout,
            call=self.db_call_timeout,
        )

    @property
    def server_detection(self) -> ServerDetection:
        """Server-side keepalives for a session whose loss frees this worker's jobs at
        once (a presence connection): the server notices a silent worker only after the
        worker has stopped its jobs (fence_after), never before."""
        return server_detection(self.lease, self.fence_after)

    @property
    def total_concurrency(self) -> int:
        return sum(self.queues.values())
