"""stdio transport: ``serve_stdio(app)``, and ``python -m fusion_nb.mcp.stdio module:app``.

Run with ``python -u`` (or log to stderr): stray block-buffered prints would
otherwise be flushed onto the wire when the server exits.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from mcp.server.stdio import stdio_server

from ..engine import Fusion
from .server import mcp_server


async def serve_stdio(app: Fusion, **options: Any) -> None:
    """Serve ``app`` on this process's stdin/stdout until the client closes it (both eras)."""
    server = mcp_server(app, **options)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def load_app(target: str) -> Fusion:
    """``package.module:attr`` or ``path/to/file.py:attr`` (``attr`` defaults to ``app``)."""
    location, _, attr = target.partition(":")
    attr = attr or "app"
    if location.endswith(".py"):
        path = Path(location).resolve()
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"fusion-nb: cannot load {location!r}; pass module:attr or file.py:attr.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(location)
    app = getattr(module, attr, None)
    if not isinstance(app, Fusion):
        raise SystemExit(f"fusion-nb: {target!r} is not a Fusion app; pass module:attr naming one.")
    return app


def main(argv: list[str] | None = None) -> None:
    import anyio

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        raise SystemExit("usage: python -u -m fusion_nb.mcp.stdio module:app")
    anyio.run(serve_stdio, load_app(args[0]))


if __name__ == "__main__":
    main()
