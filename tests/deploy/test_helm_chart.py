"""The Helm chart (deploy/helm/sheetsync): Helm's own linter and renderer (Helm v4's Go
SDK through helm-python-sdk), every rendered manifest against Kubernetes 1.30's schemas
(kubernetes-validate), and the workers' probe commands, read from the rendered
manifest, run against a real worker process. No cluster runs here."""

from __future__ import annotations

import math
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml
from support.paths import ROOT
from support.waiting import wait_until

from sheetsync.celery.shutdown import grace_period_s
from sheetsync.settings import Settings

CHART = ROOT / "deploy" / "helm" / "sheetsync"
KUBERNETES = "1.30.0"
FAKE_SECRET = "fake-sheetsync-secret"
#: The plain settings a secret may never be.
SECRET_VARIABLES = {
    "SHEETSYNC_REDIS_URL",
    "SHEETSYNC_BROKER_URL",
    "SHEETSYNC_DATABASE_URL",
    "SHEETSYNC_PII_KEYS",
    "SHEETSYNC_GOOGLE_CLIENT_ID",
    "SHEETSYNC_GOOGLE_CLIENT_SECRET",
    "SHEETSYNC_ALERT_WEBHOOK_URL",
    "SHEETSYNC_OWNER_HOOK",
    "SHEETSYNC_WEB_TOKEN",
    "FLOWER_BASIC_AUTH",
    "DATABASE_URL",
}
DIGEST_IMAGE = re.compile(r"^[^:@\s]+(:\d+/[^:@\s]+)?@sha256:[a-f0-9]{64}$")
HEARTBEAT_PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
#: A stopping worker's worst case at the default settings, as the code computes it.
GRACE_S = math.ceil(grace_period_s(Settings()))

#: KEDA's ScaledObject, as its CRD requires it (kedacore/keda v2.20,
#: config/crd/bases/keda.sh_scaledobjects.yaml: spec.scaleTargetRef.name, spec.triggers
#: with a type and string metadata, the replica counts' bounds) and as its metrics-api
#: scaler reads its metadata (pkg/scalers/metrics_api_scaler.go: url and valueLocation
#: required, format one of json/xml/yaml/prometheus, targetValue a number).
SCALED_OBJECT = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["scaleTargetRef", "triggers"],
            "properties": {
                "scaleTargetRef": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "kind": {"type": "string"},
                        "apiVersion": {"type": "string"},
                    },
                },
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer", "minimum": 0},
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["type", "metadata"],
                        "properties": {
                            "type": {"type": "string", "minLength": 1},
                            "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                            "metadata": {
                                "type": "object",
                                "additionalProperties": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    },
}
METRICS_API_METADATA = {
    "type": "object",
    "required": ["url", "valueLocation", "targetValue"],
    "properties": {
        "url": {"type": "string", "pattern": "^https?://"},
        "valueLocation": {"type": "string", "minLength": 1},
        "format": {"enum": ["json", "xml", "yaml", "prometheus"]},
        "targetValue": {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?$"},
    },
}


def ci_values(name: str) -> dict[str, Any]:
    return helm.values_from_yaml((CHART / "ci" / f"{name}-values.yaml").read_text())


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and key in out else value
    return out


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The chart's manifests for ``values`` (NOTES.txt left out), as objects."""
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values, name="sheetsync", namespace="sheetsync")
    return [
        doc
        for path, text in sorted(rendered.items())
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


@pytest.fixture(scope="module", params=["default", "all"])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(ci_values(request.param))


@pytest.mark.parametrize("values", ["default", "all"])
def test_helm_lint_strict_finds_nothing(values: str) -> None:
    report = helm.chart.lint(str(CHART), ci_values(values), strict=True, kube_version="v1.30.0")
    assert report["errors"] == []
    # Severity 1 is information ("icon is recommended"); 2 a warning, 3 an error.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_every_manifest_is_valid_for_kubernetes(rendered: list[dict[str, Any]]) -> None:
    kinds = set()
    for doc in rendered:
        kinds.add(doc["kind"])
        if doc["kind"] == "ScaledObject":
            jsonschema.validate(doc, SCALED_OBJECT)
            for trigger in doc["spec"]["triggers"]:
                assert trigger["type"] == "metrics-api"
                jsonschema.validate(trigger["metadata"], METRICS_API_METADATA)
            continue
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    assert {"Deployment", "PodDisruptionBudget", "Job", "ConfigMap"} <= kinds


def test_everything_optional_renders_when_on() -> None:
    docs = render(ci_values("all"))
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for part in ("console", "exporter", "flower"):
        assert ("Deployment", f"sheetsync-{part}") in names
        assert ("Service", f"sheetsync-{part}") in names
    scaled = named(docs, "ScaledObject", "sheetsync-worker-default")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "sheetsync-worker-default"
    trigger = scaled["spec"]["triggers"][0]["metadata"]
    assert (
        trigger["url"]
        == "http://sheetsync-exporter.sheetsync.svc:9808/demand?queue=sheetsync_default"
    )
    assert trigger["valueLocation"] == "worker_processes"
    assert trigger["targetValue"] == "3"  # one replica's processes: workers.default's -c
    # KEDA owns the scaled Deployment's replica count; the others keep theirs.
    assert "replicas" not in named(docs, "Deployment", "sheetsync-worker-default")["spec"]
    assert named(docs, "Deployment", "sheetsync-worker-priority")["spec"]["replicas"] == 1


def test_the_optional_parts_are_off_by_default() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in render(ci_values("default"))}
    assert {name for _, name in kinds} == {
        "sheetsync-worker-priority",
        "sheetsync-worker-default",
        "sheetsync-worker-scheduled",
        "sheetsync-beat",
        "sheetsync-migrate",
        "sheetsync-grants",
    }


def _dev_defaults() -> set[str]:
    """The secret values the repository's development setups use."""
    compose = yaml.safe_load((ROOT / "docker-compose.dev.yml").read_text())
    values = {str(v) for k, v in compose["x-emulator-env"].items() if k in SECRET_VARIABLES}
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    for name in ("SHEETSYNC_GOOGLE_CLIENT_ID", "SHEETSYNC_GOOGLE_CLIENT_SECRET"):
        values |= set(re.findall(rf'"{name}": "([^"]+)"', conftest))
    return values


def test_no_secret_value_reaches_a_manifest(rendered: list[dict[str, Any]]) -> None:
    defaults = _dev_defaults()
    assert {"emulator-placeholder", "not-a-secret"} <= defaults
    text = yaml.safe_dump_all(rendered)
    for value in defaults:
        assert value not in text
    assert not re.search(r"://[^/\s:@]*:[^/\s@]+@", text)  # no credentials in a URL
    assert "Secret" not in {d["kind"] for d in rendered}
    referenced = set()
    for doc in rendered:
        for container in containers(doc):
            for env in container.get("env", []):
                if env["name"] in SECRET_VARIABLES:
                    assert "value" not in env, (doc["metadata"]["name"], env)
                    referenced.add(env["valueFrom"]["secretKeyRef"]["name"])
    assert FAKE_SECRET in referenced
    assert referenced <= {FAKE_SECRET, "fake-console-secret"}


def test_only_workers_get_the_keys_and_the_google_client(rendered: list[dict[str, Any]]) -> None:
    for doc in rendered:
        name = doc["metadata"]["name"]
        for container in containers(doc):
            env = {e["name"] for e in container.get("env", [])}
            if name.startswith("sheetsync-worker-"):
                assert {"SHEETSYNC_PII_KEYS", "SHEETSYNC_GOOGLE_CLIENT_SECRET"} <= env
            else:
                assert not env & {"SHEETSYNC_PII_KEYS", "SHEETSYNC_GOOGLE_CLIENT_SECRET"}, name


def test_images_by_digest_and_processes_locked_down(rendered: list[dict[str, Any]]) -> None:
    for doc in rendered:
        for container in containers(doc):
            assert DIGEST_IMAGE.match(container["image"]), container["image"]
            assert ":latest" not in container["image"]
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
        if containers(doc):
            pod = doc["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert pod["automountServiceAccountToken"] is False


def test_rendering_without_a_digest_fails() -> None:
    values = ci_values("default")
    values["image"] = {"repository": "sheetsync"}
    with pytest.raises(helm.HelmError, match=r"image\.digest is required"):
        render(values)
    values["image"] = {
        "repository": "sheetsync:latest",
        "digest": ci_values("default")["image"]["digest"],
    }
    with pytest.raises(helm.HelmError, match="repository"):
        render(values)


def test_rendering_without_a_secret_name_fails() -> None:
    values = ci_values("default")
    values["secrets"] = {}
    with pytest.raises(helm.HelmError, match="must name an existing Secret"):
        render(values)
    values = merged(ci_values("default"), {"config": {"SHEETSYNC_PII_KEYS": "k"}})
    with pytest.raises(helm.HelmError, match="SHEETSYNC_PII_KEYS"):
        render(values)


def test_migrate_runs_as_a_pre_install_and_pre_upgrade_hook(
    rendered: list[dict[str, Any]],
) -> None:
    job = named(rendered, "Job", "sheetsync-migrate")
    hooks = job["metadata"]["annotations"]
    assert set(hooks["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "sheetsync",
        "db",
        "upgrade",
    ]
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    owner = next(e for e in env if e["name"] == "SHEETSYNC_DATABASE_URL")
    assert owner["valueFrom"]["secretKeyRef"]["key"] == "DATABASE_URL_OWNER"
    grants = named(rendered, "Job", "sheetsync-grants")
    assert int(grants["metadata"]["annotations"]["helm.sh/hook-weight"]) > int(
        hooks["helm.sh/hook-weight"]
    )


def test_the_grants_hook_runs_the_repository_s_grants_sql() -> None:
    assert (CHART / "files" / "grants.sql").read_text() == (
        ROOT / "deploy" / "postgres" / "grants.sql"
    ).read_text()


def test_each_worker_queue_has_a_pdb_and_heartbeat_probes(rendered: list[dict[str, Any]]) -> None:
    for node in ("priority", "default", "scheduled"):
        name = f"sheetsync-worker-{node}"
        deployment = named(rendered, "Deployment", name)
        pdb = named(rendered, "PodDisruptionBudget", name)
        assert (
            pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
        )
        pod = deployment["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] == GRACE_S
        (worker,) = pod["containers"]
        assert f"sheetsync_{node}" in worker["command"]
        assert f"{node}@%h" in worker["command"]
        for probe in HEARTBEAT_PROBES:
            command = " ".join(worker[probe]["exec"]["command"])
            assert "sheetsync health --max-age" in command and f'"{node}@$(hostname)"' in command
            assert "inspect" not in command and "ping" not in command


def test_http_probes_on_the_real_endpoints() -> None:
    docs = render(ci_values("all"))
    exporter = named(docs, "Deployment", "sheetsync-exporter")["spec"]["template"]["spec"]
    flower = named(docs, "Deployment", "sheetsync-flower")["spec"]["template"]["spec"]
    console = named(docs, "Deployment", "sheetsync-console")["spec"]["template"]["spec"]
    for probe in HEARTBEAT_PROBES:
        assert exporter["containers"][0][probe]["httpGet"]["path"] == "/metrics"
        assert flower["containers"][0][probe]["httpGet"]["path"] == "/healthcheck"
        command = console["containers"][0][probe]["exec"]["command"]
        assert "http://127.0.0.1:8088/static/console.css" in command[-1]


# -- the probes' commands against a real worker ------------------------------------------


def _worker_probes(extra: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """The default-queue worker's probe commands, as rendered."""
    docs = render(merged(ci_values("default"), extra or {}))
    (worker,) = named(docs, "Deployment", "sheetsync-worker-default")["spec"]["template"]["spec"][
        "containers"
    ]
    return {probe: worker[probe]["exec"]["command"] for probe in HEARTBEAT_PROBES}


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A probe's exec as the kubelet runs it: in the container's environment, with the
    image's `sheetsync` (here the venv's) on PATH."""
    assert shutil.which(command[0])
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        command,
        env={**os.environ, **env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_worker_probes_pass_for_a_live_worker_and_fail_for_a_stopped_one(
    worker_processes: Any,
) -> None:
    probes = _worker_probes()
    # Short maximum ages (values of the chart), so a stopped worker is seen in seconds.
    short = _worker_probes(
        {"worker": {"probes": {"readinessMaxAgeSeconds": 10, "livenessMaxAgeSeconds": 10}}}
    )
    workers = worker_processes()
    env = workers.env
    # Celery's %h and the probe's $(hostname) name the same host: the pod's name there.
    name = f"default@{socket.gethostname()}"
    for command in probes.values():  # nothing started yet: no heartbeat
        assert _run(command, env).returncode != 0
    workers.start(queues=("sheetsync_default",), extra_args=("-n", name))

    wait_until(lambda: _run(probes["startupProbe"], env).returncode == 0, timeout=120, interval=1)
    for probe, command in probes.items():
        result = _run(command, env)
        assert result.returncode == 0, (probe, result.stdout, result.stderr)
        assert name in result.stdout
    for command in short.values():
        assert _run(command, env).returncode == 0

    workers.stop()
    for probe, command in short.items():
        wait_until(lambda c=command: _run(c, env).returncode != 0, timeout=90, interval=1)
        assert "no heartbeat within" in _run(command, env).stdout + _run(command, env).stderr, probe


def test_liveness_does_not_restart_a_worker_for_a_redis_it_cannot_ask() -> None:
    probes = _worker_probes()
    env = {"SHEETSYNC_REDIS_URL": "redis://127.0.0.1:1/0"}  # nothing listens on port 1
    live = _run(probes["livenessProbe"], env)
    assert live.returncode == 0, live.stdout
    assert "cannot reach Redis" in live.stdout
    assert _run(probes["readinessProbe"], env).returncode != 0
    assert _run(probes["startupProbe"], env).returncode != 0


def test_compose_gives_a_stopping_worker_the_same_grace_period() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    workers = {name: spec for name, spec in compose["services"].items() if "worker" in name}
    assert sorted(workers) == ["worker-default", "worker-priority", "worker-scheduled"]
    for spec in workers.values():
        assert spec["stop_grace_period"] == f"{GRACE_S}s"
