"""What can be checked of deploy/ without a Docker engine or a cluster (see docs/deploy.md).

The container's command line and the Kubernetes args parse with the real CLI; the
Secret feeds the environment variables the CLI reads; the probes and the image's
HEALTHCHECK hit /healthz, and that health check command succeeds against a served app.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

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


def test_kubernetes_manifests():
    manifests = (REPO / "deploy" / "kubernetes" / "fusion-nb.yaml").read_text()
    documents = {doc["kind"]: doc for doc in yaml.safe_load_all(manifests)}
    assert set(documents) == {"Secret", "Deployment", "Service"}
    deployment = documents["Deployment"]["spec"]
    assert deployment["replicas"] >= 2
    container = deployment["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(["serve", *container["args"]])
    grace = deployment["template"]["spec"]["terminationGracePeriodSeconds"]
    assert args.transport == "http" and args.drain_timeout < grace
    env = {item["name"]: item["valueFrom"]["secretKeyRef"] for item in container["env"]}
    assert set(env) == {TOKEN_ENV, STATE_KEY_ENV}
    secret_keys = set(documents["Secret"]["stringData"])
    assert {ref["key"] for ref in env.values()} == secret_keys
    assert all(ref["name"] == documents["Secret"]["metadata"]["name"] for ref in env.values())
    assert len(documents["Secret"]["stringData"]["state-key"]) >= 32
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert documents["Service"]["spec"]["selector"] == deployment["selector"]["matchLabels"]


@pytest.mark.anyio
async def test_the_images_health_check_command_passes_against_a_served_app():
    check = json.loads(instruction("HEALTHCHECK").split("CMD", 1)[1].strip())
    async with served("service_app") as server:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        script = check[2].replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        done = await anyio.to_thread.run_sync(lambda: subprocess.run([sys.executable, "-c", script], timeout=30))
    assert check[:2] == ["python", "-c"] and done.returncode == 0
