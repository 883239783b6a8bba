"""Kubernetes for rota apps: manifests rendered from settings (workers scaled by KEDA,
the migration Job, disruption budgets) and the replica arithmetic behind them."""

from rota.k8s.keda import keda_query
from rota.k8s.manifests import documents, render
from rota.k8s.output import to_yaml, write_folder
from rota.k8s.scaling import ScaleHint, ScaleHintSettings, scale_hint
from rota.k8s.settings import RenderSettings, Scaler, Signal, UrlSource, WorkerGroup

__all__ = [
    "RenderSettings",
    "ScaleHint",
    "ScaleHintSettings",
    "Scaler",
    "Signal",
    "UrlSource",
    "WorkerGroup",
    "documents",
    "keda_query",
    "render",
    "scale_hint",
    "to_yaml",
    "write_folder",
]
