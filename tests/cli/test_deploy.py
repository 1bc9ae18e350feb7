"""What can be checked of deploy/ without a Docker engine or a cluster (see docs/deploy.md).

The container's command line and the Kubernetes args parse with the real CLI; the
Secret feeds the environment variables the CLI reads; the probes and the image's
HEALTHCHECK hit /healthz, and that health check command succeeds against a served app;
the replicas' task-store URL, expanded as Kubernetes does, reaches the cluster's Redis with
the Secret's password, and that Redis is reachable only in the cluster, from fusion-nb's pods.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from urllib.parse import urlsplit

import anyio
import pytest
import yaml
from served import REPO, served

from fusion_nb.cli import build_parser
from fusion_nb.cli.keys import STATE_KEY_ENV
from fusion_nb.cli.serve import TOKEN_ENV

DOCKERFILE = (REPO / "deploy" / "Dockerfile").read_text()


def instruction(name: str) -> str:
    joined = DOCKERFILE.replace("\\\n", " ")  # continuation lines
    lines = re.findall(rf"^{name} (.*)$", joined, flags=re.M)
    assert len(lines) == 1, name
    return lines[0]


def test_the_image_runs_fusion_nb_serve_as_a_non_root_user():
    command = json.loads(instruction("ENTRYPOINT")) + json.loads(instruction("CMD"))
    assert command[:2] == ["fusion-nb", "serve"]
    args = build_parser().parse_args(command[1:])
    assert (args.transport, args.host, args.port) == ("http", "0.0.0.0", 8000)
    user = instruction("USER")
    assert user not in ("root", "0") and f"--uid {10001}" in DOCKERFILE


@pytest.mark.timeout(600)
def test_what_the_image_copies_before_pip_install_builds_the_package(tmp_path):
    """No Docker engine here: the build stage's COPYs are replayed into a folder and built as pip would."""
    import shutil
    import zipfile

    build_stage = DOCKERFILE.split("RUN pip install .", 1)[0]
    for line in re.findall(r"^COPY (.*)$", build_stage, flags=re.M):
        *sources, target = line.split()
        for source in map(REPO.joinpath, sources):
            into = tmp_path / source.name if target.rstrip("/") == "." else tmp_path / target
            (shutil.copytree if source.is_dir() else shutil.copy)(source, into)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "fusion_nb/widgets/__init__.py" in names and "fusion_nb/engine/_backends/__init__.py" in names


TASK_STORE_ENV = "FUSION_NB_TASK_STORE"  # the task store's variable (docs/tasks-across-workers.md)


def manifests() -> dict[tuple[str, str], dict]:
    text = (REPO / "deploy" / "kubernetes" / "fusion-nb.yaml").read_text()
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in yaml.safe_load_all(text)}


def expanded(value: str, defined: dict[str, str]) -> str:
    """``value`` with ``$(NAME)`` replaced as Kubernetes does: only by variables defined before it."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda ref: defined.get(ref[1], ref[0]), value)


def test_kubernetes_manifests():
    documents = manifests()
    assert set(documents) == {
        ("Secret", "fusion-nb"),
        ("Deployment", "fusion-nb"),
        ("Service", "fusion-nb"),
        ("Deployment", "fusion-nb-redis"),
        ("Service", "fusion-nb-redis"),
        ("NetworkPolicy", "fusion-nb-redis"),
    }
    secret = documents["Secret", "fusion-nb"]
    deployment = documents["Deployment", "fusion-nb"]["spec"]
    assert deployment["replicas"] >= 2
    container = deployment["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(["serve", *container["args"]])
    grace = deployment["template"]["spec"]["terminationGracePeriodSeconds"]
    assert args.transport == "http" and args.drain_timeout < grace
    env = {item["name"]: item["valueFrom"]["secretKeyRef"] for item in container["env"] if "valueFrom" in item}
    assert set(env) == {TOKEN_ENV, STATE_KEY_ENV, "REDIS_PASSWORD"}
    secret_keys = set(secret["stringData"])
    assert {ref["key"] for ref in env.values()} == secret_keys
    assert all(ref["name"] == secret["metadata"]["name"] for ref in env.values())
    assert len(secret["stringData"]["state-key"]) >= 32
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert documents["Service", "fusion-nb"]["spec"]["selector"] == deployment["selector"]["matchLabels"]


def test_every_replica_reaches_the_clusters_redis_with_the_secrets_password():
    documents = manifests()
    secret = documents["Secret", "fusion-nb"]["stringData"]
    container = documents["Deployment", "fusion-nb"]["spec"]["template"]["spec"]["containers"][0]
    defined: dict[str, str] = {}
    for item in container["env"]:  # in order: a reference sees only the variables above it
        reference = item.get("valueFrom", {}).get("secretKeyRef")
        defined[item["name"]] = secret[reference["key"]] if reference else expanded(item["value"], defined)
    store = urlsplit(defined[TASK_STORE_ENV])
    service = documents["Service", "fusion-nb-redis"]
    assert (store.scheme, store.hostname, store.port) == (
        "redis",
        "fusion-nb-redis",
        service["spec"]["ports"][0]["port"],
    )
    assert store.password == secret["redis-password"] and store.password.isalnum()  # needs no percent-encoding
    assert store.path == "/0"

    redis = documents["Deployment", "fusion-nb-redis"]["spec"]
    pod = redis["template"]
    (server,) = pod["spec"]["containers"]
    password_ref = {item["name"]: item["valueFrom"]["secretKeyRef"]["key"] for item in server["env"]}
    argv = server["args"]
    assert password_ref[argv[argv.index("--requirepass") + 1].strip("$()")] == "redis-password"
    assert argv[argv.index("--save") + 1] == "" and argv[argv.index("--appendonly") + 1] == "no"  # tasks: no disk
    assert server["resources"]["limits"]["memory"] and redis["replicas"] == 1
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True

    # inside the cluster only, and only from fusion-nb's pods
    assert service["spec"].get("type", "ClusterIP") == "ClusterIP" and "nodePort" not in str(service)
    assert service["spec"]["selector"] == redis["selector"]["matchLabels"] == pod["metadata"]["labels"]
    assert all("hostPort" not in port for port in server["ports"])
    policy = documents["NetworkPolicy", "fusion-nb-redis"]["spec"]
    assert policy["podSelector"]["matchLabels"] == pod["metadata"]["labels"] and policy["policyTypes"] == ["Ingress"]
    (allowed,) = policy["ingress"]
    fusion_pods = documents["Deployment", "fusion-nb"]["spec"]["template"]["metadata"]["labels"]
    assert allowed["from"] == [{"podSelector": {"matchLabels": fusion_pods}}]
    assert allowed["ports"] == [{"protocol": "TCP", "port": 6379}]


@pytest.mark.anyio
async def test_the_images_health_check_command_passes_against_a_served_app():
    check = json.loads(instruction("HEALTHCHECK").split("CMD", 1)[1].strip())
    async with served("service_app") as server:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        script = check[2].replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        done = await anyio.to_thread.run_sync(lambda: subprocess.run([sys.executable, "-c", script], timeout=30))
    assert check[:2] == ["python", "-c"] and done.returncode == 0
