"""docs/kubernetes.md cannot drift: the manifests it shows are what its `rota k8s render`
command prints, and every YAML block on the page (the CronJob example included) validates
like the rendered manifests do."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from click.testing import CliRunner

from rota.cli.main import cli
from tests.pod_security import pod_templates, violations
from tests.unit.test_k8s_render import SCALED_OBJECT, SCALER_METADATA, validate

PAGE = Path(__file__).parents[2] / "docs" / "kubernetes.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(), flags=re.DOTALL | re.M)


def documented_render() -> list[dict[str, Any]]:
    """Run the page's first `rota k8s render` command (printing instead of --out)."""
    for block in blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("rota k8s render"):
                args = shlex.split(line)[1:]
                out = args.index("--out")
                del args[out : out + 2]
                result = CliRunner().invoke(cli, args, catch_exceptions=False)
                assert result.exit_code == 0, result.output
                return [d for d in yaml.safe_load_all(result.stdout) if d]
    raise AssertionError("docs/kubernetes.md shows no `rota k8s render` command")


def test_shown_manifests_are_what_render_prints() -> None:
    rendered = {(d["kind"], d["metadata"]["name"]): d for d in documented_render()}
    shown = [yaml.safe_load(b) for b in blocks("yaml")]
    ours = [
        d
        for d in shown
        if isinstance(d, dict)
        and d.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/managed-by")
        == "rota-k8s-render"
    ]
    assert {d["kind"] for d in ours} >= {
        "Deployment",
        "PodDisruptionBudget",
        "ScaledObject",
        "TriggerAuthentication",
    }
    for doc in ours:
        assert doc == rendered[(doc["kind"], doc["metadata"]["name"])], doc["kind"]


def test_every_yaml_block_validates() -> None:
    checked = 0
    for block in blocks("yaml"):
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and "triggers" in doc and "kind" not in doc:
            # A fragment: the triggers of a ScaledObject.
            item = SCALED_OBJECT["properties"]["spec"]["properties"]["triggers"]["items"]
            for trigger in doc["triggers"]:
                jsonschema.validate(trigger, item)
                jsonschema.validate(trigger["metadata"], SCALER_METADATA[trigger["type"]])
        else:
            validate(doc)
            for pod in pod_templates(doc):
                # What the page shows passes Pod Security "restricted", like what rota renders.
                assert violations(pod) == [], doc["metadata"]["name"]
        checked += 1
    assert checked >= 6  # Deployment, PDB, ScaledObject, TriggerAuthentication, triggers, CronJob


def test_the_dashboard_pages_ingress_is_what_render_prints() -> None:
    """docs/dashboard.md, "In production": its render command prints its Ingress, and
    every pod that command renders passes Pod Security "restricted"."""
    page = PAGE.with_name("dashboard.md").read_text()
    (command,) = [
        line
        for block in re.findall(r"^```sh\n(.*?)^```", page, flags=re.DOTALL | re.M)
        for line in block.replace("\\\n", " ").splitlines()
        if line.startswith("rota k8s render")
    ]
    args = shlex.split(command)[1:]
    out = args.index("--out")
    del args[out : out + 2]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d]
    (ingress,) = [d for d in rendered if d["kind"] == "Ingress"]
    shown = [
        yaml.safe_load(b) for b in re.findall(r"^```yaml\n(.*?)^```", page, flags=re.DOTALL | re.M)
    ]
    assert ingress in shown
    for doc in rendered:
        validate(doc)
        for pod in pod_templates(doc):
            assert violations(pod) == [], doc["metadata"]["name"]
