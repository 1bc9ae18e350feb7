"""Client configuration that works as pasted into a desktop host (Claude Desktop, VS Code, MCP Inspector).

A desktop host launches a stdio server itself, with its own small environment (no activated
venv, so no ``fusion-nb`` on ``PATH``) and an unrelated working directory. Every command
printed here is therefore absolute: this interpreter's own ``fusion-nb`` script (it sits
next to ``sys.executable``; its shebang names that interpreter), else ``python -m fusion_nb``
with the absolute interpreter. Paths are made absolute, never resolved through symlinks:
a venv's ``python`` is a symlink, and the real file outside the venv has no fusion-nb.

A bearer token travels in the config's ``env`` (``FUSION_NB_TOKEN``, read by ``fusion-nb
connect``), not on the command line, where every other user's ``ps`` would show it.

``%fusion serve`` and ``fusion-nb serve --transport http`` print the same text
(``http_configs``); ``fusion-nb check`` prints ``stdio_config`` for its source.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the environment variable a bearer token is read from (``fusion-nb serve``, ``connect``, ``%fusion serve``)
TOKEN_ENV = "FUSION_NB_TOKEN"


def new_token() -> str:
    """A fresh bearer token (32 random bytes, URL-safe) that a command line can carry as it is.

    ``secrets.token_urlsafe`` begins with ``-`` one time in 64, and ``--token -x...`` is then
    read by argparse (``fusion-nb connect URL --token "$TOKEN"``) as a missing value.
    """
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


#: the MCP Inspector release printed (pinned: an unpinned npx resolves to 0.15 on Node 20, which has no --header);
#: tests/interop pins and runs the same one
INSPECTOR_VERSION = "2.12.0"
#: what a hidden token reads as in printed configs (the stored notebooks' placeholder too)
HIDDEN = "TOKEN"
SERVER_NAME = "fusion-nb"


def fusion_nb_command() -> list[str]:
    """The absolute command that starts ``fusion-nb`` from this environment, activated or not."""
    interpreter = Path(os.path.abspath(sys.executable))  # abspath, not resolve: keep the venv's symlink
    script = interpreter.parent / "fusion-nb"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(interpreter), "-m", "fusion_nb"]


def launch(args: Sequence[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """One stdio server entry (``command``, ``args``, optional ``env``) running ``fusion-nb ARGS``."""
    command, *prefix = fusion_nb_command()
    entry: dict[str, Any] = {"command": command, "args": [*prefix, *args]}
    if env:
        entry["env"] = dict(env)
    return entry


def stdio_config(source: str, name: str = SERVER_NAME) -> dict[str, Any]:
    """Claude Desktop's entry serving SOURCE over stdio: ``fusion-nb serve /absolute/SOURCE``.

    A file source (``.ipynb`` / ``.py``, with an optional ``:app``) becomes absolute; a
    module source stays a name, and the current folder goes on ``PYTHONPATH`` when the
    module lives there (``fusion-nb`` imports from its working directory; the host starts
    in another one).
    """
    location, sep, app = source.rpartition(":")
    if not sep or not app.isidentifier():
        location, app = source, ""
    env: dict[str, str] = {}
    if location.endswith((".ipynb", ".py")):
        location = os.path.abspath(location)
    elif _needs_cwd(location):
        env["PYTHONPATH"] = os.getcwd()
    shown = f"{location}:{app}" if app else location
    return {"mcpServers": {name: launch(["serve", shown], env)}}


def _needs_cwd(module: str) -> bool:
    """Whether ``module`` is found in the current folder (harmless to add when also installed)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None) or ""
    return bool(origin) and os.path.abspath(origin).startswith(os.getcwd() + os.sep)


def url_host(host: str) -> str:
    """``host`` as it goes in a URL or a ``Host`` header (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def mcp_url(host: str, port: int, path: str = "/mcp") -> str:
    """The endpoint's URL for a server bound to ``host`` and ``port``."""
    return f"http://{url_host(host)}:{port}{path}"


def restart_note(*, port_fixed: bool, token_fixed: bool, how: str) -> str:
    """One sentence: what a restart changes (so a pasted config breaks), and how to fix it."""
    changing = [what for what, fixed in (("port", port_fixed), ("token", token_fixed)) if not fixed]
    if not changing:
        return "Port and token are fixed: these configs keep working after a restart."
    them = "them" if len(changing) > 1 else "it"
    return (
        f"A restart (or serving again) changes the {' and the '.join(changing)}, and a pasted config "
        f"then stops working: fix {them} with {how}."
    )


def http_configs(url: str, token: str | None, *, note: str, hidden: str | None = None) -> str:
    """The text printed when serving Streamable HTTP at ``url``: endpoint, token and pasteable configs.

    Claude Desktop gets the stdio bridge (``fusion-nb connect``, no Node needed) with the
    token in its ``env``; VS Code and the Inspector speak HTTP with the header.
    ``hidden`` (where the token is to be found) prints ``TOKEN`` instead: a notebook that
    is saved or shared, or a service's log, then never holds the secret. ``note`` is the
    ``restart_note`` sentence.
    """
    shown = (HIDDEN if hidden else token) if token else None
    headers = {"Authorization": f"Bearer {shown}"} if shown else {}
    claude = {"mcpServers": {SERVER_NAME: launch(["connect", url], {TOKEN_ENV: shown} if shown else None)}}
    vscode = {"servers": {SERVER_NAME: {"type": "http", "url": url, **({"headers": headers} if headers else {})}}}
    inspector = f"npx -y @modelcontextprotocol/inspector@{INSPECTOR_VERSION} --cli {url}"
    inspector += " --transport http --method tools/list"
    if shown:
        inspector += f' --header "Authorization: Bearer {shown}"'
    if not token:
        token_line = "No authentication (--no-auth): loopback development only."
    elif hidden:
        token_line = f"Bearer token: {HIDDEN} (hidden; {hidden})"
    else:
        token_line = f"Bearer token: {token}"
    return "\n".join(
        [
            f"MCP endpoint: {url}",
            token_line,
            note,
            "",
            "Claude Desktop (claude_desktop_config.json):",
            json.dumps(claude, indent=2),
            "",
            "VS Code (.vscode/mcp.json):",
            json.dumps(vscode, indent=2),
            "",
            "MCP Inspector CLI:",
            inspector,
        ]
    )


def printed_configs(text: str) -> dict[str, Any]:
    """The JSON configs in text ``http_configs`` or ``fusion-nb check`` printed, by their heading.

    For tests and tools that act on what a person would copy: each line ending in ``:``
    followed by a JSON object gives ``{heading: object}``.
    """
    decoder = json.JSONDecoder()
    found: dict[str, Any] = {}
    lines = text.splitlines()
    for index, line in enumerate(lines[:-1]):
        if line.rstrip().endswith(":") and lines[index + 1].lstrip().startswith("{"):
            rest = "\n".join(lines[index + 1 :])
            found[line.rstrip()[:-1].strip()] = decoder.raw_decode(rest.lstrip())[0]
    return found
