"""RenderSettings and WorkerGroup: what `rota k8s render` needs to know, validated once
(frozen), with errors that name the option to fix."""

from __future__ import annotations

import enum
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from rota.drivers import queries
from rota.errors import ConfigurationError
from rota.labels import check_queue_name

# A DNS-1123 label: what Kubernetes accepts as a name, namespace or label value.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_APP_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_IMAGE = re.compile(r"[a-z0-9][^\s]*")  # an image reference: registry/path:tag or @digest
_QUANTITY = re.compile(r"(\d+(\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?")
# A URL path prefix for the dashboard (the same rule as `rota dashboard --root-path`).
_PATH = re.compile(r"(/[A-Za-z0-9._~-]+)+")


class Scaler(enum.StrEnum):
    """Which KEDA scaler reads the signal."""

    POSTGRESQL = "postgresql"  # KEDA calls the rota_keda_* functions in the database
    METRICS_API = "metrics-api"  # KEDA calls GET /metrics/keda?queue=NAME on rota's server


class UrlSource(enum.StrEnum):
    """How a pod gets its database URL from the Secret."""

    ENV = "env"  # $ROTA_DATABASE_URL from a secretKeyRef (read once, at start)
    # The Secret mounted as a file, named by $ROTA_DATABASE_URL_FILE: rota reads it for
    # every new connection, so a rotated password needs no restart (docs/security.md).
    FILE = "file"


class Signal(enum.StrEnum):
    """What one replica's share is measured in (SEMANTICS §3.3: runnable, optionally plus
    running)."""

    DEMAND = "demand"  # runnable + running: never scales away a worker that is busy
    BACKLOG = "backlog"  # runnable only


def latest_schema_version() -> int:
    """The schema version this rota brings (both dialects share the numbering)."""
    return len(queries.migrations("postgres"))


def slug(text: str, limit: int = 40) -> str:
    """`text` as a DNS-1123 label of at most `limit` characters; a long or rewritten one
    keeps a short hash so that two different queues never share a name."""
    base = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "q"
    base = re.sub(r"-{2,}", "-", base)
    if base == text and len(base) <= limit:
        return base
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    return f"{base[: limit - 7].rstrip('-')}-{digest}"


def _label(value: str, what: str, option: str) -> None:
    if not (_LABEL.fullmatch(value) and len(value) <= 63):
        raise ConfigurationError(
            f"{what} {value!r} is not a Kubernetes name: use lower-case letters, digits and "
            f"'-' (at most 63, starting and ending with a letter or digit); set {option}"
        )


@dataclass(frozen=True)
class WorkerGroup:
    """One worker Deployment: the queues it serves (with per-replica concurrency) and how
    KEDA scales it. A ScaledObject gets one trigger per queue; the HPA takes the largest."""

    queues: Mapping[str, int]
    min_replicas: int = 0
    max_replicas: int = 10
    # Jobs per replica KEDA aims for (targetQueryValue / targetValue); default: twice the
    # queue's concurrency, so each replica has a full batch running and one waiting.
    target: float | None = None
    activation: float = 0.0  # the signal must be strictly above this to scale from 0
    name: str | None = None

    def __post_init__(self) -> None:
        if not self.queues:
            raise ConfigurationError("a worker group needs at least one queue (--queue)")
        for queue, concurrency in self.queues.items():
            check_queue_name(queue, ConfigurationError)
            if not isinstance(concurrency, int) or not 1 <= concurrency <= 10_000:
                raise ConfigurationError(
                    f"concurrency of queue {queue!r} must be 1-10000, not {concurrency!r}"
                )
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ConfigurationError(
                f"--min {self.min_replicas} and --max {self.max_replicas}: need 0 <= min <= max"
            )
        if self.max_replicas < 1:
            raise ConfigurationError("--max must be at least 1")
        if self.target is not None and not (math.isfinite(self.target) and self.target > 0):
            raise ConfigurationError(f"--target must be a positive number, not {self.target}")
        if not (math.isfinite(self.activation) and self.activation >= 0):
            raise ConfigurationError(f"--activation must be >= 0, not {self.activation}")
        if self.name is not None:
            _label(self.name, "group name", "a shorter --group-name")

    @property
    def slug(self) -> str:
        if self.name is not None:
            return self.name
        return slug("-".join(self.queues), limit=40)

    @property
    def queue_spec(self) -> str:
        """The worker's --queues value: `tickets=4,reports=1`."""
        return ",".join(f"{q}={c}" for q, c in self.queues.items())

    def target_for(self, queue: str) -> float:
        return self.target if self.target is not None else 2.0 * self.queues[queue]


@dataclass(frozen=True)
class RenderSettings:
    """Everything the manifests depend on. Rendering is a pure function of it."""

    app: str  # package.module:attribute, as for `rota worker --app`
    groups: tuple[WorkerGroup, ...]
    image: str = "your-app:latest"
    name: str = "rota"  # prefix of every object's name, and the instance label
    namespace: str = "default"
    # The workers' database URL: Secret name and key (rota never renders the Secret).
    database_secret: str = "rota-database"
    database_secret_key: str = "url"
    # What KEDA reads with: a URL for the read-only role rota_metrics (postgresql scaler,
    # and the metrics-api server), and the bearer token of /metrics/keda (metrics-api).
    metrics_secret: str = "rota-metrics-database"
    metrics_secret_key: str = "url"
    token_secret: str = "rota-metrics-token"
    token_secret_key: str = "token"
    scaler: Scaler = Scaler.POSTGRESQL
    signal: Signal = Signal.DEMAND
    grace: float = 30.0  # the worker's --grace
    grace_margin: int = 15  # on top of grace: return unfinished jobs, flush, resign
    health_port: int = 8081
    metrics_port: int = 8080  # the metrics-api server (scaler metrics-api only)
    polling_interval: int = 30
    cooldown_period: int = 300
    fallback_failures: int = 3  # failureThreshold: scaler errors in a row before fallback
    fallback_replicas: int | None = None  # default: max(1, the group's min)
    scale_down_window: int = 300  # HPA stabilisation before scaling 1..N down
    cpu: str = "250m"
    memory: str = "256Mi"
    migrate_backoff_limit: int = 3
    migrate_deadline: int = 600  # activeDeadlineSeconds of the migration Job
    migrate_ttl: int = 86_400  # ttlSecondsAfterFinished
    schema_version: int = field(default_factory=latest_schema_version)
    # Pods run as this user id (runAsNonRoot needs a number: an image whose USER is a
    # name cannot be checked by the kubelet).
    run_as_user: int = 10_001
    database_url_from: UrlSource = UrlSource.ENV
    # The dashboard (`rota dashboard`): a Deployment and a Service, and an Ingress when it
    # has a host name.
    dashboard: bool = False
    dashboard_replicas: int = 1
    dashboard_port: int = 8765
    dashboard_host: str | None = None  # the Ingress rule's host (and an allowed Host)
    dashboard_path: str = "/"  # the Ingress path and the dashboard's --root-path
    dashboard_tls_secret: str | None = None  # the Ingress's TLS certificate Secret
    dashboard_ingress_class: str | None = None
    # Default: the workers' database Secret. The dashboard checks API tokens, so its
    # role must read rota_api_tokens (the owner, or the deadletters role, read-only).
    dashboard_database_secret: str | None = None

    def __post_init__(self) -> None:
        if not _APP_PATH.fullmatch(self.app):
            raise ConfigurationError(f"--app {self.app!r}: use the form package.module:attribute")
        if not self.groups:
            raise ConfigurationError("render at least one worker group: --queue NAME")
        if not self.image or not _IMAGE.fullmatch(self.image):
            raise ConfigurationError(f"--image {self.image!r} is not an image reference")
        _label(self.name, "name", "--name")
        if len(self.name) > 30:
            raise ConfigurationError(f"--name {self.name!r}: at most 30 characters")
        _label(self.namespace, "namespace", "--namespace")
        for secret in (self.database_secret, self.metrics_secret, self.token_secret):
            _label(secret, "secret name", "the --*-secret options")
        queues = [q for g in self.groups for q in g.queues]
        duplicated = sorted({q for q in queues if queues.count(q) > 1})
        if duplicated:
            raise ConfigurationError(
                f"queue(s) {', '.join(duplicated)} appear in two groups: KEDA would scale both "
                "Deployments on the same backlog"
            )
        seen: set[str] = set()
        for group in self.groups:
            if group.slug in seen:
                raise ConfigurationError(
                    f"two worker groups would both be named {group.slug!r}: give one --group-name"
                )
            seen.add(group.slug)
        if not 0 <= self.grace <= 86_400:
            raise ConfigurationError("--grace must be 0-86400 seconds")
        if not 0 <= self.grace_margin <= 3_600:
            raise ConfigurationError("the grace margin must be 0-3600 seconds")
        for port_name in ("health_port", "metrics_port"):
            port = getattr(self, port_name)
            if not 1 <= port <= 65_535:
                raise ConfigurationError(f"{port_name} must be 1-65535, not {port}")
        for option, value in (
            ("--polling-interval", self.polling_interval),
            ("--cooldown", self.cooldown_period),
            ("--fallback-failures", self.fallback_failures),
            ("--migrate-deadline", self.migrate_deadline),
        ):
            if value < 1:
                raise ConfigurationError(f"{option} must be at least 1, not {value}")
        if self.fallback_replicas is not None and self.fallback_replicas < 0:
            raise ConfigurationError("--fallback-replicas must be >= 0")
        if not 0 <= self.scale_down_window <= 3_600:
            raise ConfigurationError("the scale-down window must be 0-3600 seconds (HPA limit)")
        if self.migrate_backoff_limit < 0 or self.migrate_ttl < 0:
            raise ConfigurationError("the migration Job's backoff limit and TTL must be >= 0")
        if not isinstance(self.run_as_user, int) or not 1 <= self.run_as_user <= 2**31 - 1:
            raise ConfigurationError(
                f"--run-as-user {self.run_as_user!r}: a user id from 1 (root, 0, is refused: "
                "pods run as non-root)"
            )
        object.__setattr__(self, "database_url_from", UrlSource(self.database_url_from))
        self._check_dashboard()
        for option, quantity in (("--cpu", self.cpu), ("--memory", self.memory)):
            if not _QUANTITY.fullmatch(quantity):
                raise ConfigurationError(
                    f"{option} {quantity!r} is not a Kubernetes quantity (e.g. 250m, 256Mi)"
                )

    def _check_dashboard(self) -> None:
        options = {
            "--dashboard-host": self.dashboard_host,
            "--dashboard-tls-secret": self.dashboard_tls_secret,
            "--dashboard-ingress-class": self.dashboard_ingress_class,
            "--dashboard-database-secret": self.dashboard_database_secret,
        }
        given = [k for k, v in options.items() if v is not None]
        if self.dashboard_path != "/":
            given.append("--dashboard-path")
        if given and not self.dashboard:
            raise ConfigurationError(f"{', '.join(given)} need --dashboard")
        if not isinstance(self.dashboard_replicas, int) or not 1 <= self.dashboard_replicas <= 20:
            raise ConfigurationError("--dashboard-replicas must be 1-20")
        if not 1 <= self.dashboard_port <= 65_535:
            raise ConfigurationError("the dashboard port must be 1-65535")
        if self.dashboard_host is not None:
            labels = self.dashboard_host.split(".")
            if len(self.dashboard_host) > 253 or not all(
                _LABEL.fullmatch(x) and len(x) <= 63 for x in labels
            ):
                raise ConfigurationError(
                    f"--dashboard-host {self.dashboard_host!r} is not a host name "
                    "(e.g. ops.example.com)"
                )
        if self.dashboard_tls_secret is not None:
            if self.dashboard_host is None:
                raise ConfigurationError("--dashboard-tls-secret needs --dashboard-host")
            _label(self.dashboard_tls_secret, "secret name", "--dashboard-tls-secret")
        if self.dashboard_ingress_class is not None:
            _label(self.dashboard_ingress_class, "ingress class", "--dashboard-ingress-class")
        if self.dashboard_database_secret is not None:
            _label(self.dashboard_database_secret, "secret name", "--dashboard-database-secret")
        path = self.dashboard_path.rstrip("/") or "/"
        if path != "/" and not _PATH.fullmatch(path):
            raise ConfigurationError(
                f"--dashboard-path {self.dashboard_path!r}: use a path such as /rota"
            )
        object.__setattr__(self, "dashboard_path", path)

    @property
    def termination_grace(self) -> int:
        """terminationGracePeriodSeconds: the worker's grace plus the margin it needs to
        return unfinished jobs and flush completions before SIGKILL."""
        return math.ceil(self.grace) + self.grace_margin

    def fallback_for(self, group: WorkerGroup) -> int:
        if self.fallback_replicas is not None:
            return min(self.fallback_replicas, group.max_replicas)
        return max(1, group.min_replicas)
