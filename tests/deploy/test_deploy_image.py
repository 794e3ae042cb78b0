"""deploy/Dockerfile built and run, as the compose stack and the Kubernetes Deployment run it.

No Docker engine runs on the test machines, so the image is built and run with Debian's podman
(runc as the runtime) in a store of this test's own, removed at the end. The base is a Debian
trixie root filesystem made by mmdebstrap and passed as the Dockerfile's BASE; users keep the
default, the official python:3.12-slim. `--format docker` keeps the HEALTHCHECK (OCI drops it).

The image then: holds the hot modules compiled (its build stage's gcc comes from apt) and not the
tools that compiled them; runs as uid 10001; starts its default command, compose.yaml's and the
Kubernetes Deployment's (read-only root, no capabilities), each of which its own HEALTHCHECK finds
healthy (in a network of its own: 0.0.0.0 never reaches this machine's interfaces); and, as
`tooltap run` on this machine's loopback, forwards exchanges byte for byte, logs a `turn` line for
each and counts them on /metrics.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from support.installed import check_reported, send_through
from support.scenarios import route

from tooltap.addon.harness.launch import Proxy
from tooltap.addon.harness.replay import ReplayServer

# The first test's setup builds the image (a root filesystem, then pip and the compiled build
# inside it): 3-5 minutes on two cores shared with the other tests, each step bounded by its
# own subprocess timeout below, so the suite's 300 s would cut a build that is only slow.
pytestmark = pytest.mark.timeout(1800)

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/tooltap:test"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# This machine's podman needs these: no systemd (cgroupfs), no ulimit defaults it may not set,
# and runc (crun refuses the hybrid cgroup layout).
CONTAINERS_CONF = """\
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
"""


@dataclass
class Podman:
    """podman on a store of its own."""

    home: Path
    run: Path  # podman refuses a runroot path longer than 50 characters

    @property
    def argv(self) -> list[str]:
        return ["podman", "--root", str(self.home / "root"), "--runroot", str(self.run)]

    @property
    def env(self) -> dict[str, str]:
        return {"CONTAINERS_CONF": str(self.home / "containers.conf")}

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.argv, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **self.env},
        )

    def ok(self, *args: str, timeout: float = 120) -> str:
        done = self(*args, timeout=timeout)
        assert done.returncode == 0, f"podman {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout


@dataclass
class Image:
    podman: Podman
    name: str
    size: int
    build_seconds: float


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    missing = [tool for tool in ("podman", "runc", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"install Debian's {' '.join(missing)} (./dev test does) to build the image")
    home = tmp_path_factory.mktemp("podman")
    (home / "containers.conf").write_text(CONTAINERS_CONF, encoding="utf-8")
    podman = Podman(home, Path(tempfile.mkdtemp(prefix="tooltap-podman-")))
    started = time.monotonic()
    rootfs = home / "rootfs.tar"
    made = subprocess.run(
        [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            # python3-dev: the headers the compiled build needs (python:*-slim carries its own)
            "--include=python3,python3-venv,python3-dev,python-is-python3,ca-certificates",
            "trixie",
            str(rootfs),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    try:
        podman.ok("import", str(rootfs), "localhost/tooltap-base:test")
        rootfs.unlink()
        build = ["build", "--layers=false", "--format", "docker", "--network", "host"]
        if CA_BUNDLE.exists():  # pip inside the build trusts what this machine trusts
            build += ["-v", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"]
        podman.ok(
            *build,
            "--build-arg",
            "BASE=localhost/tooltap-base:test",
            "-f",
            str(ROOT / "deploy/Dockerfile"),
            "-t",
            IMAGE,
            str(ROOT),
            timeout=900,
        )
        built = time.monotonic() - started
        (details,) = json.loads(podman.ok("image", "inspect", IMAGE))
        yield Image(podman, IMAGE, int(details["Size"]), built)
    finally:
        podman("system", "reset", "--force", timeout=300)
        shutil.rmtree(podman.run, ignore_errors=True)


def test_the_image_keeps_its_healthcheck_and_user(image):
    (details,) = json.loads(image.podman.ok("image", "inspect", image.name))
    assert details["Healthcheck"]["Test"][:3] == ["CMD", "python", "-c"]
    assert details["Config"]["User"] == "10001:10001"
    assert details["Config"]["Entrypoint"] == ["tooltap"]
    print(f"built in {image.build_seconds:.0f} s (base included); {image.size / 1e6:.0f} MB")


def test_the_images_hot_modules_are_compiled_and_its_build_tools_left_behind(image):
    """The build stage compiles the modules setup.py lists (its gcc from apt: the base has
    none); the runtime stage gets the extensions and none of the tools that made them."""
    shown = image.podman.ok(
        "run", "--rm", "--network", "none", "--entrypoint", "python", image.name, "-c",
        "import importlib.util as u, shutil; import tooltap.core.inspection as m, "
        "tooltap.addon.inspection.session as s; "
        "print(m.__file__, s.__file__, u.find_spec('mypy'), shutil.which('gcc'))",
    )  # fmt: skip
    inspection, session, mypy, gcc = shown.split()
    assert inspection.endswith(".so") and "/core/inspection." in inspection, shown
    assert session.endswith(".so"), shown
    assert (mypy, gcc) == ("None", "None"), shown


def test_the_image_runs_as_uid_10001(image):
    ran = image.podman.ok("run", "--rm", "--network", "none", "--entrypoint", "id", image.name)
    assert ran.split()[:2] == ["uid=10001(tooltap)", "gid=10001(tooltap)"]


def test_compose_makes_the_replicas_key_as_root_once_and_a_replica_reads_it_as_its_user(
    image, tmp_path
):
    """compose's hash-key service run as compose runs it, on a folder standing for its volume,
    twice; then the replicas' user reads the key through TOOLTAP_HASH_KEY_FILE, read-only."""
    services = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())["services"]
    maker, replica = services["hash-key"], services["tooltap-replica"]
    (volume,) = maker["volumes"]
    flags = [f"--user={maker['user']}", f"--network={maker['network_mode']}"]
    flags += [f"--cap-drop={cap}" for cap in maker["cap_drop"]]
    flags += [f"--security-opt={option}" for option in maker["security_opt"]]
    flags += [f"--volume={tmp_path}:{volume.split(':')[1]}"]
    entry, *args = maker["entrypoint"]
    for _ in range(2):
        image.podman.ok("run", "--rm", *flags, "--entrypoint", entry, image.name, *args)
    key = (tmp_path / "hash-key").read_text()
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    (mount,) = replica["volumes"]
    read = image.podman.ok(
        "run", "--rm", "--network", "none", f"--volume={tmp_path}:{mount.split(':', 1)[1]}",
        f"--env=TOOLTAP_HASH_KEY_FILE={replica['environment']['TOOLTAP_HASH_KEY_FILE']}",
        "--entrypoint", "python", image.name, "-c",
        "from tooltap.addon.sinks.redaction import hash_key; print(hash_key().decode())",
    )  # fmt: skip
    assert read.strip() == key


def compose_container() -> tuple[list[str], list[str]]:
    """compose.yaml's tooltap service: `podman run` flags, and the image and its arguments."""
    service = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())["services"]["tooltap"]
    flags = [f"--cap-drop={cap}" for cap in service["cap_drop"]]
    flags += [f"--security-opt={option}" for option in service["security_opt"]]
    return flags, [IMAGE, *service["command"]]


def kubernetes_container() -> tuple[list[str], list[str]]:
    """deployment.yaml's container as the kubelet starts it: $(VAR)s from the ConfigMap, the
    pod's user, a read-only root with /tmp an emptyDir, no capabilities, no privilege gain."""
    options = yaml.safe_load((ROOT / "deploy/kubernetes/configmap.yaml").read_text())["data"]
    deployment = yaml.safe_load((ROOT / "deploy/kubernetes/deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    assert mounts == ["/tmp", "/etc/tooltap/tls"]
    # The hash key's Secret is optional and not created here: the kubelet leaves it unset.
    env = {
        e["name"]: options[e["valueFrom"]["configMapKeyRef"]["key"]]
        for e in container["env"]
        if "configMapKeyRef" in e["valueFrom"]
    }
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg) for arg in container["args"]]
    flags = [
        f"--user={pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}",
        "--read-only",
        "--tmpfs=/tmp:rw,size=64m,mode=1777",
        "--security-opt=no-new-privileges",
        *(f"--cap-drop={cap}" for cap in security["capabilities"]["drop"]),
        *(f"--env={name}={value}" for name, value in env.items()),
        # The TLS Secret cert-manager writes: a test CA's certificate and key here.
        f"--volume={listener_certificate()}:{mounts[1]}:ro",
    ]
    return flags, [IMAGE, *args]


def listener_certificate() -> Path:
    """A folder with tls.crt and tls.key, readable by the container's user."""
    import trustme

    folder = Path(tempfile.mkdtemp(prefix="tooltap-tls-"))
    leaf = trustme.CA().issue_cert("tooltap", "127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    leaf.private_key_pem.write_to_path(str(folder / "tls.key"))
    for path in (folder, folder / "tls.crt", folder / "tls.key"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


CONTAINERS = {
    "the image's default command": ([], [IMAGE]),
    "compose.yaml's service": compose_container(),
    "the Kubernetes Deployment's container": kubernetes_container(),
}


@pytest.mark.parametrize("how", CONTAINERS)
def test_the_container_starts_and_the_images_healthcheck_finds_it_healthy(image, how):
    name = f"tooltap-test-{uuid.uuid4().hex[:8]}"
    flags, command = CONTAINERS[how]
    # A network of its own: these listen on 0.0.0.0, and the healthcheck runs inside the
    # container. The interval is off: the check is run here, not by a systemd timer.
    image.podman.ok(
        "run", "--detach", "--name", name, "--network", "none", "--health-interval", "disable",
        *flags, *command,
    )  # fmt: skip
    try:
        deadline, health = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            health = image.podman("healthcheck", "run", name)
            if health.returncode == 0:
                break
            time.sleep(0.5)
        logs = image.podman("logs", name)
        assert health is not None and health.returncode == 0, logs.stdout + logs.stderr
        top = image.podman.ok("top", name, "user", "args")
        assert {line.split()[0] for line in top.splitlines()[1:]} == {"tooltap"}
        stopped = time.monotonic()
        image.podman.ok("stop", "--time", "20", name)
        assert time.monotonic() - stopped < 10  # SIGTERM stops it; it is not left to the kill
        state = json.loads(image.podman.ok("inspect", name))[0]["State"]
        assert state["ExitCode"] == 0
        logs = image.podman("logs", name)
        assert "listening at *:8080" in logs.stdout + logs.stderr
        assert "tooltap metrics at http://0.0.0.0:9464/metrics" in logs.stdout + logs.stderr
        assert "tooltap health at http://0.0.0.0:9465/" in logs.stdout + logs.stderr
        assert "Traceback" not in logs.stdout + logs.stderr
        # Unhealthy once the proxy is gone (the container has stopped).
        assert image.podman("healthcheck", "run", name).returncode != 0
    finally:
        image.podman("rm", "--force", name)


def test_tooltap_run_in_the_image_forwards_logs_and_counts_exchanges(image):
    name = f"tooltap-test-{uuid.uuid4().hex[:8]}"
    container = (*image.podman.argv, "run", "--rm", "--name", name, "--network", "host")
    with ReplayServer(route) as upstream:
        proxy = Proxy.tooltap(
            [upstream.url], "--log-format", "json", tooltap=(*container, image.name),
            env=image.podman.env,
        )  # fmt: skip
        try:
            with proxy:
                send_through(proxy, upstream.url)
                assert proxy.metrics_url is not None
                check_reported(proxy, proxy.metrics_url)
            assert proxy.process is not None and proxy.process.returncode == 0
        finally:
            image.podman("rm", "--force", name)
