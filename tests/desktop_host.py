"""Launch a printed client config the way a desktop host does, to prove it works as pasted.

Claude Desktop starts ``command`` + ``args`` itself: no activated venv, nothing of the
terminal's environment that printed the config, its own working directory. So the
entry runs under ``env -i`` with only the entry's own ``env``, in ``/``. A URL entry
(VS Code) is connected to with exactly its ``url`` and ``headers``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp import Client, StdioServerParameters

from fusion_nb.mcp import connect
from fusion_nb.mcp.client_config import printed_configs

CLAUDE = "Claude Desktop (claude_desktop_config.json)"
VSCODE = "VS Code (.vscode/mcp.json)"


def entry_of(text: str, heading: str = CLAUDE) -> dict[str, Any]:
    """The one server entry under ``heading`` in printed text (``mcpServers`` or VS Code's ``servers``)."""
    config = printed_configs(text)[heading]
    (entry,) = (config.get("mcpServers") or config["servers"]).values()
    return dict(entry)


def host_launch(entry: dict[str, Any]) -> StdioServerParameters:
    """``env -i [the entry's env] command args`` in ``/``: nothing inherited from this test's process."""
    assert entry["command"].startswith("/"), f"a host has no PATH to find {entry['command']!r} on"
    pairs = [f"{name}={value}" for name, value in entry.get("env", {}).items()]
    return StdioServerParameters(command="/usr/bin/env", args=["-i", *pairs, entry["command"], *entry["args"]], cwd="/")


@contextlib.asynccontextmanager
async def host_client(entry: dict[str, Any], mode: str = "auto") -> AsyncIterator[Client]:
    """An SDK client on a printed entry: a stdio entry launched as a host would, or a URL entry with its headers."""
    if "url" in entry:
        async with connect(entry["url"], headers=entry.get("headers"), mode=mode) as client:
            yield client
    else:
        async with Client(host_launch(entry), mode=mode) as client:
            yield client
