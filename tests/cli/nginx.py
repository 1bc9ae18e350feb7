"""Run Debian's nginx with the shipped ``deploy/nginx/fusion-nb.conf`` in front of given worker ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
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
def nginx(
    tmp: Path, workers: list[int], *, worker_processes: str = "1", port: int | None = None, tls: Path | None = None
) -> Iterator[str]:
    """Start nginx (foreground, its own prefix under ``tmp``); yields its base URL.

    ``worker_processes``: 1 for the tests; Debian's own nginx.conf says ``auto`` (one per core).
    ``tls``: a folder with ``cert.pem`` and ``key.pem`` (``self_signed``): nginx then serves
    HTTPS, and the URL is ``https://localhost:PORT``.
    """
    port = port or free_port()
    (tmp / "conf.d").mkdir()
    config = render(port, workers, tmp)
    if tls is not None:
        config = config.replace(
            f"listen 127.0.0.1:{port};",
            f"listen 127.0.0.1:{port} ssl;\n"
            f"    ssl_certificate {tls}/cert.pem;\n    ssl_certificate_key {tls}/key.pem;",
        )
    (tmp / "conf.d" / "fusion-nb.conf").write_text(config)
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
        yield f"https://localhost:{port}" if tls is not None else f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=20)


def self_signed(folder: Path) -> Path:
    """A self-signed certificate for ``localhost`` (openssl), in ``folder``; returns ``folder``."""
    folder.mkdir(exist_ok=True)
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            str(folder / "key.pem"),
            "-out",
            str(folder / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    return folder


def trusting(tls: Path | None) -> ssl.SSLContext | bool:
    """What an HTTP client verifies nginx's certificate with: the ``self_signed`` one, or the system's."""
    return ssl.create_default_context(cafile=str(tls / "cert.pem")) if tls is not None else True


@contextlib.asynccontextmanager
async def behind_nginx(
    tmp: Path,
    *options: str,
    env: dict[str, str],
    source: str = "service_app",
    port: int | None = None,
    tls: Path | None = None,
):
    """Two ``fusion-nb serve SOURCE`` workers behind nginx, once /healthz answers; yields ``(a, b, url)``.

    ``port`` and ``tls`` go to ``nginx`` (``tls``: HTTPS with that folder's self-signed certificate).
    """
    async with (
        served(source, *options, "--worker-name", "w1", env=env) as a,
        served(source, *options, "--worker-name", "w2", env=env) as b,
    ):
        ports = [int(worker.url.rsplit(":", 1)[1].split("/")[0]) for worker in (a, b)]
        (tmp / "nginx").mkdir()
        with nginx(tmp / "nginx", ports, port=port, tls=tls) as base:
            with anyio.fail_after(30):
                async with httpx.AsyncClient(verify=trusting(tls)) as http:
                    while True:
                        with contextlib.suppress(httpx.TransportError):
                            if (await http.get(base + "/healthz")).status_code == 200:
                                break
                        await anyio.sleep(0.05)
            yield a, b, base + "/mcp"
