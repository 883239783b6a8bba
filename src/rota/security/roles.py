"""Least-privilege PostgreSQL roles: which capability may do what on which of rota's
tables, as data. drivers/postgres/roles.py renders it to GRANT statements for the tables
that exist, so tables added by later migrations are covered by rerunning `rota db roles`."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

# Grant, RolePlan and ROLE_MARKER are storage types (the driver renders them); re-exported.
from rota.drivers.catalog import ROLE_MARKER, Grant, RolePlan, TableInfo
from rota.errors import ConfigurationError

__all__ = [
    "ADMIN_TABLES",
    "DELETE",
    "INSERT",
    "METRICS_READABLE",
    "READ",
    "REPLAY_AUDIT_TABLES",
    "REPLAY_COLUMNS",
    "ROLE_MARKER",
    "SENSITIVE_COLUMNS",
    "SESSION_TABLES",
    "UPDATE",
    "Capability",
    "Grant",
    "RolePlan",
    "TableInfo",
    "check_prefix",
    "plan",
]


class Capability(enum.StrEnum):
    ENQUEUE = "enqueue"  # producers: insert jobs (in their own transactions too)
    WORKER = "worker"  # workers: claim, run, complete, maintain, schedule
    # Read-only: jobs with their history (the dead letters) and every other rota table
    # but the API tokens. The dashboard and `rota dlq ls` run under it.
    DEADLETTERS = "deadletters"
    REPLAY = "replay"  # the dead-letter reader, plus putting jobs back in the queue
    METRICS = "metrics"  # counts and times only: never arguments, results or errors


# Columns that may carry the application's data (arguments, results, payloads, error
# messages, tracebacks, checkpoints, keys, progress text) or a secret. The metrics role
# gets every other column of every table but the administrator's, so a new column is
# readable by default and a new sensitive one must be listed here.
SENSITIVE_COLUMNS = frozenset(
    {
        "args",
        "result",
        "history",
        "checkpoint",
        "meta",
        "key",
        "lease_token",
        "progress_message",
        "digest",
        "payload",
        "data",
        "error",
        "message",
        "interim_message",
    }
)
# Exceptions the metrics role may read all the same: a schedule's stored job template,
# which `rota metrics` reads with the schedule list (for the lag); the template of an
# encrypted task is sealed.
METRICS_READABLE = frozenset({("rota_schedules", "args")})
# Tables only an administrator (the migrating owner) touches.
ADMIN_TABLES = frozenset({"rota_api_tokens", "rota_migrations"})
# The dashboard's browser sessions and login links: only the roles a dashboard runs
# under (deadletters, replay) open, end and prune them.
SESSION_TABLES = frozenset({"rota_sessions", "rota_login_links"})
# What a retry or a dead-letter replay changes: the replay role may update these columns
# of rota_jobs (those that exist) and no others.
REPLAY_COLUMNS = (
    "state",
    "run_at",
    "finished_at",
    "cancel_requested",
    "max_attempts",
    "expires_at",
    "meta",
)
# The audit trails of dead-letter replays and of bulk cancels and purges: the replay role
# (the dashboard's) records its own.
REPLAY_AUDIT_TABLES = frozenset({"rota_replays", "rota_audit"})

# Privileges that are not table privileges: granted on the schema, sequences, functions.
READ, INSERT, UPDATE, DELETE = "SELECT", "INSERT", "UPDATE", "DELETE"


_ROLE_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,40}")


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _ROLE_PREFIX.fullmatch(prefix):
        raise ConfigurationError(
            f"bad role prefix {prefix!r}: use 1-41 lowercase letters, digits and _ "
            "(roles are named PREFIX_enqueue, PREFIX_worker, ...)"
        )
    return prefix


def _grants(capability: Capability, table: TableInfo) -> list[Grant]:
    name = table.name
    if name in SESSION_TABLES:
        if capability in (Capability.DEADLETTERS, Capability.REPLAY):
            return [Grant(name, p) for p in (READ, INSERT, UPDATE, DELETE)]
        return []
    if capability is Capability.WORKER:
        if name == "rota_migrations":
            return [Grant(name, READ)]  # the worker checks the schema version
        if name in ADMIN_TABLES:
            return []
        return [Grant(name, p) for p in (READ, INSERT, UPDATE, DELETE)]
    if name == "rota_migrations":
        return [Grant(name, READ)]
    if capability is Capability.ENQUEUE:
        if name == "rota_jobs":
            # RETURNING * reads the row back; a stale idempotency key is released in
            # place (key_active), and a producer waiting for its job (app.wait) flags it
            # `awaited`: the only columns it may change.
            writable = ("key_active", "awaited") if "awaited" in table.columns else ("key_active",)
            return [Grant(name, READ), Grant(name, INSERT), Grant(name, UPDATE, writable)]
        if name == "rota_queues":
            # A job with a per-job gate (partition key, deadline, labels) marks its queue
            # gated, in the enqueue's own transaction.
            return [
                Grant(name, READ),
                Grant(name, INSERT, ("name", "paused", "gated", "updated_at")),
                Grant(name, UPDATE, ("gated", "updated_at")),
            ]
        return []
    if capability in (Capability.DEADLETTERS, Capability.REPLAY):
        if name == "rota_api_tokens":
            # The dashboard checks a bearer token by its SHA-256 digest: reading digests
            # reveals no token. It records when a token was last used; creating and
            # revoking tokens stays with the administrator.
            grants = [Grant(name, READ)]
            if "last_used_at" in table.columns:
                grants.append(Grant(name, UPDATE, ("last_used_at",)))
            return grants
        if name in ADMIN_TABLES:
            return []
        grants = [Grant(name, READ)]
        if capability is Capability.REPLAY and name == "rota_jobs":
            columns = tuple(c for c in REPLAY_COLUMNS if c in table.columns)
            grants.append(Grant(name, UPDATE, columns))
        if capability is Capability.REPLAY and name in REPLAY_AUDIT_TABLES:
            grants += [Grant(name, INSERT), Grant(name, UPDATE)]
        return grants
    # METRICS
    if name in ADMIN_TABLES:
        return []
    visible = tuple(
        c for c in table.columns if c not in SENSITIVE_COLUMNS or (name, c) in METRICS_READABLE
    )
    if not visible:
        return []
    if visible == table.columns:
        return [Grant(name, READ)]
    return [Grant(name, READ, visible)]


def plan(prefix: str, tables: Iterable[TableInfo]) -> list[RolePlan]:
    """The role of every capability, for the tables that exist now."""
    check_prefix(prefix)
    found = sorted(tables, key=lambda t: t.name)
    return [
        RolePlan(
            capability=cap,
            role=f"{prefix}_{cap.value}",
            grants=tuple(g for t in found for g in _grants(cap, t)),
            sequences=cap in (Capability.ENQUEUE, Capability.WORKER, Capability.REPLAY),
            functions=cap in (Capability.WORKER, Capability.METRICS),
        )
        for cap in Capability
    ]
