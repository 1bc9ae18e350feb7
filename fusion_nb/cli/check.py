"""``fusion-nb check SOURCE``: what a CI job runs before serving a notebook.

Prints which cells run and which are skipped (and why), then every tool with its
input schema and hints, then the stdio config a desktop host can launch as pasted.
Exit 1 when a cell fails or no tool is found, so a broken notebook fails the build
instead of the deployment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from ..mcp.client_config import stdio_config
from .errors import CliError
from .headless import failure_message
from .source import load_source

#: the heading of the printed stdio config (the command is absolute: desktop hosts activate no venv)
STDIO_HEADING = "Claude Desktop (claude_desktop_config.json), serving it over stdio"

HELP = "run a source headless and list its cells and tools (exit 1 on any error)"

DESCRIPTION = """\
Load SOURCE the way `fusion-nb serve` would and report what it found: for a notebook,
each code cell as ran or skipped (and why); then each tool with its hints and input
schema. Nothing is served and no tool is called. Exit status 1 on any error.
"""


def add_parser(commands: Any) -> None:
    """Register ``check`` and its options."""
    parser = commands.add_parser(
        "check", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", metavar="SOURCE", help="x.ipynb, x.py or package.module, with optional :NAME")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    parser.add_argument("-v", "--verbose", action="store_true", help="copy the notebook's cell output to stderr")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Load, print the report, and return 1 when start-up would fail."""
    return asyncio.run(_check(args))


async def _check(args: argparse.Namespace) -> int:
    loaded = await load_source(args.source, echo=args.verbose, allow_failed=True)
    report = loaded.report
    cells = [
        {"cell": o.cell.number, "first_line": o.cell.first_line, "status": o.status, "reason": o.reason}
        for o in (report.outcomes if report is not None else [])
    ]
    failed = report.failed if report is not None else None
    tools = [
        {
            "name": tool.name,
            "description": tool.description,
            "annotations": dict(tool.annotations),
            "input_schema": tool.input_schema,
        }
        for tool in (loaded.app.tools if failed is None else [])
    ]
    config = stdio_config(args.source) if failed is None and tools else None
    catalog = loaded.app.catalog.describe() if failed is None else []
    if args.json:
        report_json = {"source": loaded.label, "ok": failed is None, "cells": cells, "tools": tools, "catalog": catalog}
        json.dump({**report_json, "client_config": config}, sys.stdout, indent=2)
        print()
    else:
        _print_text(loaded.label, cells, tools)
        if catalog:
            print(f"{len(catalog)} resource(s) and prompt(s):\n" + "\n".join(f"  {line}" for line in catalog))
        if config is not None:
            print(f"\n{STDIO_HEADING}:\n{json.dumps(config, indent=2)}")
    if failed is not None:
        raise CliError(failure_message(report.path, failed))  # type: ignore[union-attr]
    if not tools:
        raise CliError(f"{loaded.label}: defines no tools")
    return 0


def _print_text(label: str, cells: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
    out = sys.stdout
    if cells:
        print(f"{label}: {len(cells)} code cell(s)", file=out)
        for cell in cells:
            reason = f"  ({cell['reason']})" if cell["reason"] else ""
            print(f"  cell {cell['cell']:>3}  {cell['status']:<8} {cell['first_line']}{reason}", file=out)
        print(file=out)
    print(f"{len(tools)} tool(s):", file=out)
    for tool in tools:
        hints = [key.removesuffix("Hint") for key, value in tool["annotations"].items() if value is True]
        print(f"  {tool['name']}" + (f"  [{', '.join(hints)}]" if hints else ""), file=out)
        if tool["description"]:
            print(f"    {tool['description'].splitlines()[0]}", file=out)
        schema = json.dumps(tool["input_schema"], sort_keys=True)
        print(f"    input: {schema}", file=out)
