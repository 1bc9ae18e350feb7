"""The ``fusion-nb`` command: serve, check, connect, export, install and package notebook MCP tools.

One module per subcommand (``serve``, ``check``, ``connect_command``, ``export``, ``install``, ``package``);
each offers ``add_parser(subparsers)`` and ``run(args) -> int``, and none imports the MCP SDK to do so
(``--help`` and argument parsing stay fast: the bridge, ``connect``, loads on ``run``). Exit codes follow the Unix
convention: 0 ok, 1 runtime error (a failing cell, a port in use, an unreachable
URL), 2 usage error (argparse's own). Every message for a person goes to stderr, so
stdout stays free for the MCP wire in ``serve`` and for machine output elsewhere.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .._std_fds import reopen_closed_std_fds
from .errors import CliError

PROG = "fusion-nb"

DESCRIPTION = """\
Serve MCP tools written in Jupyter notebooks, without a kernel.

A notebook's code cells run in order in a headless IPython shell with the fusion-nb
extension loaded; demo cells that call tools are skipped (see `fusion-nb serve --help`).
"""

EPILOG = """\
examples:
  fusion-nb check notebooks/01-quickstart.ipynb
  fusion-nb serve notebooks/01-quickstart.ipynb                       # stdio, for desktop hosts
  fusion-nb serve tools.py --transport http --port 8000               # Streamable HTTP at /mcp
  fusion-nb connect http://127.0.0.1:8000/mcp --token "$TOKEN"        # stdio bridge to a server
  fusion-nb export notebooks/01-quickstart.ipynb -o tools.py
  fusion-nb install claude-desktop notebooks/01-quickstart.ipynb     # register with a host
  fusion-nb package notebooks/01-quickstart.ipynb --out dist/quickstart    # registry, MCPB, Docker

Run `fusion-nb COMMAND --help` for a command's options. Exit status: 0 ok, 1 error, 2 usage.
"""


#: the subcommands, each a module of this package, in the order ``--help`` lists them
COMMANDS = ("serve", "check", "connect", "export", "install", "package")
#: where a subcommand's parser lives when its module is not named after it
_MODULES = {"connect": "connect_command"}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line: one sub-parser per subcommand module.

    Given ``argv`` that names a subcommand, only that module is imported (``export`` compiles
    cells, which ``install`` has no use for); no parser imports the MCP SDK (0.7 s).
    """
    import importlib

    named = next((arg for arg in argv or () if not arg.startswith("-")), None)
    wanted = [named] if named in COMMANDS else list(COMMANDS)
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for command in wanted:
        importlib.import_module(f".{_MODULES.get(command, command)}", __name__).add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (``python -m fusion_nb`` and the console script)."""
    reopen_closed_std_fds()
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        status: int = args.run(args)
    except CliError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return error.status
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `fusion-nb check ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


def console_main() -> None:
    """The ``fusion-nb`` console script."""
    raise SystemExit(main())


def _version() -> str:
    from .. import __version__

    return __version__


__all__ = ["CliError", "build_parser", "console_main", "main"]
