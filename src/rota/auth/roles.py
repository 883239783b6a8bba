"""Roles and permissions. Replaying dead letters is its own permission, apart from
enqueueing and reading dead letters: a replay re-runs side effects in bulk."""

from __future__ import annotations

import enum
import getpass
import socket
from dataclasses import dataclass

from rota.errors import PermissionDeniedError


class Permission(enum.StrEnum):
    READ = "read"  # jobs, queues, schedules, batches, workflows, sagas, metrics
    DLQ_READ = "dlq_read"  # dead letters with their arguments and tracebacks
    ENQUEUE = "enqueue"  # new jobs, event publishing
    OPERATE = "operate"  # cancel, retry one job, pause/resume, trigger, suspend
    REPLAY = "replay"  # governed bulk replay of dead letters
    ADMIN = "admin"  # API tokens and settings


class Role(enum.StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    REPLAYER = "replayer"
    ADMIN = "admin"


_GRANTS: dict[Role, frozenset[Permission]] = {
    Role.VIEWER: frozenset({Permission.READ}),
    Role.OPERATOR: frozenset(
        {Permission.READ, Permission.DLQ_READ, Permission.ENQUEUE, Permission.OPERATE}
    ),
    Role.REPLAYER: frozenset({Permission.READ, Permission.DLQ_READ, Permission.REPLAY}),
    Role.ADMIN: frozenset(Permission),
}


def permissions_of(role: Role) -> frozenset[Permission]:
    return _GRANTS[role]


@dataclass(frozen=True)
class Principal:
    """Who acts: the owner of an API token, or someone with direct database access
    (the Python API and the CLI), who acts as admin and is recorded as such."""

    name: str
    role: Role
    via: str  # "token" or "direct"

    @classmethod
    def direct(cls) -> Principal:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no passwd entry (some containers)
            user = "unknown"
        return cls(name=f"{user}@{socket.gethostname()}", role=Role.ADMIN, via="direct")

    @property
    def permissions(self) -> frozenset[Permission]:
        return permissions_of(self.role)

    def can(self, permission: Permission) -> bool:
        return permission in self.permissions

    def require(self, permission: Permission) -> None:
        """Raise PermissionDeniedError unless this principal holds `permission`."""
        if permission not in self.permissions:
            raise PermissionDeniedError(
                f"{self.name} (role {self.role}) lacks the '{permission.value}' permission"
            )

    def describe(self) -> str:
        """For audit records: `token:ops-bot (replayer)` or `direct:alice@host (admin)`."""
        return f"{self.via}:{self.name} ({self.role})"
