"""KEDA objects for one worker group: its ScaledObject (one trigger per queue, postgresql
or metrics-api scaler) and the TriggerAuthentication the triggers use. Plain dicts."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from rota.drivers import queries
from rota.k8s.settings import RenderSettings, Scaler, Signal, WorkerGroup, slug

KEDA_API = "keda.sh/v1alpha1"
METRICS_PATH = "/metrics/keda"


def keda_query(queue: str, signal: Signal = Signal.DEMAND) -> str:
    """The SQL KEDA's postgresql scaler runs for `queue`: the driver's named query with
    the queue inlined (KEDA sends no parameters), so what rota tests is what KEDA runs."""
    template = queries.load("postgres")[f"queue_keda_{signal.value}"]
    # Queue names are letters, digits and _ . : / - only; quote anyway, by SQL's rules.
    literal = "'" + queue.replace("'", "''") + "'"
    return template.replace("%(queue)s", literal)


def _number(value: float) -> str:
    """KEDA metadata values are strings; print 20.0 as "20"."""
    return f"{value:g}"


def auth_name(settings: RenderSettings) -> str:
    return f"{settings.name}-keda-{settings.scaler.value}"


def metrics_service_name(settings: RenderSettings) -> str:
    return f"{settings.name}-metrics"


def trigger_authentication(settings: RenderSettings, labels: dict[str, str]) -> dict[str, Any]:
    """Credentials for the triggers, from Secrets: the read-only rota_metrics connection
    URL (postgresql) or the bearer token of /metrics/keda (metrics-api)."""
    if settings.scaler is Scaler.POSTGRESQL:
        ref = {
            "parameter": "connection",
            "name": settings.metrics_secret,
            "key": settings.metrics_secret_key,
        }
    else:
        ref = {
            "parameter": "token",
            "name": settings.token_secret,
            "key": settings.token_secret_key,
        }
    return {
        "apiVersion": KEDA_API,
        "kind": "TriggerAuthentication",
        "metadata": {
            "name": auth_name(settings),
            "namespace": settings.namespace,
            "labels": labels,
        },
        "spec": {"secretTargetRef": [ref]},
    }


def _trigger(settings: RenderSettings, group: WorkerGroup, queue: str) -> dict[str, Any]:
    target = _number(group.target_for(queue))
    activation = _number(group.activation)
    metadata: dict[str, str]
    if settings.scaler is Scaler.POSTGRESQL:
        metadata = {
            "query": keda_query(queue, settings.signal),
            "targetQueryValue": target,
            "activationTargetQueryValue": activation,
        }
    else:
        host = f"{metrics_service_name(settings)}.{settings.namespace}.svc.cluster.local"
        metadata = {
            "url": (
                f"http://{host}:{settings.metrics_port}{METRICS_PATH}?queue={quote(queue, safe='')}"
            ),
            "format": "json",
            "valueLocation": settings.signal.value,
            "targetValue": target,
            "activationTargetValue": activation,
            "authMode": "bearer",
        }
    return {
        "type": settings.scaler.value,
        "name": f"queue-{slug(queue)}",
        # AverageValue: replicas = ceil(signal / target). The fallback needs it too.
        "metricType": "AverageValue",
        "metadata": metadata,
        "authenticationRef": {"name": auth_name(settings)},
    }


def scaled_object(
    settings: RenderSettings, group: WorkerGroup, deployment: str, labels: dict[str, str]
) -> dict[str, Any]:
    """The ScaledObject of one worker Deployment. Every field that decides scaling is
    explicit, so the manifest reads as the policy (SEMANTICS §3.1)."""
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": deployment, "namespace": settings.namespace, "labels": labels},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "pollingInterval": settings.polling_interval,
            # Only for the last replica (1 -> 0); 1..N down is the HPA's stabilisation below.
            "cooldownPeriod": settings.cooldown_period,
            "minReplicaCount": group.min_replicas,
            "maxReplicaCount": group.max_replicas,
            # After this many scaler errors in a row (database or metrics server down), hold
            # this many replicas instead of guessing.
            "fallback": {
                "failureThreshold": settings.fallback_failures,
                "replicas": settings.fallback_for(group),
            },
            "advanced": {
                "restoreToOriginalReplicaCount": False,
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": settings.scale_down_window,
                            # Workers drain on SIGTERM; taking half at a time per minute keeps
                            # returned jobs from piling onto the few that remain.
                            "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}],
                        }
                    }
                },
            },
            "triggers": [_trigger(settings, group, queue) for queue in group.queues],
        },
    }
