"""`rota k8s render`: the manifests for a sample app validate offline against the
Kubernetes API schemas (kubernetes-validate, strict: unknown fields fail) and the KEDA
objects against the CRD schemas in tests/data/keda; and they say what rota needs
(grace, probes, the schema wait, the migration Job, one trigger per queue)."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from rota.cli.k8s import metrics_api
from rota.cli.main import cli
from rota.cli.migrate import migrate
from rota.cli.worker import worker
from rota.drivers import queries
from rota.errors import ConfigurationError
from rota.k8s import (
    RenderSettings,
    Scaler,
    Signal,
    UrlSource,
    WorkerGroup,
    documents,
    keda_query,
    to_yaml,
)
from rota.k8s.output import write_folder
from rota.worker.health import Probe, build_app
from tests.pod_security import pod_templates, violations

KEDA = Path(__file__).parents[1] / "data" / "keda"
# The oldest and newest Kubernetes minors we claim (unhealthyPodEvictionPolicy is GA in 1.31).
K8S_VERSIONS = ("1.31", "1.33")


def _schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((KEDA / name).read_text())
    return loaded


SCALED_OBJECT = _schema("scaledobject.openapi.json")
TRIGGER_AUTH = _schema("triggerauthentication.openapi.json")
SCALER_METADATA = _schema("scaler-metadata.json")


def sample(**overrides: Any) -> RenderSettings:
    """The Seatlark shop: tickets scale from zero, reports and emails share a Deployment."""
    values: dict[str, Any] = dict(
        app="seatlark.jobs:app",
        groups=(
            WorkerGroup({"tickets": 4}, min_replicas=0, max_replicas=20),
            WorkerGroup({"reports": 1, "emails": 2}, min_replicas=1, max_replicas=5, target=3),
        ),
        image="ghcr.io/seatlark/shop:2.3.0",
        namespace="seatlark",
        grace=45,
    )
    values.update(overrides)
    return RenderSettings(**values)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def validate(doc: dict[str, Any]) -> None:
    """Raise unless `doc` is valid for its API: Kubernetes' own schemas, or KEDA's."""
    if doc["apiVersion"] == "keda.sh/v1alpha1":
        schema = SCALED_OBJECT if doc["kind"] == "ScaledObject" else TRIGGER_AUTH
        jsonschema.validate(doc, schema)
        for trigger in doc["spec"].get("triggers", []):
            jsonschema.validate(trigger["metadata"], SCALER_METADATA[trigger["type"]])
        return
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("scaler", list(Scaler))
@pytest.mark.parametrize("signal", list(Signal))
def test_every_manifest_validates(scaler: Scaler, signal: Signal) -> None:
    docs = documents(sample(scaler=scaler, signal=signal))
    kinds = sorted(d["kind"] for d in docs)
    expected = ["Deployment"] * 2 + ["Job", "PodDisruptionBudget", "PodDisruptionBudget"]
    expected += ["ScaledObject"] * 2 + ["TriggerAuthentication"]
    if scaler is Scaler.METRICS_API:
        expected += ["Deployment", "Service"]
    assert kinds == sorted(expected)
    for doc in docs:
        validate(doc)


@pytest.mark.parametrize(
    ("kind", "path", "typo"),
    [
        ("Deployment", ("spec", "template", "spec"), "terminationGracePeriod"),
        ("Job", ("spec",), "backOffLimit"),
        ("PodDisruptionBudget", ("spec",), "maxUnavailible"),
        ("ScaledObject", ("spec",), "pollInterval"),
        ("ScaledObject", ("spec", "fallback"), "replica"),
        ("TriggerAuthentication", ("spec",), "secretRef"),
    ],
)
def test_the_validators_reject_a_misspelt_field(
    kind: str, path: tuple[str, ...], typo: str
) -> None:
    """The checks above are worth something: a field the API server would prune (or
    refuse) fails here."""
    doc = copy.deepcopy(by_kind(documents(sample()), kind)[0])
    target = doc
    for key in path:
        target = target[key]
    target[typo] = 1
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_a_misspelt_scaler_parameter_is_rejected() -> None:
    doc = copy.deepcopy(by_kind(documents(sample()), "ScaledObject")[0])
    metadata = doc["spec"]["triggers"][0]["metadata"]
    metadata["targetQueryValues"] = metadata.pop("targetQueryValue")
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_worker_deployment_matches_the_worker() -> None:
    settings = sample()
    docs = documents(settings)
    deployment = next(d for d in by_kind(docs, "Deployment") if "tickets" in d["metadata"]["name"])
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # The command is a real `rota worker` invocation, and its grace fits the pod's.
    assert container["command"][:2] == ["rota", "worker"]
    params = worker.make_context("worker", container["command"][2:]).params
    assert params["queue_spec"] == "tickets=4"
    assert params["app_path"] == "seatlark.jobs:app"
    assert params["grace"] == 45
    assert pod["terminationGracePeriodSeconds"] == 45 + settings.grace_margin > params["grace"]
    assert params["health_port"] == container["ports"][0]["containerPort"] == 8081
    # Probes hit the routes the health server serves.
    web = build_app(live=lambda: Probe(True), ready=lambda: Probe(True))
    routes = {getattr(route, "path", None) for route in web.routes}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz" in routes
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez" in routes
    assert container["readinessProbe"]["httpGet"]["port"] == container["ports"][0]["name"]
    # The database URL comes from the Secret, never from the manifest.
    assert container["env"] == [
        {
            "name": "ROTA_DATABASE_URL",
            "valueFrom": {"secretKeyRef": {"name": "rota-database", "key": "url"}},
        }
    ]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}
    # The init container waits for the schema; it never migrates.
    (init,) = pod["initContainers"]
    assert init["command"][:4] == ["rota", "migrate", "--check", "--wait"]
    init_params = migrate.make_context("migrate", init["command"][2:]).params
    assert init_params["check"] and init_params["wait"]
    assert init["env"] == container["env"] and init["image"] == container["image"]
    # KEDA owns the replica count, and a rollout never lowers the working workers.
    assert "replicas" not in deployment["spec"]
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_migration_job_is_named_with_the_schema_version() -> None:
    version = len(queries.migrations("postgres"))
    (job,) = by_kind(documents(sample()), "Job")
    assert job["metadata"]["name"].startswith(f"rota-migrate-v{version}-")
    assert job["metadata"]["labels"]["rota/schema-version"] == str(version)
    spec = job["spec"]
    assert spec["backoffLimit"] == 3
    assert spec["activeDeadlineSeconds"] == 600
    assert spec["ttlSecondsAfterFinished"] == 86_400
    (container,) = spec["template"]["spec"]["containers"]
    params = migrate.make_context("migrate", container["command"][2:]).params
    assert params["app_path"] == "seatlark.jobs:app" and not params["check"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    # A Job's template is immutable: same settings, same name; a new image, a new Job.
    (again,) = by_kind(documents(sample()), "Job")
    (other,) = by_kind(documents(sample(image="ghcr.io/seatlark/shop:2.4.0")), "Job")
    assert again["metadata"]["name"] == job["metadata"]["name"] != other["metadata"]["name"]
    assert other["metadata"]["name"].startswith(f"rota-migrate-v{version}-")


def test_scaled_objects_follow_the_groups() -> None:
    docs = documents(sample())
    deployments = {d["metadata"]["name"]: d for d in by_kind(docs, "Deployment")}
    budgets = {d["metadata"]["name"]: d for d in by_kind(docs, "PodDisruptionBudget")}
    scaled = {d["metadata"]["name"]: d for d in by_kind(docs, "ScaledObject")}
    assert set(scaled) == set(deployments) == set(budgets)
    assert set(scaled) == {"rota-worker-tickets", "rota-worker-reports-emails"}
    (auth,) = by_kind(docs, "TriggerAuthentication")
    for name, obj in scaled.items():
        spec = obj["spec"]
        assert spec["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": name,
        }
        pod_labels = deployments[name]["spec"]["template"]["metadata"]["labels"]
        selector = budgets[name]["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod_labels.items()
        assert selector == deployments[name]["spec"]["selector"]["matchLabels"]
        assert spec["pollingInterval"] == 30 and spec["cooldownPeriod"] == 300
        for trigger in spec["triggers"]:
            assert trigger["metricType"] == "AverageValue"  # fallback needs it
            assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    tickets = scaled["rota-worker-tickets"]["spec"]
    assert (tickets["minReplicaCount"], tickets["maxReplicaCount"]) == (0, 20)
    assert tickets["fallback"] == {"failureThreshold": 3, "replicas": 1}
    (trigger,) = tickets["triggers"]
    assert trigger["metadata"] == {
        "query": "SELECT rota_keda_backlog('tickets') + rota_keda_running('tickets')",
        "targetQueryValue": "8",  # 2 x concurrency 4
        "activationTargetQueryValue": "0",
    }
    shared = scaled["rota-worker-reports-emails"]["spec"]
    assert [t["name"] for t in shared["triggers"]] == ["queue-reports", "queue-emails"]
    assert {t["metadata"]["targetQueryValue"] for t in shared["triggers"]} == {"3"}
    assert shared["fallback"]["replicas"] == 1 and shared["minReplicaCount"] == 1
    assert auth["spec"]["secretTargetRef"] == [
        {"parameter": "connection", "name": "rota-metrics-database", "key": "url"}
    ]


def test_metrics_api_alternative() -> None:
    docs = documents(sample(scaler=Scaler.METRICS_API, signal=Signal.BACKLOG))
    (service,) = by_kind(docs, "Service")
    server = next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "rota-metrics")
    assert server["spec"]["replicas"] == 1  # always on: KEDA asks it while workers are at 0
    (container,) = server["spec"]["template"]["spec"]["containers"]
    assert container["command"][:3] == ["rota", "k8s", "metrics-api"]
    params = metrics_api.make_context("metrics-api", container["command"][3:]).params
    assert params["port"] == service["spec"]["ports"][0]["port"] == 8080
    env = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"]}
    assert env == {
        "ROTA_DATABASE_URL": "rota-metrics-database",
        "ROTA_METRICS_TOKEN": "rota-metrics-token",
    }
    assert (
        service["spec"]["selector"].items()
        <= server["spec"]["template"]["metadata"]["labels"].items()
    )
    scaled = next(d for d in by_kind(docs, "ScaledObject") if "tickets" in d["metadata"]["name"])
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "metrics-api"
    assert trigger["metadata"] == {
        "url": "http://rota-metrics.seatlark.svc.cluster.local:8080/metrics/keda?queue=tickets",
        "format": "json",
        "valueLocation": "backlog",
        "targetValue": "8",
        "activationTargetValue": "0",
        "authMode": "bearer",
    }
    (auth,) = by_kind(docs, "TriggerAuthentication")
    assert auth["spec"]["secretTargetRef"][0]["parameter"] == "token"


def test_keda_query_is_the_drivers_named_query() -> None:
    template = queries.load("postgres")["queue_keda_backlog"]
    assert "%(queue)s" in template
    assert keda_query("a.b:c/d-e", Signal.BACKLOG) == template.replace("%(queue)s", "'a.b:c/d-e'")
    assert "'o''brien'" in keda_query("o'brien")  # never reachable (queue names), still quoted


def test_yaml_stream_and_kustomize_folder(tmp_path: Path) -> None:
    settings = sample(scaler=Scaler.METRICS_API)
    stream = [d for d in yaml.safe_load_all(to_yaml(settings)) if d]
    assert stream == documents(settings)
    assert "&id" not in to_yaml(settings)  # no YAML anchors
    written = write_folder(settings, tmp_path / "deploy")
    kustomization = yaml.safe_load((tmp_path / "deploy" / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["namespace"] == "seatlark"
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in written if p.name != "kustomization.yaml"
    )
    from_files = [
        d
        for name in kustomization["resources"]
        for d in yaml.safe_load_all((tmp_path / "deploy" / name).read_text())
        if d
    ]
    assert from_files == stream


def test_render_cli_pairs_group_options_in_order(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "k8s", "render", "--app", "shop.jobs:app", "--image", "shop:1",
            "--queue", "tickets=4", "--min", "0", "--max", "20",
            "--queue", "reports=1", "--min", "1", "--max", "3",
            "--cooldown", "120",
        ],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    scaled = {
        d["metadata"]["name"]: d["spec"]
        for d in yaml.safe_load_all(result.stdout)
        if d and d["kind"] == "ScaledObject"
    }
    assert (
        scaled["rota-worker-tickets"]["minReplicaCount"],
        scaled["rota-worker-tickets"]["maxReplicaCount"],
    ) == (0, 20)
    assert (
        scaled["rota-worker-reports"]["minReplicaCount"],
        scaled["rota-worker-reports"]["maxReplicaCount"],
    ) == (1, 3)
    assert {s["cooldownPeriod"] for s in scaled.values()} == {120}
    out = tmp_path / "k"
    result = CliRunner().invoke(cli, ["k8s", "render", "--app", "shop.jobs:app", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "kustomization.yaml").exists() and (out / "worker-default.yaml").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--queue", "a", "--queue", "b", "--min", "0", "--min", "1", "--min", "2"],
            "--min was given 3 times",
        ),
        (["--queue", "a", "--min", "5", "--max", "2"], "need 0 <= min <= max"),
        (["--queue", "a", "--queue", "a=2"], "appear in two groups"),
        (["--queue", "bad name"], "bad queue name"),
        (["--namespace", "Shop"], "not a Kubernetes name"),
        (["--memory", "lots"], "not a Kubernetes quantity"),
    ],
)
def test_render_cli_refuses_bad_input(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["k8s", "render", "--app", "shop.jobs:app", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_settings_refuse_bad_values_with_the_option_to_fix() -> None:
    with pytest.raises(ConfigurationError, match=r"package\.module:attribute"):
        sample(app="shop")
    with pytest.raises(ConfigurationError, match="--group-name"):
        sample(groups=(WorkerGroup({"a.b": 1}, name="x"), WorkerGroup({"c": 1}, name="x")))
    long_queue = "q" * 100
    (group,) = sample(groups=(WorkerGroup({long_queue: 1}),)).groups
    assert len(group.slug) <= 40 and group.slug.startswith("q")


def test_rendered_commands_quote_safely() -> None:
    """Commands are argument lists (no shell), so an app path is never re-parsed."""
    for doc in documents(sample()):
        spec = doc["spec"].get("template", {}).get("spec", {})
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            assert all(isinstance(arg, str) for arg in container["command"])
            assert shlex.join(container["command"]).startswith("rota ")


# --- Pod Security "restricted" (issue 18, hole 8) --------------------------------------------


def _all_variants() -> list[RenderSettings]:
    return [
        sample(scaler=scaler, signal=signal, database_url_from=source)
        for scaler in Scaler
        for signal in Signal
        for source in UrlSource
    ]


def test_every_rendered_pod_passes_pod_security_restricted() -> None:
    checked = 0
    for settings in _all_variants():
        for doc in documents(settings):
            for pod in pod_templates(doc):
                assert violations(pod) == [], (doc["kind"], doc["metadata"]["name"])
                assert pod["securityContext"]["runAsNonRoot"] is True
                assert pod["securityContext"]["runAsUser"] == 10_001
                for container in [*pod.get("initContainers", []), *pod["containers"]]:
                    assert container["securityContext"]["readOnlyRootFilesystem"] is True
                    tmp = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
                    assert tmp["/tmp"] == "tmp"
                assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
                checked += 1
            validate(doc)
    assert checked >= 8 * 3


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda pod: pod["securityContext"].pop("runAsNonRoot"), "runAsNonRoot"),
        (lambda pod: pod["securityContext"].update(runAsUser=0), "runAsUser 0"),
        (lambda pod: pod["securityContext"].pop("seccompProfile"), "seccompProfile"),
        (
            lambda pod: pod["containers"][0]["securityContext"].update(
                allowPrivilegeEscalation=True
            ),
            "allowPrivilegeEscalation",
        ),
        (
            lambda pod: pod["containers"][0]["securityContext"]["capabilities"].update(
                add=["NET_ADMIN"]
            ),
            "capabilities add",
        ),
        (lambda pod: pod["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), "hostPath"),
        (lambda pod: pod.update(hostNetwork=True), "hostNetwork"),
    ],
)
def test_the_pod_security_check_catches_what_restricted_forbids(change: Any, expected: str) -> None:
    (deployment, *_) = by_kind(documents(sample()), "Deployment")
    pod = copy.deepcopy(deployment["spec"]["template"]["spec"])
    change(pod)
    assert any(expected in v for v in violations(pod)), violations(pod)


def test_the_database_url_as_a_mounted_file() -> None:
    settings = sample(scaler=Scaler.METRICS_API, database_url_from=UrlSource.FILE)
    docs = documents(settings)
    for doc in docs:
        for pod in pod_templates(doc):
            secrets = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
            for container in [*pod.get("initContainers", []), *pod["containers"]]:
                env = {e["name"]: e for e in container["env"]}
                assert "ROTA_DATABASE_URL" not in env  # the URL never sits in the env
                path = env["ROTA_DATABASE_URL_FILE"]["value"]
                folder, _, file = path.rpartition("/")
                (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == folder]
                assert mount["readOnly"] is True and "subPath" not in mount  # kubelet updates it
                secret = secrets[mount["name"]]
                assert secret["items"] == [{"key": "url", "path": file}]
                assert secret["defaultMode"] == 0o440
                assert pod["securityContext"]["fsGroup"] == 10_001  # so the user can read it
            expected = (
                "rota-metrics-database"
                if doc["metadata"]["name"] == "rota-metrics"
                else "rota-database"
            )
            assert {s["secretName"] for s in secrets.values()} == {expected}
    # The worker reads it through `rota.App()`: the same variable docs/security.md names.
    from rota.drivers.url import ENV_URL_FILE

    assert ENV_URL_FILE == "ROTA_DATABASE_URL_FILE"


def test_render_cli_takes_run_as_user_and_url_from() -> None:
    result = CliRunner().invoke(
        cli,
        ["k8s", "render", "--app", "shop.jobs:app", "--run-as-user", "4242",
         "--database-url-from", "file"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    pods = [pod for d in docs for pod in pod_templates(d)]
    assert pods and all(p["securityContext"]["runAsUser"] == 4242 for p in pods)
    root = CliRunner().invoke(cli, ["k8s", "render", "--app", "a.b:c", "--run-as-user", "0"])
    assert root.exit_code == 2


# --- the dashboard (issue 22) ------------------------------------------------------------------


def _dashboard_variants() -> list[RenderSettings]:
    return [
        sample(dashboard=True),
        sample(dashboard=True, dashboard_path="/rota", database_url_from=UrlSource.FILE),
        sample(
            dashboard=True,
            dashboard_host="ops.seatlark.example",
            dashboard_path="/rota",
            dashboard_tls_secret="ops-tls",
            dashboard_ingress_class="nginx",
            dashboard_replicas=2,
        ),
        sample(dashboard=True, dashboard_host="ops.seatlark.example"),
    ]


def test_dashboard_manifests_validate_and_pass_pod_security_restricted() -> None:
    for settings in _dashboard_variants():
        docs = [d for d in documents(settings) if d["metadata"]["name"] == "rota-dashboard"]
        kinds = sorted(d["kind"] for d in docs)
        expected = ["Deployment", "Service"]
        if settings.dashboard_host:
            expected.append("Ingress")
        assert kinds == sorted(expected)
        for doc in docs:
            validate(doc)  # kubernetes-validate, strict, 1.31 and 1.33
            for pod in pod_templates(doc):
                assert violations(pod) == []
    # The same pod security context as the workers.
    docs = documents(sample(dashboard=True))
    worker, dashboard = (
        next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == name)
        for name in ("rota-worker-tickets", "rota-dashboard")
    )
    assert (
        dashboard["spec"]["template"]["spec"]["securityContext"]
        == worker["spec"]["template"]["spec"]["securityContext"]
    )
    (container,) = dashboard["spec"]["template"]["spec"]["containers"]
    (worker_container,) = worker["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"] == worker_container["securityContext"]
    assert container["env"] == worker_container["env"]  # the database URL, as the workers


def test_dashboard_command_probes_and_ingress_fit_together(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    import rota
    from rota.cli.dashboard import dashboard
    from rota.web.server import create_app
    from rota.web.settings import WebSettings

    settings = _dashboard_variants()[2]
    docs = documents(settings)
    (deployment,) = [d for d in by_kind(docs, "Deployment") if "dashboard" in d["metadata"]["name"]]
    (service,) = by_kind(docs, "Service")
    (ingress,) = by_kind(docs, "Ingress")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    # A real `rota dashboard` command line: its options parse, and the settings they make
    # are valid.
    assert container["command"][:2] == ["rota", "dashboard"]
    params = dashboard.make_context("dashboard", container["command"][2:]).params
    assert params["root_path"] == "/rota" and params["secure_cookies"] is True
    assert params["forwarded_allow_ips"] == "*"
    assert "ops.seatlark.example" in params["allowed_hosts"]
    assert "rota-dashboard.seatlark.svc" in params["allowed_hosts"]
    web = WebSettings(allowed_hosts=params["allowed_hosts"], root_path=params["root_path"])
    # The probes hit routes the dashboard serves, under the prefix, with the Host they send.
    app = rota.App(f"sqlite:///{tmp_path / 'rota.db'}")
    app.migrate()
    try:
        with TestClient(create_app(app, web), base_url="http://10.1.2.3:8765") as client:
            for probe in ("readinessProbe", "livenessProbe"):
                get = container[probe]["httpGet"]
                assert get["port"] == container["ports"][0]["name"]
                headers = {h["name"]: h["value"] for h in get["httpHeaders"]}
                assert client.get(get["path"], headers=headers).status_code == 200, probe
                # Without the Host header the kubelet would be refused (pod IP).
                assert client.get(get["path"]).status_code == 400
    finally:
        app.close()
    # Service -> pods, Ingress -> Service, TLS for the host.
    assert service["spec"]["selector"].items() <= pod_labels(deployment).items()
    assert service["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"]
    rule = ingress["spec"]["rules"][0]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": "http"}}
    assert rule["http"]["paths"][0] == {**rule["http"]["paths"][0], "path": "/rota"}
    assert ingress["spec"]["tls"] == [{"hosts": ["ops.seatlark.example"], "secretName": "ops-tls"}]
    assert ingress["spec"]["ingressClassName"] == "nginx"


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def test_render_cli_dashboard_options() -> None:
    result = CliRunner().invoke(
        cli,
        ["k8s", "render", "--app", "shop.jobs:app", "--dashboard", "--dashboard-host",
         "ops.example.com", "--dashboard-path", "/rota/", "--dashboard-tls-secret", "tls",
         "--database-url-from", "file"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    (ingress,) = [d for d in docs if d["kind"] == "Ingress"]
    assert ingress["spec"]["rules"][0]["http"]["paths"][0]["path"] == "/rota"
    for args, message in (
        (["--dashboard-path", "/rota"], "need --dashboard"),
        (["--dashboard", "--dashboard-tls-secret", "x"], "needs --dashboard-host"),
        (["--dashboard", "--dashboard-path", "rota"], "--dashboard-path"),
        (["--dashboard", "--dashboard-host", "bad host"], "not a host name"),
    ):
        bad = CliRunner().invoke(cli, ["k8s", "render", "--app", "a.b:c", *args])
        assert bad.exit_code == 2 and message in bad.output, (args, bad.output)
