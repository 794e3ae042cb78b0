"""deploy/compose.yaml: valid against the Compose Specification, and wired together.

The schema is the compose-spec JSON schema that check-jsonschema vendors and keeps current
(`--builtin-schema vendor.compose-spec`). The wiring checks are what a schema cannot see:
mounted paths exist, the services find each other, and nothing is published beyond loopback.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from tooltap.addon import options

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "compose.yaml"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_compose_file_is_valid_against_the_compose_spec_schema():
    result = check_jsonschema(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_misspelt_key(tmp_path):
    broken = tmp_path / "compose.yaml"
    broken.write_text(
        COMPOSE.read_text(encoding="utf-8").replace("restart:", "restrat:"), encoding="utf-8"
    )
    result = check_jsonschema(broken)
    assert result.returncode != 0
    assert "restrat" in result.stdout + result.stderr


def test_the_stack_is_tooltap_prometheus_and_grafana_with_an_optional_collector():
    services = compose()["services"]
    assert set(services) == {
        "tooltap",
        "prometheus",
        "grafana",
        "otel-collector",
        "tooltap-replica",
        "redis",
        "balancer",
    }
    assert {name: s["profiles"] for name, s in services.items() if s.get("profiles")} == {
        "otel-collector": ["traces"],
        "tooltap-replica": ["replicas"],
        "redis": ["replicas"],
        "balancer": ["replicas"],
    }
    collector = yaml.safe_load((DEPLOY / "otel-collector.yaml").read_text())
    assert collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    assert collector["service"]["pipelines"]["traces"]["receivers"] == ["otlp"]
    # Off unless the standard variable is set; the collector listens where it points.
    assert services["tooltap"]["environment"] == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "${OTEL_EXPORTER_OTLP_ENDPOINT:-}"
    }


def test_tooltap_is_built_from_the_repository_with_the_deploy_dockerfile():
    build = compose()["services"]["tooltap"]["build"]
    context = (DEPLOY / build["context"]).resolve()
    assert (context / "pyproject.toml").is_file()
    assert (context / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_every_published_port_binds_loopback_only():
    for name, service in compose()["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_every_bind_mount_source_exists():
    for name, service in compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source} is missing"


def mounts(service: str) -> dict[str, Path]:
    """Container path -> host path, for the bind mounts of one service."""
    found = {}
    for volume in compose()["services"][service].get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            found[target] = (DEPLOY / source).resolve()
    return found


def test_prometheus_gets_deploy_prometheus_and_scrapes_the_tooltap_service():
    service = compose()["services"]["prometheus"]
    config_flag = next(a for a in service["command"] if a.startswith("--config.file="))
    container_path = config_flag.split("=", 1)[1]
    host_dir = mounts("prometheus")[str(Path(container_path).parent)]
    assert host_dir == DEPLOY / "prometheus"
    config = yaml.safe_load((host_dir / Path(container_path).name).read_text(encoding="utf-8"))
    target = config["scrape_configs"][0]["static_configs"][0]["targets"][0]
    host, port = target.split(":")
    assert host == "tooltap"
    assert f"0.0.0.0:{port}" in compose()["services"]["tooltap"]["command"]


def test_grafana_is_provisioned_from_grafana_and_finds_prometheus():
    root = DEPLOY.parent / "grafana"
    grafana_mounts = mounts("grafana")
    assert grafana_mounts["/etc/grafana/provisioning"] == root / "provisioning"
    datasources = yaml.safe_load(
        (root / "provisioning" / "datasources" / "prometheus.yml").read_text(encoding="utf-8")
    )["datasources"]
    assert datasources[0]["url"] == "http://prometheus:9090"
    providers = yaml.safe_load(
        (root / "provisioning" / "dashboards" / "tooltap.yml").read_text(encoding="utf-8")
    )["providers"]
    dashboards = grafana_mounts[providers[0]["options"]["path"]]
    assert (dashboards / "tooltap.json").is_file()
    home = compose()["services"]["grafana"]["environment"][
        "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"
    ]
    assert (grafana_mounts[str(Path(home).parent)] / Path(home).name).is_file()


def test_the_tooltap_command_listens_inside_the_container_and_publishes_each_upstream():
    service = compose()["services"]["tooltap"]
    command = service["command"]
    assert command[:5] == ["run", "--listen", "0.0.0.0:8080", "--metrics", "0.0.0.0:9464"]
    upstreams = [command[i + 1] for i, arg in enumerate(command) if arg == "--upstream"]
    published = {port.rsplit(":", 1)[1] for port in service["ports"]}
    # Each further --upstream listens on the next port.
    assert {str(8080 + i) for i in range(len(upstreams))} | {"9464"} == published


def test_the_compose_tooltap_streams_bodies_above_the_inspection_cap():
    command = compose()["services"]["tooltap"]["command"]
    mitmdump_options = command[command.index("--") + 1 :]
    at = mitmdump_options.index("stream_large_bodies=8m")  # 8 MiB: tooltap_max_body's default
    assert mitmdump_options[at - 1] == "--set"


def test_the_replicas_profile_runs_two_replicas_sharing_redis_behind_one_port_each():
    services = compose()["services"]
    replica, redis, balancer = (services[n] for n in ("tooltap-replica", "redis", "balancer"))
    assert replica["deploy"]["replicas"] == 2
    assert replica["image"] == services["tooltap"]["image"]  # the image tooltap builds
    command = replica["command"]
    # The single tooltap's command, with the shared state: the replicas differ in nothing else.
    assert command[: command.index("--")] == [
        *services["tooltap"]["command"][: services["tooltap"]["command"].index("--")],
        "--state",
        "redis://redis:6379/0",
    ]
    assert options.state_problem(command[command.index("--state") + 1]) is None
    assert "ports" not in replica  # reached through the balancer only
    assert {"--save", "--appendonly"} <= set(redis["command"]) and "ports" not in redis
    assert set(replica["depends_on"]) == {"tooltap", "redis"}
    # The balancer sends each of its ports to the replicas' port for that upstream.
    config = (DEPLOY / "balancer.conf").read_text(encoding="utf-8")
    assert mounts("balancer") == {"/etc/nginx/conf.d/default.conf": DEPLOY / "balancer.conf"}
    upstreams = dict(re.findall(r"upstream (\w+) \{\s*server tooltap-replica:(\d+);", config))
    listens = re.findall(r"listen (\d+);\s*location / \{\s*proxy_pass http://(\w+);", config)
    assert {port: upstreams[name] for port, name in listens} == {"8080": "8080", "8081": "8081"}
    assert {p.split(":", 1)[1] for p in balancer["ports"]} == {"8090:8080", "8091:8081"}
    assert "proxy_buffering off;" in config and "proxy_request_buffering off;" in config
    # Prometheus finds each replica by name.
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = prometheus["scrape_configs"]
    assert job["dns_sd_configs"] == [{"names": ["tooltap-replica"], "type": "A", "port": 9464}]
