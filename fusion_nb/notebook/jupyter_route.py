"""The notebook's endpoint through the Jupyter server its kernel runs under, and the configs for it.

jupyter_server tells its kernels nothing about its URL, but it writes ``jpserver-{pid}.json``
(its URL, base URL, root directory and token) into Jupyter's runtime directory, and a kernel it
starts is its child: the file of ``os.getppid()`` is this kernel's server. On JupyterHub the
single-user server's own URL is internal; the public one comes from the environment the hub's
spawner sets (``JUPYTERHUB_PUBLIC_URL`` when the hub knows it, else ``JUPYTERHUB_HOST`` with
``JUPYTERHUB_SERVICE_PREFIX``), and the credential is a hub API token (``{hub}/hub/token``).
Binder runs a JupyterHub, so the same applies there (``BINDER_LAUNCH_HOST`` names the launcher).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urljoin

from ..mcp import client_config


@dataclass(frozen=True)
class JupyterRoute:
    """The MCP URL through the Jupyter server; ``token`` None when a hub token is needed instead."""

    url: str
    token: str | None
    hub: str | None = None  # the hub's URL (where a person makes an API token), on JupyterHub
    root: str | None = None  # the server's root directory (where jupyter-ai stops looking for .jupyter)


def jupyter_route(notebook: str) -> JupyterRoute | None:
    """The route to ``notebook``'s endpoint through this kernel's Jupyter server, or None outside one."""
    from jupyter_core.paths import jupyter_runtime_dir

    try:
        info = json.loads((Path(jupyter_runtime_dir()) / f"jpserver-{os.getppid()}.json").read_text())
        root, url = str(info["root_dir"]), str(info["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    relative = os.path.relpath(os.path.abspath(notebook), root)
    if relative.startswith(".."):
        return None  # outside the server's root: the extension cannot name it
    path = "fusion/mcp/" + quote(relative.replace(os.sep, "/"))
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
    if prefix:
        public = os.environ.get("JUPYTERHUB_PUBLIC_URL") or os.environ.get("JUPYTERHUB_HOST") or ""
        base = urljoin(public, prefix) if public else prefix
        hub = urljoin(public, os.environ.get("JUPYTERHUB_BASE_URL", "/") + "hub/") if public else None
        return JupyterRoute(base.rstrip("/") + "/" + path, None, hub, root)
    return JupyterRoute(url.rstrip("/") + "/" + path, info.get("token") or None, root=root)


def route_configs(route: JupyterRoute, *, hide_token: bool) -> str:
    """What ``%fusion serve`` prints for the Jupyter route: URL, credential, and three hosts' configs."""
    if route.token is None:
        where = f"{route.hub}token" if route.hub else "your hub's /hub/token page"
        token, line = "HUB_TOKEN", f"Credential: a JupyterHub API token (make one at {where}), shown as HUB_TOKEN."
    elif hide_token:
        token, line = "JUPYTER_TOKEN", "Credential: this Jupyter server's token (hidden; jupyter server list shows it)."
    else:
        token, line = route.token, f"Credential: this Jupyter server's token: {route.token}"
    reach = "any machine your browser reaches this Jupyter server from"
    if route.url.startswith("/"):
        reach = "the hub's public address followed by this path (the hub did not say its address)"
    vscode = {
        "servers": {
            client_config.SERVER_NAME: {
                "type": "http",
                "url": route.url,
                "headers": {"Authorization": f"token {token}"},
            }
        }
    }
    claude = {
        "mcpServers": {
            client_config.SERVER_NAME: client_config.launch(["connect", route.url], {client_config.TOKEN_ENV: token})
        }
    }
    return "\n".join(
        [
            "",
            f"Through the Jupyter server (reachable from {reach}): {route.url}",
            line,
            "It follows the notebook: after a kernel restart, %fusion serve again and the same URL serves.",
            "",
            "Claude Code:",
            f'claude mcp add --transport http {client_config.SERVER_NAME} {route.url} --header "Authorization: token '
            f'{token}"',
            "",
            "VS Code (.vscode/mcp.json) through Jupyter:",
            json.dumps(vscode, indent=2),
            "",
            "Claude Desktop (claude_desktop_config.json) through Jupyter:",
            json.dumps(claude, indent=2),
            "",
            "The loopback endpoint above serves agents on the machine the kernel runs on; the Jupyter URL, "
            "agents anywhere that reach this Jupyter server.",
        ]
    )
