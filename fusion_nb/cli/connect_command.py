"""``fusion-nb connect URL``: the command line of the stdio <-> Streamable HTTP bridge (``connect``).

Apart from the bridge, which loads the MCP SDK (0.7 s): ``fusion-nb --help`` lists this
command, and its arguments are checked, without importing it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from ..mcp.client_config import TOKEN_ENV
from .errors import CliError

HELP = "bridge stdio to a Streamable HTTP MCP server (Claude Desktop to a kernel, without Node)"
DESCRIPTION = """\
Bridge this process's stdin/stdout (MCP over stdio) to the Streamable HTTP MCP endpoint
at URL, e.g. the one `%fusion serve` prints. Progress, cancellation and elicitation
pass through in both protocol eras.
"""
EPILOG = """\
Claude Desktop (claude_desktop_config.json), as `%fusion serve` prints it (with absolute paths):
  {"mcpServers": {"fusion-nb": {"command": "/path/to/.venv/bin/fusion-nb",
      "args": ["connect", "http://127.0.0.1:8765/mcp"], "env": {"FUSION_NB_TOKEN": "<token>"}}}}
"""


def add_parser(commands: Any) -> None:
    """Register ``connect`` and its options."""
    parser = commands.add_parser(
        "connect",
        help=HELP,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", metavar="URL", help="the Streamable HTTP endpoint, e.g. http://127.0.0.1:8765/mcp")
    parser.add_argument("--token", help=f"bearer token (default: ${TOKEN_ENV})")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="extra HTTP header for every request, e.g. 'Authorization: Bearer TOKEN'; repeatable",
    )
    parser.add_argument(
        "--answer-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long a question relayed to the host waits for its answer; then the call fails in one sentence "
        "(default 600; a 2025-11-25 upstream's own answer_timeout also ends it)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Bridge until the host closes stdin."""
    if not args.url.startswith(("http://", "https://")):
        raise CliError(f"URL must start with http:// or https://, got {args.url!r}")
    headers: dict[str, str] = {}
    for header in args.header:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise CliError(f"--header takes 'NAME: VALUE', got {header!r}")
        headers[name.strip()] = value.strip()
    if not 0 < args.answer_timeout < float("inf"):
        raise CliError("--answer-timeout must be a positive number of seconds")
    token = args.token or os.environ.get(TOKEN_ENV) or None
    sys.stdout.flush()
    from ..mcp.stdio import log_connection_events
    from .connect import bridge

    log_connection_events()  # the host's side says how it ended (SIGTERM, the host stopped reading), as serve's does
    return asyncio.run(bridge(args.url, token, headers=headers, answer_timeout=args.answer_timeout))


__all__ = ["add_parser", "run"]
