"""``fusion-nb export NOTEBOOK -o tools.py``: the notebook's tools as a plain Python module.

The notebook first runs headless under the start-up rule (see ``headless``), so the
module holds exactly what ``fusion-nb serve NOTEBOOK`` would serve: cells that ran are
copied in order, skipped cells are left out (named in a comment), and each
``%%fusion_tool`` cell becomes a decorated function on ``fusion_nb.f``::

    @f.query("math.add").with_integer("a", "First number").handle
    def math_add(input, ctx):
        \"\"\"Add two integers.\"\"\"
        return input.a + input.b

A body that awaits becomes ``async def``; one that yields a generator; in an async
generator ``return value`` becomes ``yield respond(value); return`` (what the cell
compiler does at run time). ``%load_ext fusion_nb`` and ``%fusion`` lines are dropped;
any other IPython-only line, and a helper cell with a top-level ``await``, is kept
as a comment and reported, since a plain module cannot run it.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

from .errors import CliError
from .headless import Cell, StartupReport, failure_message, run_notebook
from .source import find_app

HELP = "write a notebook's tools as a plain Python module (servable by `fusion-nb serve`)"
DESCRIPTION = """\
Run NOTEBOOK headless (the same rule as `fusion-nb serve`: cells that call tools are
skipped) and write the cells that ran as a plain module: %%fusion_tool cells become
decorated functions, %%fusion_prompt cells prompt registrations, helper cells are copied,
skipped cells are left out.
"""
EPILOG = """\
example:
  fusion-nb export notebooks/01-quickstart.ipynb -o tools.py && fusion-nb serve tools.py
"""

_IMPORTS = (
    "from fusion_nb import (  # noqa: F401  (names a %%fusion_tool body may use without importing them)\n"
    "    ToolError,\n    ask,\n    f,\n    input_response,\n    progress,\n    read_input,\n"
    "    read_request_state,\n    require_input,\n    respond,\n)\n"
)
_PLAIN_NAME = re.compile(r"[A-Za-z_][\w.\-]*")


def add_parser(commands: Any) -> None:
    """Register ``export`` and its options."""
    parser = commands.add_parser(
        "export",
        help=HELP,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb file to export")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, metavar="FILE", help="the module to write ('-': stdout)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the notebook headless, then write the module."""
    if not args.notebook.endswith(".ipynb"):
        raise CliError(f"{args.notebook}: export takes a notebook (.ipynb)")
    path = Path(args.notebook)
    shell, report = asyncio.run(run_notebook(path))
    if report.failed is not None:
        raise CliError(failure_message(path, report.failed))
    tools = len(find_app(shell.user_ns, None, str(path)).tools)
    text, notes = module_source(report)
    if str(args.output) == "-":
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    for note in notes:
        print(f"fusion-nb: {note}", file=sys.stderr)
    where = "stdout" if str(args.output) == "-" else str(args.output)
    print(f"fusion-nb: wrote {tools} tool(s) to {where}; serve it with: fusion-nb serve {where}", file=sys.stderr)
    return 0


def module_source(report: StartupReport) -> tuple[str, list[str]]:
    """The module text for a notebook's start-up report, and notes about what could not be carried over."""
    notes: list[str] = []
    parts = [f'"""MCP tools exported from {report.path.name} by `fusion-nb export`."""\n\n', _IMPORTS]
    for outcome in report.outcomes:
        cell = outcome.cell
        if outcome.status != "ran":
            parts.append(f"\n# cell {cell.number} left out ({outcome.reason})\n")
            continue
        if not cell.source.strip():
            continue
        parts.append(f"\n\n# cell {cell.number}\n")
        if _is_tool_cell(cell):
            parts.append(_tool_function(cell))
        elif _is_prompt_cell(cell):
            parts.append(_prompt_registration(cell))
        else:
            parts.append(_helper(cell, notes))
    return "".join(parts).rstrip() + "\n", notes


def _is_tool_cell(cell: Cell) -> bool:
    return cell.source.lstrip().startswith("%%fusion_tool")


def _is_prompt_cell(cell: Cell) -> bool:
    return cell.source.lstrip().startswith("%%fusion_prompt")


def _prompt_registration(cell: Cell) -> str:
    """A ``%%fusion_prompt NAME`` cell as the call the magic makes: ``default_app.prompt(NAME, text, ...)``."""
    from ..notebook.magics import prompt_cell

    header, _, body = cell.source.lstrip().partition("\n")
    name = header.removeprefix("%%fusion_prompt").strip()
    description, text = prompt_cell(body)
    return (
        "from fusion_nb import default_app as _prompts_app\n\n"
        f"_prompts_app.prompt({name!r}, {text!r}, description={description!r})\n"
    )


def _helper(cell: Cell, notes: list[str]) -> str:
    lines = []
    for line in cell.source.splitlines():
        stripped = line.strip()
        if stripped.startswith(("%load_ext fusion_nb", "%fusion ", "%reload_ext fusion_nb")) or stripped == "%fusion":
            continue
        if stripped.startswith(("%", "!")):
            notes.append(f"cell {cell.number}: IPython line kept as a comment: {stripped}")
            lines.append(f"# (IPython only) {line}")
            continue
        lines.append(line)
    text = "\n".join(lines).strip("\n")
    if not text:
        return "# (only fusion-nb magics)\n"
    try:
        tree = ast.parse(text)
        compile(tree, f"<cell {cell.number}>", "exec")  # parsing alone accepts a top-level await
    except SyntaxError:
        try:
            compile(text, f"<cell {cell.number}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError:
            return text + "\n"  # keep the author's text; importing the module will say where
        notes.append(f"cell {cell.number}: has a top-level await; kept as a comment (a module cannot run it)")
        return "".join(f"# {line}\n" for line in text.splitlines())
    return _without_notebook_api(text, tree, cell, notes)


def _without_notebook_api(text: str, tree: ast.Module, cell: Cell, notes: list[str]) -> str:
    """Comment out top-level statements that use ``fusion_nb.notebook`` (it needs a kernel)."""
    names: set[str] = set()
    lines = text.splitlines()
    dropped: list[tuple[int, int]] = []
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and (statement.module or "").startswith("fusion_nb.notebook"):
            names.update(alias.asname or alias.name for alias in statement.names)
        elif not any(isinstance(node, ast.Name) and node.id in names for node in ast.walk(statement)):
            continue
        dropped.append((statement.lineno - 1, statement.end_lineno or statement.lineno))
    for start, end in dropped:
        notes.append(f"cell {cell.number}: notebook-only line kept as a comment: {lines[start].strip()}")
        for index in range(start, end):
            lines[index] = f"# (notebook only) {lines[index]}"
    return "\n".join(lines) + "\n"


def _tool_function(cell: Cell) -> str:
    source = cell.source.lstrip()
    header, _, body = source.partition("\n")
    expression = header.removeprefix("%%fusion_tool").strip()
    builder = f"f.action({expression!r})" if _PLAIN_NAME.fullmatch(expression) else expression
    name = _python_name(_tool_name(expression))
    from ..notebook.cell_compiler import BodyScan  # (its package imports the SDK: not for `--help`)

    tree = ast.parse(body)
    scan = BodyScan.of(tree.body)
    if scan.awaits and scan.yields:
        body = _returns_to_respond(body, scan.returns)
    keyword = "async def" if scan.awaits else "def"
    indented = "".join(f"    {line}" if line.strip() else line for line in body.splitlines(True)).rstrip()
    return f"@{builder}.handle\n{keyword} {name}(input, ctx):\n{indented or '    pass'}\n"


def _tool_name(expression: str) -> str:
    if _PLAIN_NAME.fullmatch(expression):
        return expression
    call = ast.parse(expression, mode="eval").body
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        inner = call.func.value
        if not isinstance(inner, ast.Call):
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return first.value
        call = inner
    raise CliError(f"cannot read the tool name from the %%fusion_tool header {expression!r}")


def _python_name(tool_name: str) -> str:
    from ..notebook.cell_compiler import python_name

    return python_name(tool_name)


def _returns_to_respond(body: str, returns: list[ast.Return]) -> str:
    """``return value`` -> ``yield respond(value); return``, edited in the text so comments survive."""
    lines = body.splitlines(True)
    for node in sorted(returns, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        assert node.value is not None and node.end_lineno is not None and node.end_col_offset is not None
        value = ast.get_source_segment(body, node.value)
        start, end = node.lineno - 1, node.end_lineno - 1
        prefix = lines[start][: _byte_to_char(lines[start], node.col_offset)]
        suffix = lines[end][_byte_to_char(lines[end], node.end_col_offset) :]
        lines[start : end + 1] = [f"{prefix}yield respond({value}); return{suffix}"]
    return "".join(lines)


def _byte_to_char(line: str, offset: int) -> int:
    return len(line.encode("utf-8")[:offset].decode("utf-8", errors="ignore"))
