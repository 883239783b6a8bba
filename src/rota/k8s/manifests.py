"""Kubernetes manifests for a rota app as plain dicts, from RenderSettings alone (no
cluster, no database): the migration Job, a worker Deployment, PodDisruptionBudget and
KEDA ScaledObject per queue group, the TriggerAuthentication, and for the metrics-api
scaler the small server KEDA asks. Every pod passes the Pod Security "restricted"
profile: non-root, read-only root file system, no capabilities, RuntimeDefault seccomp."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from rota.drivers.url import ENV_URL_FILE
from rota.k8s.keda import metrics_service_name, scaled_object, trigger_authentication
from rota.k8s.settings import RenderSettings, Scaler, UrlSource, WorkerGroup

Manifest = dict[str, Any]

HEALTH_PORT_NAME = "health"
# Where mounted Secrets appear in a pod: one folder per Secret, the URL in a file `url`.
SECRETS_DIR = "/var/run/secrets/rota"
TMP_VOLUME = "tmp"
# Mounted secret files: readable by the pod's user and group only (fsGroup is the user).
SECRET_FILE_MODE = 0o440


@dataclass(frozen=True)
class Wiring:
    """What a container needs to read a URL from a Secret: environment variables, and
    with UrlSource.FILE the Secret volume and its mount."""

    env: list[dict[str, Any]]
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)


def url_wiring(settings: RenderSettings, secret: str, key: str, volume: str) -> Wiring:
    """$ROTA_DATABASE_URL from the Secret, or the Secret mounted as a file named by
    $ROTA_DATABASE_URL_FILE (read again for every new connection: password rotation
    without a restart)."""
    if settings.database_url_from is UrlSource.ENV:
        return Wiring(env=[_env(secret, key)])
    folder = f"{SECRETS_DIR}/{volume}"
    return Wiring(
        env=[{"name": ENV_URL_FILE, "value": f"{folder}/url"}],
        volumes=[
            {
                "name": volume,
                "secret": {
                    "secretName": secret,
                    "items": [{"key": key, "path": "url"}],
                    "defaultMode": SECRET_FILE_MODE,
                },
            }
        ],
        mounts=[{"name": volume, "mountPath": folder, "readOnly": True}],
    )


def _tmp_volume() -> dict[str, Any]:
    # The root file system is read-only: /tmp is the one writable place.
    return {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}}


def _mounts(wiring: Wiring) -> list[dict[str, Any]]:
    return [{"name": TMP_VOLUME, "mountPath": "/tmp"}, *wiring.mounts]


def labels(settings: RenderSettings, component: str, group: str | None = None) -> dict[str, str]:
    found = {
        "app.kubernetes.io/name": "rota",
        "app.kubernetes.io/instance": settings.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "rota-k8s-render",
    }
    if group is not None:
        found["rota/group"] = group
    return found


def _selector(settings: RenderSettings, component: str, group: str | None) -> dict[str, str]:
    # Selectors are immutable: keep them to labels that never change for this workload.
    every = labels(settings, component, group)
    del every["app.kubernetes.io/managed-by"]
    return every


def _env(secret: str, key: str, name: str = "ROTA_DATABASE_URL") -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def database_wiring(settings: RenderSettings) -> Wiring:
    return url_wiring(
        settings, settings.database_secret, settings.database_secret_key, "database-url"
    )


def _resources(settings: RenderSettings) -> dict[str, Any]:
    # Memory limit = request (a worker that outgrows it is restarted, not the node's
    # neighbours); no CPU limit, so a busy worker is never throttled below its request.
    return {
        "requests": {"cpu": settings.cpu, "memory": settings.memory},
        "limits": {"memory": settings.memory},
    }


def _small() -> dict[str, Any]:
    """Resources of the short helpers (init container, migration, metrics server)."""
    return {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}


def container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def pod_security(settings: RenderSettings) -> dict[str, Any]:
    uid = settings.run_as_user
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _probe(path: str, port: str, *, period: int, timeout: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def deployment_name(settings: RenderSettings, group: WorkerGroup) -> str:
    return f"{settings.name}-worker-{group.slug}"


def worker_deployment(settings: RenderSettings, group: WorkerGroup) -> Manifest:
    """One worker Deployment. `replicas` is left out: KEDA owns it (an apply would
    otherwise reset it on every deploy)."""
    name = deployment_name(settings, group)
    command = [
        "rota",
        "worker",
        "--app",
        settings.app,
        "--queues",
        group.queue_spec,
        "--grace",
        f"{settings.grace:g}",
        "--health-port",
        str(settings.health_port),
        "--log-format",
        "json",
    ]
    url = database_wiring(settings)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": labels(settings, "worker", group.slug),
        },
        "spec": {
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": _selector(settings, "worker", group.slug)},
            # A new pod must be ready (schema migrated, connected) before an old one is
            # asked to drain: a rollout never lowers the number of working workers.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": labels(settings, "worker", group.slug)},
                "spec": {
                    # SIGTERM, then up to --grace for running jobs, then the margin to return
                    # the rest and flush completions; only then SIGKILL.
                    "terminationGracePeriodSeconds": settings.termination_grace,
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security(settings),
                    "initContainers": [
                        {
                            # Waits for the migration Job (never migrates itself), so a new
                            # version starts only on the schema it was built for.
                            "name": "wait-for-schema",
                            "image": settings.image,
                            "command": [
                                "rota",
                                "migrate",
                                "--check",
                                "--wait",
                                "--timeout",
                                str(settings.migrate_deadline),
                            ],
                            "env": url.env,
                            "resources": _small(),
                            "securityContext": container_security(),
                            "volumeMounts": _mounts(url),
                        }
                    ],
                    "containers": [
                        {
                            "name": "worker",
                            "image": settings.image,
                            "command": command,
                            "env": url.env,
                            "ports": [
                                {
                                    "name": HEALTH_PORT_NAME,
                                    "containerPort": settings.health_port,
                                    "protocol": "TCP",
                                }
                            ],
                            # Unready while starting, when the database is unreachable, and
                            # from the first moment of a drain.
                            "readinessProbe": _probe(
                                "/readyz", HEALTH_PORT_NAME, period=5, timeout=2, failures=2
                            ),
                            # Dead only when the event loop or the heartbeater is stuck.
                            "livenessProbe": _probe(
                                "/livez", HEALTH_PORT_NAME, period=10, timeout=5, failures=3
                            ),
                            "resources": _resources(settings),
                            "securityContext": container_security(),
                            "volumeMounts": _mounts(url),
                        }
                    ],
                    "volumes": [_tmp_volume(), *url.volumes],
                },
            },
        },
    }


def disruption_budget(settings: RenderSettings, group: WorkerGroup) -> Manifest:
    """Voluntary evictions (node drains) take one worker of the group at a time, and each
    drains within its grace period. Unready pods may always go, so a stuck worker never
    blocks a drain."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": deployment_name(settings, group),
            "namespace": settings.namespace,
            "labels": labels(settings, "worker", group.slug),
        },
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": _selector(settings, "worker", group.slug)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def migration_job(settings: RenderSettings) -> Manifest:
    """`rota migrate --app ...` (which also stores the app's schedules) as a Job named with
    the schema version it brings. A Job's pod template cannot change once created, so the
    name also carries a hash of the template: a new image or app gets a new Job."""
    job_labels = {
        **labels(settings, "migrate"),
        "rota/schema-version": str(settings.schema_version),
    }
    url = database_wiring(settings)
    template = {
        "metadata": {"labels": dict(job_labels)},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": pod_security(settings),
            "containers": [
                {
                    "name": "migrate",
                    "image": settings.image,
                    "command": ["rota", "migrate", "--app", settings.app],
                    "env": url.env,
                    "resources": _small(),
                    "securityContext": container_security(),
                    "volumeMounts": _mounts(url),
                }
            ],
            "volumes": [_tmp_volume(), *url.volumes],
        },
    }
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:6]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{settings.name}-migrate-v{settings.schema_version}-{digest}",
            "namespace": settings.namespace,
            "labels": job_labels,
        },
        "spec": {
            # Pod failures (a database briefly away); migrations are idempotent and locked.
            "backoffLimit": settings.migrate_backoff_limit,
            "activeDeadlineSeconds": settings.migrate_deadline,
            "ttlSecondsAfterFinished": settings.migrate_ttl,
            "template": template,
        },
    }


def metrics_server(settings: RenderSettings) -> list[Manifest]:
    """For the metrics-api scaler: one always-on replica of `rota k8s metrics-api` and its
    Service. It must not be a worker: at zero workers KEDA still needs an answer to scale
    from 0 to 1. It connects as the read-only role."""
    name = metrics_service_name(settings)
    port = "http"
    url = url_wiring(
        settings, settings.metrics_secret, settings.metrics_secret_key, "metrics-database-url"
    )
    deployment: Manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": labels(settings, "metrics"),
        },
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": _selector(settings, "metrics", None)},
            "template": {
                "metadata": {"labels": labels(settings, "metrics")},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security(settings),
                    "containers": [
                        {
                            "name": "metrics",
                            "image": settings.image,
                            "command": [
                                "rota",
                                "k8s",
                                "metrics-api",
                                "--port",
                                str(settings.metrics_port),
                            ],
                            "env": [
                                *url.env,
                                _env(
                                    settings.token_secret,
                                    settings.token_secret_key,
                                    name="ROTA_METRICS_TOKEN",
                                ),
                            ],
                            "ports": [
                                {
                                    "name": port,
                                    "containerPort": settings.metrics_port,
                                    "protocol": "TCP",
                                }
                            ],
                            "readinessProbe": _probe(
                                "/readyz", port, period=10, timeout=2, failures=3
                            ),
                            "livenessProbe": _probe(
                                "/livez", port, period=10, timeout=5, failures=3
                            ),
                            "resources": _small(),
                            "securityContext": container_security(),
                            "volumeMounts": _mounts(url),
                        }
                    ],
                    "volumes": [_tmp_volume(), *url.volumes],
                },
            },
        },
    }
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": labels(settings, "metrics"),
        },
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(settings, "metrics", None),
            "ports": [
                {"name": port, "port": settings.metrics_port, "targetPort": port, "protocol": "TCP"}
            ],
        },
    }
    return [deployment, service]


def dashboard_name(settings: RenderSettings) -> str:
    return f"{settings.name}-dashboard"


def dashboard_hosts(settings: RenderSettings) -> list[str]:
    """The Host names the dashboard answers to besides loopback: the Ingress's host and
    the Service's names inside the cluster (Prometheus scraping its /metrics)."""
    service = dashboard_name(settings)
    names = [
        service,
        f"{service}.{settings.namespace}.svc",
        f"{service}.{settings.namespace}.svc.cluster.local",
    ]
    return ([settings.dashboard_host] if settings.dashboard_host else []) + names


def dashboard_manifests(settings: RenderSettings) -> list[Manifest]:
    """`rota dashboard` next to the workers: a Deployment (same pod security, same way to
    the database URL), a Service, and with --dashboard-host an Ingress (TLS with
    --dashboard-tls-secret) under --dashboard-path."""
    name = dashboard_name(settings)
    port = "http"
    root = "" if settings.dashboard_path == "/" else settings.dashboard_path
    secret = settings.dashboard_database_secret or settings.database_secret
    url = url_wiring(settings, secret, settings.database_secret_key, "database-url")
    command = [
        "rota",
        "dashboard",
        "--app",
        settings.app,
        "--host",
        "0.0.0.0",
        "--port",
        str(settings.dashboard_port),
    ]
    for host in dashboard_hosts(settings):
        command += ["--allowed-host", host]
    if root:
        command += ["--root-path", root]
    if settings.dashboard_host is not None:
        # The ingress controller's pods connect from addresses that change: trust their
        # X-Forwarded-Proto. Spoofing it can only set the cookie's Secure flag, and
        # --secure-cookies sets that anyway behind TLS.
        command += ["--forwarded-allow-ips", "*"]
    if settings.dashboard_tls_secret is not None:
        command += ["--secure-cookies"]
    # The kubelet probes the pod's IP: name a Host the dashboard answers to.
    local = [{"name": "Host", "value": "localhost"}]
    readiness = _probe(f"{root}/api/health", port, period=10, timeout=3, failures=3)
    liveness = _probe(f"{root}/livez", port, period=10, timeout=5, failures=3)
    readiness["httpGet"]["httpHeaders"] = local
    liveness["httpGet"]["httpHeaders"] = list(local)
    deployment: Manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": labels(settings, "dashboard"),
        },
        "spec": {
            "replicas": settings.dashboard_replicas,
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": _selector(settings, "dashboard", None)},
            "template": {
                "metadata": {"labels": labels(settings, "dashboard")},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security(settings),
                    "initContainers": [
                        {
                            # The dashboard refuses a schema it does not know: wait for
                            # the migration Job, like the workers.
                            "name": "wait-for-schema",
                            "image": settings.image,
                            "command": [
                                "rota",
                                "migrate",
                                "--check",
                                "--wait",
                                "--timeout",
                                str(settings.migrate_deadline),
                            ],
                            "env": url.env,
                            "resources": _small(),
                            "securityContext": container_security(),
                            "volumeMounts": _mounts(url),
                        }
                    ],
                    "containers": [
                        {
                            "name": "dashboard",
                            "image": settings.image,
                            "command": command,
                            "env": url.env,
                            "ports": [
                                {
                                    "name": port,
                                    "containerPort": settings.dashboard_port,
                                    "protocol": "TCP",
                                }
                            ],
                            "readinessProbe": readiness,
                            "livenessProbe": liveness,
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "192Mi"},
                                "limits": {"memory": "256Mi"},
                            },
                            "securityContext": container_security(),
                            "volumeMounts": _mounts(url),
                        }
                    ],
                    "volumes": [_tmp_volume(), *url.volumes],
                },
            },
        },
    }
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": labels(settings, "dashboard"),
        },
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(settings, "dashboard", None),
            "ports": [{"name": port, "port": 80, "targetPort": port, "protocol": "TCP"}],
        },
    }
    found = [deployment, service]
    if settings.dashboard_host is not None:
        found.append(dashboard_ingress(settings))
    return found


def dashboard_ingress(settings: RenderSettings) -> Manifest:
    """The Ingress: TLS ends at the ingress controller; the path is passed on as it is
    (the dashboard serves under its --root-path either way)."""
    assert settings.dashboard_host is not None
    spec: dict[str, Any] = {}
    if settings.dashboard_ingress_class is not None:
        spec["ingressClassName"] = settings.dashboard_ingress_class
    if settings.dashboard_tls_secret is not None:
        spec["tls"] = [
            {"hosts": [settings.dashboard_host], "secretName": settings.dashboard_tls_secret}
        ]
    spec["rules"] = [
        {
            "host": settings.dashboard_host,
            "http": {
                "paths": [
                    {
                        "path": settings.dashboard_path,
                        "pathType": "Prefix",
                        "backend": {
                            "service": {
                                "name": dashboard_name(settings),
                                "port": {"name": "http"},
                            }
                        },
                    }
                ]
            },
        }
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": dashboard_name(settings),
            "namespace": settings.namespace,
            "labels": labels(settings, "dashboard"),
        },
        "spec": spec,
    }


def render(settings: RenderSettings) -> dict[str, list[Manifest]]:
    """The manifests by file (the layout of `--out DIR`), in the order to apply them."""
    files: dict[str, list[Manifest]] = {"migrate-job.yaml": [migration_job(settings)]}
    for group in settings.groups:
        name = deployment_name(settings, group)
        files[f"worker-{group.slug}.yaml"] = [
            worker_deployment(settings, group),
            disruption_budget(settings, group),
            scaled_object(settings, group, name, labels(settings, "worker", group.slug)),
        ]
    files["keda-auth.yaml"] = [trigger_authentication(settings, labels(settings, "autoscaling"))]
    if settings.scaler is Scaler.METRICS_API:
        files["metrics-api.yaml"] = metrics_server(settings)
    if settings.dashboard:
        files["dashboard.yaml"] = dashboard_manifests(settings)
    return files


def documents(settings: RenderSettings) -> list[Manifest]:
    """Every manifest, in apply order."""
    return [doc for docs in render(settings).values() for doc in docs]
