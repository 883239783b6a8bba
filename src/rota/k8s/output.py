"""Manifests as YAML: one multi-document stream (`kubectl apply -f -`), or a folder with a
kustomization.yaml (`kubectl apply -k DIR`), with no Helm and no templating left to do."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from rota.k8s.manifests import Manifest, render
from rota.k8s.settings import RenderSettings


class _Dumper(yaml.SafeDumper):
    """Block style, keys in the order built, long strings (SQL) kept on one line."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent list items under their key, as kubectl and most style guides do.
        super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        return True  # no &anchors: every manifest reads on its own


def _dump(docs: Sequence[Any]) -> str:
    return yaml.dump_all(
        docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=10_000
    )


def header(settings: RenderSettings) -> str:
    return (
        f"# Rendered by `rota k8s render` for {settings.app} "
        f"(rota schema version {settings.schema_version}). Render again, do not edit.\n"
    )


def to_yaml(settings: RenderSettings) -> str:
    """Every manifest as one YAML stream, in apply order."""
    docs: list[Manifest] = [doc for docs in render(settings).values() for doc in docs]
    return header(settings) + _dump(docs)


def kustomization(settings: RenderSettings, files: Sequence[str]) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": settings.namespace,
        "resources": list(files),
    }


def write_folder(settings: RenderSettings, folder: Path) -> list[Path]:
    """Write one file per workload and a kustomization.yaml listing them; returns the
    paths written (existing files of the same names are replaced)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = render(settings)
    written = []
    for name, docs in files.items():
        path = folder / name
        path.write_text(header(settings) + _dump(docs), encoding="utf-8")
        written.append(path)
    path = folder / "kustomization.yaml"
    path.write_text(header(settings) + _dump([kustomization(settings, list(files))]))
    written.append(path)
    return written
