"""``%%fusion_tool`` (define a tool from a cell) and ``%fusion`` (list, serve, stop, status, inspect, help)."""

from __future__ import annotations

import builtins
import re
from collections import ChainMap
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from .. import widgets  # (its modules, ipywidgets among them, load on first use: see widgets/__init__.py)
from ..engine import ToolBuilder, did_you_mean
from ..mcp import enable_job_tools
from .cell_compiler import compile_handler, fusion_names, python_name, register_source
from .cell_tool import TOOL_CELL_PREFIX, CellTool
from .tasks_view import TasksView

_PLAIN_NAME = re.compile(r"[A-Za-z_][\w.\-]*")


@magics_class
class FusionMagics(Magics):
    def __init__(self, shell: Any, host: Any) -> None:
        super().__init__(shell)
        self.host = host

    @property
    def _shell(self) -> InteractiveShell:
        """The shell these magics run in (``Magics.shell`` is only ``None`` before registration)."""
        shell = self.shell
        if shell is None:
            raise UsageError("fusion-nb magics are not registered with an IPython shell")
        return shell

    @cell_magic
    def fusion_tool(self, line: str, cell: str) -> Any:
        """Define an MCP tool from this cell; the body is the handler.

        The first line is a tool name (``%%fusion_tool report.generate``) or a builder
        expression (``%%fusion_tool f.mutation("billing.refund").with_string("id")``).
        In the body ``input`` and ``ctx`` are defined; it may ``await``, ``yield
        progress(...)`` and ``return value``. A leading docstring is the description.
        Call the tool from any later cell: ``await report_generate(quarter="2026Q3")``.
        """
        header = line.strip()
        if not header:
            raise UsageError(
                "%%fusion_tool needs a tool name or a builder, e.g. %%fusion_tool report.generate"
                ' or %%fusion_tool f.query("weather").with_string("city")'
            )
        builder = self._builder(header)
        number = self._cell_number()
        raw = f"%%fusion_tool {line}\n{cell}"
        filename = f"{TOOL_CELL_PREFIX}{number}-{abs(hash(raw)):x}>"
        register_source(filename, raw)
        filename_map = getattr(getattr(self.shell, "compile", None), "_filename_map", None)
        if isinstance(filename_map, dict):
            filename_map[filename] = number  # tracebacks then say "Cell In[n]"
        handler, docstring = compile_handler(
            cell,
            function_name=python_name(builder.name),
            filename=filename,
            first_line=2,
            namespace=self._shell.user_ns,
        )
        if docstring and builder._description is None:
            builder.describe(docstring)
        tool = builder.handle(handler)
        bound = CellTool(tool, self.host)
        self._shell.user_ns[python_name(tool.name)] = bound
        return self.host.card(bound)

    @cell_magic
    def fusion_prompt(self, line: str, cell: str) -> None:
        """Define an MCP prompt from this cell: ``%%fusion_prompt NAME``, then the prompt's text.

        A leading triple-quoted docstring is the description; each ``{placeholder}`` in the
        text is a (required) argument the client fills in (``{{`` and ``}}`` are literal braces).
        """
        name = line.strip()
        if not _PLAIN_NAME.fullmatch(name):
            raise UsageError("%%fusion_prompt needs a prompt name, e.g. %%fusion_prompt summarize")
        description, text = prompt_cell(cell)
        try:
            self.host.app.prompt(name, text, description=description)
        except ValueError as exc:
            raise UsageError(f"%%fusion_prompt {name}: the text is not a valid template ({exc})") from None
        prompt = self.host.app.catalog.prompt(name)
        arguments = ", ".join(name for name, _required in prompt.arguments) if prompt else ""
        print(f"Prompt {name}({arguments}) is served with the tools.")

    def _builder(self, header: str) -> ToolBuilder:
        if _PLAIN_NAME.fullmatch(header):
            return self.host.app.f.action(header)
        scope = ChainMap(self._shell.user_ns, {"f": self.host.app.f, **fusion_names()})
        try:
            builder = eval(compile(header, "<%%fusion_tool header>", "eval"), self._shell.user_ns, scope)
        except SyntaxError as exc:
            raise UsageError(
                f"%%fusion_tool header is neither a tool name nor a Python expression: {exc.msg} in {header!r}"
            ) from None
        except NameError as exc:  # (Python 3.11 names no near name; the builders' own errors do)
            near = did_you_mean(exc.name or "", [*scope.keys(), *builtins.__dir__()])
            hint = f" (did you mean {near}?)" if near else ""
            raise UsageError(f"%%fusion_tool header: {exc}{hint}") from None
        except (AttributeError, TypeError, ValueError) as exc:  # a mistyped verb or method, a bad argument
            raise UsageError(f"%%fusion_tool header: {exc}") from None
        if not isinstance(builder, ToolBuilder):
            raise UsageError(
                f'%%fusion_tool header must give a tool builder such as f.query("name"), got {type(builder).__name__}'
            )
        return builder

    def _cell_number(self) -> int:
        """The In[n] of this cell (IPython counts before running; nbval runs without history)."""
        count = self._shell.execution_count
        kernel: Any = getattr(self.shell, "kernel", None)  # ipykernel's kernel; absent in a plain IPython shell
        try:
            store_history = kernel.get_parent()["content"].get("store_history", True)
        except Exception:
            store_history = True
        return count - 1 if store_history else count

    @line_magic
    @magic_arguments()
    @argument(
        "command",
        nargs="?",
        default="help",
        choices=["list", "serve", "stop", "status", "calls", "inspect", "share", "unshare", "tasks", "help"],
        help="list the tools, resources and prompts; serve them over MCP (Streamable HTTP); stop serving; "
        "show status; the live calls with their forms and Stop; inspect what an agent sees; "
        "share a variable as nb://vars/NAME; unshare it; "
        "the tasks agents started (lost on a kernel restart); help",
    )
    @argument(
        "tool",
        nargs="?",
        default=None,
        help="inspect: only this tool (its definition and its traffic); share/unshare: the variable's name",
    )
    @argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, loopback only)")
    @argument(
        "--port",
        type=int,
        default=0,
        help="port to bind (default: the one kept for this notebook under a Jupyter server, else a free one)",
    )
    @argument(
        "--token",
        default=None,
        help="bearer token clients must send (default: $FUSION_NB_TOKEN, else the one kept for this notebook "
        "under a Jupyter server, else generated anew on every serve)",
    )
    @argument(
        "--new-token",
        action="store_true",
        help="rotate the token kept for this notebook (configs pasted before stop working)",
    )
    @argument(
        "--register",
        action="store_true",
        help="also list this endpoint in the MCP settings file jupyter-ai 3 reads (.jupyter/mcp_settings.json, "
        "the nearest above the notebook, else at the Jupyter server's root), so the agents it runs in "
        "JupyterLab get this notebook's tools in new chats; %%fusion stop or the kernel's end removes it",
    )
    @argument("--no-auth", action="store_true", help="serve without a bearer token (loopback development only)")
    @argument(
        "--hide-token",
        action="store_true",
        help="print TOKEN instead of the token (a saved or shared notebook never holds it); "
        "fusion_nb.notebook.server().token has it",
    )
    @argument(
        "--page-size",
        type=int,
        default=None,
        help="items per page of tools/list, resources/list, prompts/list and tasks/list (default: 1000, tasks 100); "
        "a longer list is paged with nextCursor",
    )
    @argument(
        "--job-tools",
        action="store_true",
        help="add jobs.wait and jobs.cancel: a task tool called by a client without MCP tasks answers with a job id "
        "(for Claude Desktop and claude.ai, whose calls time out)",
    )
    def fusion(self, line: str) -> Any:
        """This kernel's fusion-nb tools.

        %fusion list | serve | stop | status | calls | inspect [TOOL] | share NAME | unshare NAME | tasks | help
        """
        args = parse_argstring(self.fusion, line)
        if args.command in ("share", "unshare"):
            if args.tool is None:
                raise UsageError(f"%fusion {args.command} needs a variable name, e.g. %fusion {args.command} df")
            try:
                print(getattr(self.host.shared, args.command)(args.tool))
            except KeyError as exc:
                raise UsageError(exc.args[0]) from None
            return None
        if args.tool is not None and args.command != "inspect":
            raise UsageError(f"%fusion {args.command} takes no tool name (only %fusion inspect TOOL does)")
        if args.command == "list":
            tools = self.host.app.tools
            if not tools:
                print("No tools yet: define one with %%fusion_tool <name>.")
            for tool in tools:
                print(widgets.describe_tool(tool))
            for line in self.host.app.catalog.describe():
                print(line)
            return None
        if args.command == "serve":
            if args.job_tools:
                enable_job_tools(self.host.app)
            return self.host.serve(
                host=args.host,
                port=args.port,
                auth=not args.no_auth,
                token=args.token,
                hide_token=args.hide_token,
                new_token=args.new_token,
                register=args.register,
                page_size=args.page_size,
            )
        if args.command == "stop":
            return self.host.stop()
        if args.command == "status":
            print(self.host.status())
            return self.host.panel
        if args.command == "calls":
            return self.host.calls()
        if args.command == "inspect":
            return self.host.inspect(args.tool)
        if args.command == "tasks":
            return TasksView(self.host.app)
        print(usage(self.fusion.parser.format_help()))  # type: ignore[union-attr]  # magic_arguments adds .parser
        return None


def prompt_cell(cell: str) -> tuple[str | None, str]:
    """A prompt cell's description (its leading docstring, if any) and its text."""
    body = cell.strip()
    for quote in ('"""', "'''"):
        if body.startswith(quote):
            end = body.find(quote, 3)
            if end > 0:
                return body[3:end].strip() or None, body[end + 3 :].strip()
    return None, body


def usage(help_text: str) -> str:
    """argparse help as plain text: without the reStructuredText ``::`` IPython puts before the usage."""
    head, _, rest = help_text.partition("\n\n")
    if head.strip() == "::":
        head, _, rest = rest.partition("\n\n")
    return "Usage: " + " ".join(head.split()) + "\n\n" + rest.strip()
