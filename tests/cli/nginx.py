"""Run Debian's nginx with the shipped ``deploy/nginx/fusion-nb.conf`` in front of given worker ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
from served import REPO, served

SHIPPED = REPO / "deploy" / "nginx" / "fusion-nb.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def render(listen: int, workers: list[int], logs: Path) -> str:
    """The shipped config with its example ports replaced by the test's and its logs written to ``logs``."""
    text = SHIPPED.read_text()
    assert len(workers) == 2, "the shipped config lists two workers"
    for example, port in zip(("127.0.0.1:8001", "127.0.0.1:8002"), workers, strict=True):
        assert text.count(example) == 2, f"{example}: once in the pool, once in its own upstream"
        text = text.replace(example, f"127.0.0.1:{port}")
    assert "/var/log/nginx/" in text, "the shipped config writes an access log"
    text = text.replace("/var/log/nginx/", f"{logs}/")
    return text.replace("listen 127.0.0.1:8000;", f"listen 127.0.0.1:{listen};")


@contextlib.contextmanager
def nginx(tmp: Path, workers: list[int], *, worker_processes: str = "1") -> Iterator[str]:
    """Start nginx (foreground, its own prefix under ``tmp``); yields its base URL.

    ``worker_processes``: 1 for the tests; Debian's own nginx.conf says ``auto`` (one per core).
    """
    port = free_port()
    (tmp / "conf.d").mkdir()
    (tmp / "conf.d" / "fusion-nb.conf").write_text(render(port, workers, tmp))
    temp = {name: tmp / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    user = "user root;\n" if os.geteuid() == 0 else ""
    (tmp / "nginx.conf").write_text(
        f"{user}daemon off;\nworker_processes {worker_processes};\n"
        f"pid {tmp}/nginx.pid;\nerror_log {tmp}/error.log warn;\n"
        "events { worker_connections 1024; }\n"
        "http {\n  access_log off;\n"
        f"  client_body_temp_path {temp['body']};\n  proxy_temp_path {temp['proxy']};\n"
        f"  fastcgi_temp_path {temp['fastcgi']};\n  uwsgi_temp_path {temp['uwsgi']};\n"
        f"  scgi_temp_path {temp['scgi']};\n"
        f"  include {tmp}/conf.d/*.conf;\n}}\n"
    )
    check = subprocess.run([NGINX, "-t", "-p", str(tmp), "-c", str(tmp / "nginx.conf")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    process = subprocess.Popen([NGINX, "-p", str(tmp), "-c", str(tmp / "nginx.conf")])
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=20)


@contextlib.asynccontextmanager
async def behind_nginx(tmp: Path, *options: str, env: dict[str, str], source: str = "service_app"):
    """Two ``fusion-nb serve SOURCE`` workers behind nginx, once /healthz answers; yields ``(a, b, url)``."""
    async with (
        served(source, *options, "--worker-name", "w1", env=env) as a,
        served(source, *options, "--worker-name", "w2", env=env) as b,
    ):
        ports = [int(worker.url.rsplit(":", 1)[1].split("/")[0]) for worker in (a, b)]
        (tmp / "nginx").mkdir()
        with nginx(tmp / "nginx", ports) as base:
            with anyio.fail_after(30):
                async with httpx.AsyncClient() as http:
                    while True:
                        with contextlib.suppress(httpx.TransportError):
                            if (await http.get(base + "/healthz")).status_code == 200:
                                break
                        await anyio.sleep(0.05)
            yield a, b, base + "/mcp"
