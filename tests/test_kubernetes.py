"""deploy/kubernetes: every overlay renders with ``kubectl kustomize``, passes
``kubernetes-validate --strict`` for the oldest and newest Kubernetes we support, and holds what
docs/kubernetes.md promises: no secret value in any manifest, every container non-root with a
read-only root filesystem, requests and limits and (where it serves HTTP) probes, grace periods
above the drain time, custom resources with what KEDA and the Prometheus Operator require, and a
PrometheusRule whose alerts are exactly those of monitoring/prometheus/alerts.yml as it is now.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import IN_CI, ROOT
from veredito.producer import topology

DEPLOY = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
PROMETHEUS = ROOT / "monitoring" / "prometheus"
DASHBOARD = ROOT / "monitoring" / "grafana" / "dashboards" / "veredito.json"
# the oldest and the newest Kubernetes the manifests are validated for (docs/kubernetes.md)
KUBERNETES_VERSIONS = ("1.25", "1.37")
CUSTOM_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("keda.sh/v1alpha1", "TriggerAuthentication"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
# variables that carry secrets: only ever from a Secret, never a value or a ConfigMap key
SECRET_VARIABLES = {
    "VEREDITO_BROKER_URL",
    "VEREDITO_LLM_API_KEY",
    "OPENAI_API_KEY",
    "VEREDITO_REDIS_URL",
    "VEREDITO_INGEST_TOKENS",
    "VEREDITO_READ_TOKENS",
    "VEREDITO_REVIEW_TOKENS",
    "VEREDITO_SESSION_SECRET",
    "PGPASSWORD",
    "REDIS_PASSWORD",
}


def tool(name: str, why: str) -> str:
    path = shutil.which(name) or (
        str(Path(sys.executable).parent / name)
        if (Path(sys.executable).parent / name).exists()
        else None
    )
    if path is None:
        message = f"{name} is not installed: {why}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


def kubectl() -> str:
    return tool("kubectl", "it renders the overlays (make test installs it: ensure-services.sh)")


@functools.cache
def rendered_text(overlay: str) -> str:
    done = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"kubectl kustomize overlays/{overlay}: {done.stderr}"
    return done.stdout


def rendered(overlay: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(rendered_text(overlay)) if doc]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in of_kind(docs, "Deployment")
    ]


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def settings_of(docs: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, str]:
    """The environment a pod's first container gets from its ConfigMaps."""
    maps = {d["metadata"]["name"]: d.get("data", {}) for d in of_kind(docs, "ConfigMap")}
    values: dict[str, str] = {}
    for source in pod["containers"][0].get("envFrom", []):
        if "configMapRef" in source:
            values.update(maps[source["configMapRef"]["name"]])
    return values


def test_the_overlays_are_there() -> None:
    assert OVERLAYS == ["hpa-cpu", "postgresql-serve", "rabbitmq", "redis"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_and_validates_strictly(overlay: str, tmp_path: Path) -> None:
    validate = tool("kubernetes-validate", "pip install -e '.[dev]'")
    manifest = tmp_path / f"{overlay}.yaml"
    manifest.write_text(rendered_text(overlay))
    versions = [arg for version in KUBERNETES_VERSIONS for arg in ("-k", version)]
    done = subprocess.run(
        [validate, "--strict", "--quiet", *versions, str(manifest)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ERROR" not in done.stdout, done.stdout
    # the only kinds it has no schema for are the custom resources checked below
    skipped = set(re.findall(r"find schema for kind (\w+) with api version (\S+)", done.stdout))
    assert {(api, kind) for kind, api in skipped} <= CUSTOM_KINDS, skipped
    kinds = {(d["apiVersion"], d["kind"]) for d in rendered(overlay)}
    assert len(skipped) == len(kinds & CUSTOM_KINDS)


def test_a_validation_failure_is_seen(tmp_path: Path) -> None:
    """--strict rejects what the API server would not take (the check above can fail)."""
    validate = tool("kubernetes-validate", "pip install -e '.[dev]'")
    docs = rendered("rabbitmq")
    worker = next(d for d in of_kind(docs, "Deployment") if "worker" in d["metadata"]["name"])
    worker["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFS"] = True
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump(worker))
    done = subprocess.run(
        [validate, "--strict", "--quiet", "-k", KUBERNETES_VERSIONS[-1], str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "readOnlyRootFS" in done.stdout, done.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_secret_value_is_rendered(overlay: str) -> None:
    docs = rendered(overlay)
    text = rendered_text(overlay)
    assert not of_kind(docs, "Secret"), "a Secret is rendered: values belong to the team"
    assert not re.search(r"://[^/\s:@]+:[^/\s@]+@", text), "a URL with a password"
    assert "CHANGE-ME" not in text  # the placeholders of docs/kubernetes.md's example
    for config in of_kind(docs, "ConfigMap"):
        assert not SECRET_VARIABLES & set(config.get("data", {})), config["metadata"]["name"]
    for name, pod in pod_specs(docs):
        for container in pod["containers"]:
            for variable in container.get("env", []):
                if variable["name"] in SECRET_VARIABLES:
                    assert "value" not in variable, (name, variable["name"])
                    assert variable["valueFrom"]["secretKeyRef"]["name"] == "veredito"
            for source in container.get("envFrom", []):
                assert "secretRef" not in source, f"{name}: every secret is named, not all"
    for auth in of_kind(docs, "TriggerAuthentication"):
        assert set(auth["spec"]) == {"secretTargetRef"}, "KEDA reads the Secret, holds nothing"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_is_locked_down_and_sized(overlay: str) -> None:
    docs = rendered(overlay)
    images = set()
    for name, pod in pod_specs(docs):
        assert pod["automountServiceAccountToken"] is False, name
        pod_security = pod["securityContext"]
        assert pod_security["runAsNonRoot"] is True, name
        assert pod_security["runAsUser"] != 0, name
        assert pod_security["seccompProfile"]["type"] == "RuntimeDefault", name
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in pod["containers"] + pod.get("initContainers", []):
            where = f"{name}/{container['name']}"
            images.add(container["image"])
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["capabilities"]["drop"] == ["ALL"], where
            assert not security["capabilities"].get("add"), where
            assert security.get("runAsNonRoot", True) is True, where
            assert security.get("privileged", False) is False, where
            assert security["seccompProfile"]["type"] == "RuntimeDefault", where
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            assert "emptyDir" in volumes[mounts["/tmp"]], f"{where}: a writable /tmp"
            for kind in ("requests", "limits"):
                assert set(container["resources"][kind]) >= {"cpu", "memory"}, where
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            if ports:  # it serves HTTP: the kubelet asks it whether it lives and is ready
                for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                    check = container[probe]["httpGet"]
                    assert check["port"] in ports, f"{where}: {probe} on an unnamed port"
                    assert check["path"] in ("/healthz", "/readyz"), where
                assert container["livenessProbe"]["httpGet"]["path"] == "/healthz", where
                assert container["readinessProbe"]["httpGet"]["path"] == "/readyz", where
    assert len(images) == 1, f"one image for every container: {images}"
    (image,) = images
    assert re.fullmatch(r"veredito(:[\w.-]+|@sha256:[0-9a-f]{64})", image), image


def test_the_image_runs_as_the_user_the_manifests_name() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1].split(":")[0].isdigit(), "a numeric USER: runAsNonRoot checks it"
    uid = int(users[-1].split(":")[0])
    for overlay in OVERLAYS:
        for name, pod in pod_specs(rendered(overlay)):
            assert pod["securityContext"]["runAsUser"] == uid, (overlay, name)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_grace_periods_outlast_the_drain(overlay: str) -> None:
    docs = rendered(overlay)
    for name, pod in pod_specs(docs):
        drain = float(settings_of(docs, pod).get("VEREDITO_SHUTDOWN_GRACE", 30))
        pre_stop = 0.0
        for container in pod["containers"]:
            command = container.get("lifecycle", {}).get("preStop", {}).get("exec", {})
            if command.get("command", [""])[0] == "sleep":
                pre_stop = max(pre_stop, float(command["command"][1]))
        grace = pod["terminationGracePeriodSeconds"]
        assert grace > pre_stop + drain, f"{name}: {grace} s ≤ {pre_stop} + {drain} s"
        assert grace >= pre_stop + drain + 15, f"{name}: leave time to publish and close"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_disruption_budgets_and_network_policies(overlay: str) -> None:
    docs = rendered(overlay)
    pods = {
        name: d["spec"]["template"]["metadata"]["labels"]
        for d in of_kind(docs, "Deployment")
        for name in [d["metadata"]["name"]]
    }
    budgets = of_kind(docs, "PodDisruptionBudget")
    for name in ("veredito-worker", "veredito-serve"):
        if name in pods:
            assert any(matches(b["spec"]["selector"]["matchLabels"], pods[name]) for b in budgets)
    policies = of_kind(docs, "NetworkPolicy")
    for name, labels in pods.items():
        selecting = [
            p for p in policies if matches(p["spec"]["podSelector"]["matchLabels"], labels)
        ]
        assert any(
            p["spec"]["policyTypes"] == ["Ingress"] and not p["spec"].get("ingress")
            for p in selecting
        ), f"{name}: no default deny"
        rules = [rule for p in selecting for rule in p["spec"].get("ingress", [])]
        if name == "veredito-worker":  # nothing but Prometheus, on the metrics port only
            assert rules
            for rule in rules:
                assert rule["from"] and all(
                    peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
                    and "namespaceSelector" in peer
                    for peer in rule["from"]
                ), rule
                assert [p["port"] for p in rule["ports"]] == ["metrics"]
        elif name == "veredito-serve":  # reachable: the way in
            assert any(
                not rule.get("from") and [p["port"] for p in rule["ports"]] == ["http"]
                for rule in rules
            )
        else:
            assert not rules, f"{name} listens on nothing"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_custom_resources_have_what_their_operators_require(overlay: str) -> None:
    docs = rendered(overlay)
    deployments = {d["metadata"]["name"]: d for d in of_kind(docs, "Deployment")}
    auths = {d["metadata"]["name"]: d for d in of_kind(docs, "TriggerAuthentication")}
    scalers = of_kind(docs, "ScaledObject") + of_kind(docs, "HorizontalPodAutoscaler")
    assert [s["spec"]["scaleTargetRef"]["name"] for s in scalers] == ["veredito-worker"]
    for scaled in of_kind(docs, "ScaledObject"):  # KEDA 2.x: keda.sh/v1alpha1
        spec = scaled["spec"]
        assert spec["scaleTargetRef"]["name"] in deployments
        assert 0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
        assert spec["triggers"]
        for trigger in spec["triggers"]:
            meta = trigger["metadata"]
            assert all(isinstance(v, str) for v in meta.values()), "KEDA's metadata: strings"
            auth = auths[trigger["authenticationRef"]["name"]]
            refs = auth["spec"]["secretTargetRef"]
            assert all(set(ref) == {"parameter", "name", "key"} for ref in refs)
            params = {ref["parameter"] for ref in refs}
            if trigger["type"] == "rabbitmq":
                assert meta["queueName"] == topology.TRIPLES_QUEUE
                assert meta["mode"] in ("QueueLength", "MessageRate")
                assert float(meta["value"]) > 0
                assert meta.get("protocol", "auto") in ("amqp", "auto", "http")
                assert "host" in params or "host" in meta or "hostFromEnv" in meta
            elif trigger["type"] == "redis":
                assert meta["listName"] == topology.TRIPLES_QUEUE
                assert int(meta["listLength"]) > 0
                assert int(meta.get("databaseIndex", "0")) >= 0
                assert params & {"address", "host"} or meta.keys() & {"address", "host"}
            else:
                raise AssertionError(f"unexpected trigger {trigger['type']}")
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in deployments.values()]
    for monitor in of_kind(docs, "PodMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        selected = [
            d
            for d in deployments.values()
            if matches(selector, d["spec"]["template"]["metadata"]["labels"])
        ]
        assert selected, "the PodMonitor selects no pod"
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            for deployment in selected:
                names = {
                    p["name"]
                    for c in deployment["spec"]["template"]["spec"]["containers"]
                    for p in c.get("ports", [])
                }
                assert endpoint["port"] in names
    services = of_kind(docs, "Service")
    for monitor in of_kind(docs, "ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        assert monitor["spec"]["endpoints"]
        for service in services:
            if matches(selector, service["metadata"]["labels"]):
                names = {p["name"] for p in service["spec"]["ports"]}
                assert all(e["port"] in names for e in monitor["spec"]["endpoints"])
                assert any(matches(service["spec"]["selector"], labels) for labels in pod_labels)
    for rule in of_kind(docs, "PrometheusRule"):
        for group in rule["spec"]["groups"]:
            assert group["name"] and group["rules"]
            for item in group["rules"]:
                assert item["expr"] and (("alert" in item) != ("record" in item)), item
    dashboards = [
        c
        for c in of_kind(docs, "ConfigMap")
        if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    ]
    if of_kind(docs, "PrometheusRule"):
        (dashboard,) = dashboards
        assert json.loads(dashboard["data"]["veredito.json"]) == json.loads(DASHBOARD.read_text())
        assert dashboard["metadata"]["name"] == "veredito-dashboard"  # no hash: one per install


def rules_of(path: Path) -> list[dict[str, Any]]:
    groups = yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_the_prometheus_rule_alerts_are_exactly_those_of_alerts_yml() -> None:
    """Against the files as they are now: a change to monitoring/prometheus/*.yml without
    `make k8s` fails here."""
    with_rules = [o for o in OVERLAYS if of_kind(rendered(o), "PrometheusRule")]
    assert with_rules == ["postgresql-serve", "rabbitmq", "redis"]
    alerts = rules_of(PROMETHEUS / "alerts.yml")
    recording = rules_of(PROMETHEUS / "recording.yml")
    assert alerts and recording
    for overlay in with_rules:
        (rule,) = of_kind(rendered(overlay), "PrometheusRule")
        rendered_rules = [r for g in rule["spec"]["groups"] for r in g["rules"]]
        found = [r for r in rendered_rules if "alert" in r]
        assert [r["alert"] for r in found] == [r["alert"] for r in alerts], "run `make k8s`"
        assert found == alerts, "an alert differs from alerts.yml: run `make k8s`"
        assert [r for r in rendered_rules if "record" in r] == recording, "run `make k8s`"


def test_the_generated_files_are_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_k8s_monitoring.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_the_overlay_without_operators_has_no_custom_resource() -> None:
    kinds = {(d["apiVersion"], d["kind"]) for d in rendered("hpa-cpu")}
    assert not kinds & CUSTOM_KINDS
    (hpa,) = of_kind(rendered("hpa-cpu"), "HorizontalPodAutoscaler")
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
