"""deploy/kubernetes: valid manifests that fit together, and a complete kustomization.

Built-in kinds are validated by kubernetes-validate (strict: unknown fields fail) against the
Kubernetes OpenAPI schemas it ships. It knows no CRD, so the ServiceMonitor and the
PrometheusRule are checked here by their required fields and by what they point at; the
PrometheusRule must also equal what deploy/build_prometheusrule.py makes of rules.yml.
No kubectl or kustomize binary is needed.
"""

from __future__ import annotations

import importlib.util
import re
import socket
import ssl
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import kubernetes_validate
import pytest
import trustme
import yaml

from tooltap.addon import options
from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer, Reply

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule", "Issuer", "Certificate"}
# The oldest and newest versions checked: autoscaling/v2 and policy/v1 exist in both.
VERSIONS = ["1.30.0", "1.37.0"]


def kustomization() -> dict:
    return yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text(encoding="utf-8"))


def resources() -> list[dict]:
    return [
        doc
        for name in kustomization()["resources"]
        for doc in yaml.safe_load_all((KUBERNETES / name).read_text(encoding="utf-8"))
        if doc
    ]


def one(kind: str, name: str | None = None) -> dict:
    (found,) = [
        r for r in resources() if r["kind"] == kind and name in (None, r["metadata"]["name"])
    ]
    return found


def deployment() -> dict:
    return one("Deployment", "tooltap")


def container() -> dict:
    (only,) = deployment()["spec"]["template"]["spec"]["containers"]
    return only


def pod_labels() -> dict:
    return deployment()["spec"]["template"]["metadata"]["labels"]


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_every_file_in_the_kustomization_exists_and_every_manifest_is_listed():
    listed = kustomization()["resources"]
    assert len(listed) == len(set(listed))
    for name in listed:
        assert (KUBERNETES / name).is_file(), name
    on_disk = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == set(listed)


def test_the_kustomization_image_name_is_the_one_the_deployment_uses():
    (image,) = kustomization()["images"]
    assert container()["image"].split(":")[0] == image["name"]


@pytest.mark.parametrize("version", VERSIONS)
def test_built_in_kinds_are_valid_against_the_kubernetes_schemas(version):
    checked = 0
    for doc in resources():
        if doc["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(doc, version, strict=True)  # raises on any error
        checked += 1
    assert checked == len([r for r in resources() if r["kind"] not in CUSTOM_KINDS])


def test_the_validator_rejects_an_unknown_field():
    broken = deployment()
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def secret_refs() -> dict[str, dict]:
    """The container's variables that come from a Secret, by name."""
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container()["env"]
        if "secretKeyRef" in e["valueFrom"]
    }


def test_no_secret_ships_and_the_one_read_is_the_optional_hash_key_the_readme_creates():
    text = "\n".join(p.read_text(encoding="utf-8") for p in KUBERNETES.glob("*.yaml"))
    assert all(r["kind"] != "Secret" for r in resources())  # no API key, no placeholder key
    assert text.count("secretKeyRef") == 1
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    create = r"kubectl create secret generic (\S+) -n tooltap --from-literal=(\w+)="
    ((name, key),) = re.findall(rf'^{create}"\$\(openssl rand -hex 32\)"$', readme, re.MULTILINE)
    # Optional: a pod starts without it, under a key of its own.
    assert secret_refs() == {"TOOLTAP_HASH_KEY": {"name": name, "key": key, "optional": True}}


def test_the_listeners_certificate_is_the_secret_cert_manager_writes_mounted_read_only():
    volumes = {v["name"]: v for v in deployment()["spec"]["template"]["spec"]["volumes"]}
    mounted = [m for m in container()["volumeMounts"] if "secret" in volumes[m["name"]]]
    (mount,) = mounted
    secret = volumes[mount["name"]]["secret"]
    assert mount["readOnly"] is True and secret["defaultMode"] & 0o007 == 0
    # certificate.yaml's last Certificate writes that Secret, signed by a CA Issuer.
    (served,) = [c for c in resources() if c["kind"] == "Certificate" and not c["spec"].get("isCA")]
    assert served["spec"]["secretName"] == secret["secretName"]
    assert "tooltap" in served["spec"]["dnsNames"]
    args = container()["args"]
    for flag, file in (("--tls-cert", "tls.crt"), ("--tls-key", "tls.key")):
        assert args[args.index(flag) + 1] == f"{mount['mountPath']}/{file}"
        assert args.index(flag) < args.index("--")  # tooltap's flags, not mitmdump's


def test_the_pod_runs_non_root_on_a_read_only_root_filesystem():
    pod = deployment()["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    security = container()["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]


def test_mitmproxy_confdir_is_on_a_writable_empty_dir():
    args = container()["args"]
    (confdir,) = [a.split("=", 1)[1] for a in args if a.startswith("confdir=")]
    assert args.index(f"confdir={confdir}") > args.index("--"), "mitmdump options go after --"
    empty_dirs = {
        v["name"] for v in deployment()["spec"]["template"]["spec"]["volumes"] if "emptyDir" in v
    }
    assert any(
        m["name"] in empty_dirs and Path(confdir).is_relative_to(m["mountPath"])
        for m in container()["volumeMounts"]
    )


def test_resources_are_requested_and_limited():
    resources_ = container()["resources"]
    assert {"cpu", "memory"} <= set(resources_["requests"])
    assert {"cpu", "memory"} <= set(resources_["limits"])


def test_probes_ask_the_proxy_process_itself_never_the_inspectors_metrics():
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    args = container()["args"]
    health = int(args[args.index("--health") + 1].split(":")[1])
    paths = {"startupProbe": "/readyz", "readinessProbe": "/readyz", "livenessProbe": "/livez"}
    for probe, path in paths.items():
        check = container()[probe]["httpGet"]
        assert check["path"] == path, probe
        assert ports[check["port"]] == health != 9464, probe


def test_the_listen_and_metrics_addresses_match_the_container_ports():
    args = container()["args"]
    listen = int(args[args.index("--listen") + 1].split(":")[1])
    metrics = int(args[args.index("--metrics") + 1].split(":")[1])
    health = int(args[args.index("--health") + 1].split(":")[1])
    upstreams = [args[i + 1] for i, a in enumerate(args[: args.index("--")]) if a == "--upstream"]
    expected = {listen + i for i in range(len(upstreams))} | {metrics, health}
    assert {p["containerPort"] for p in container()["ports"]} == expected


def test_every_option_variable_comes_from_the_configmap():
    env = {
        e["name"]: e["valueFrom"]["configMapKeyRef"]
        for e in container()["env"]
        if "configMapKeyRef" in e["valueFrom"]
    }
    used = {v for a in container()["args"] for v in re.findall(r"\$\((\w+)\)", a)}
    # The rest are read by the process itself: OpenTelemetry's standard variable.
    assert set(env) - used == {"OTEL_EXPORTER_OTLP_ENDPOINT"} and used <= set(env)
    configmap = one("ConfigMap")
    for ref in env.values():
        assert ref["name"] == configmap["metadata"]["name"]
        assert ref["key"] in configmap["data"]


def test_the_configmap_options_have_values_tooltap_accepts():
    data = one("ConfigMap")["data"]
    for name in ("TOOLTAP_MAX_BODY", "TOOLTAP_QUEUE_SIZE"):
        assert int(data[name]) > 0, name
    assert int(data["TOOLTAP_MODEL_LABELS"]) >= 0
    assert data["TOOLTAP_LOG_ARGUMENTS"] in {"raw", "redact", "hash", "omit"}


def test_the_container_args_start_a_real_tooltap_run_with_memory_bounded(tmp_path):
    data = one("ConfigMap")["data"]
    args = [re.sub(r"\$\((\w+)\)", lambda m: data[m.group(1)], a) for a in container()["args"]]
    # Loopback and free ports here; Proxy gives mitmproxy a confdir of its own; the Secret's
    # files are a test CA's.
    base = free_port_pair()
    args[args.index("--listen") + 1] = f"127.0.0.1:{base}"
    args[args.index("--metrics") + 1] = "127.0.0.1:0"
    args[args.index("--health") + 1] = "127.0.0.1:0"
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    for flag in ("--tls-cert", "--tls-key"):
        args[args.index(flag) + 1] = str(tmp_path / Path(args[args.index(flag) + 1]).name)
    upstream = ReplayServer(lambda _seen: Reply(chunks=[b'{"object": "list", "data": []}']))
    args = [upstream.url if a in ("openai", "anthropic") else a for a in args]
    at = args.index(next(a for a in args if a.startswith("confdir=")))
    del args[at - 1 : at + 1]
    # Bodies above the inspection cap are streamed, whatever their framing.
    assert f"stream_large_bodies={data['TOOLTAP_MAX_BODY']}" in args
    argv = [sys.executable, "-m", "tooltap.addon.commands.cli", *args]
    with upstream, Proxy(argv, modes=args.count("--upstream"), has_health=True) as proxy:
        metrics = httpx.get(proxy.metrics_url, timeout=10)
        assert metrics.status_code == 200 and "tooltap_flows_total" in metrics.text
        assert sorted(proxy.ports) == [base, base + 1]
        assert httpx.get(f"{proxy.health_url}readyz", timeout=10).status_code == 200
        # The listeners speak HTTPS with the mounted certificate; plain HTTP is refused.
        trusted = ssl.create_default_context(cafile=None)
        ca.configure_trust(trusted)
        with httpx.Client(verify=trusted, timeout=10) as client:
            answer = client.get(f"https://127.0.0.1:{base}/v1/models")
            assert answer.json() == {"object": "list", "data": []}
        plain = httpx.get(f"http://127.0.0.1:{base}/v1/models", timeout=10)
        assert plain.status_code == 400 and "HTTPS only" in plain.text


def free_port_pair() -> int:
    """A port that is free on loopback with the next one free too (each upstream takes one)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port
    raise RuntimeError("no two consecutive free ports on loopback")


def test_the_proxy_and_metrics_services_select_the_pods_and_named_ports():
    port_names = {p["name"] for p in container()["ports"]}
    proxy, metrics = one("Service", "tooltap"), one("Service", "tooltap-metrics")
    for service in (proxy, metrics):
        assert selects(service["spec"]["selector"], pod_labels())
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    assert {p["targetPort"] for p in metrics["spec"]["ports"]} == {"metrics"}
    assert "metrics" not in {p["targetPort"] for p in proxy["spec"]["ports"]}


def test_the_service_monitor_scrapes_only_the_metrics_service_as_job_tooltap():
    monitor = one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [r for r in resources() if r["kind"] == "Service"]
    chosen = [s for s in services if selects(selector, s["metadata"]["labels"])]
    assert [s["metadata"]["name"] for s in chosen] == ["tooltap-metrics"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in chosen[0]["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert chosen[0]["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "tooltap"


def test_the_autoscaler_scales_the_deployment_on_cpu():
    hpa = one("HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment()["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] == deployment()["spec"]["replicas"]
    assert hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"


def test_the_disruption_budget_covers_the_pods_and_leaves_one_serving():
    pdb = one("PodDisruptionBudget")
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels())
    assert 1 <= pdb["spec"]["minAvailable"] < deployment()["spec"]["replicas"]


def test_the_prometheus_rule_is_generated_from_rules_yml():
    spec = importlib.util.spec_from_file_location(
        "build_prometheusrule", DEPLOY / "build_prometheusrule.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (KUBERNETES / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert committed == module.render(), "run: python deploy/build_prometheusrule.py"
    rule = one("PrometheusRule")
    rules = yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text(encoding="utf-8"))
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"]["groups"] == rules["groups"]


def test_the_replicas_share_their_state_in_the_redis_service_the_manifests_run():
    data = one("ConfigMap")["data"]
    assert options.state_problem(data["TOOLTAP_STATE"]) is None
    assert int(data["TOOLTAP_STATE_TTL"]) >= 1
    where = urlsplit(data["TOOLTAP_STATE"])
    service = one("Service", where.hostname)
    redis = one("Deployment", "tooltap-redis")
    pod = redis["spec"]["template"]
    assert selects(service["spec"]["selector"], pod["metadata"]["labels"])
    (port,) = service["spec"]["ports"]
    (container_,) = pod["spec"]["containers"]
    assert port["port"] == where.port
    assert {p["name"]: p["containerPort"] for p in container_["ports"]} == {
        port["targetPort"]: 6379
    }
    # Not a proxy pod: the proxy Services, the disruption budget and the scrape leave it alone.
    assert not selects(one("Service", "tooltap")["spec"]["selector"], pod["metadata"]["labels"])
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert container_["securityContext"]["readOnlyRootFilesystem"] is True
    assert container_["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container_["args"][:4] == ["--save", "", "--appendonly", "no"]
