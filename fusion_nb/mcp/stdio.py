"""stdio transport: ``serve_stdio(app)``, and ``python -m fusion_nb.mcp.stdio module:app``.

``serve_stdio`` is the library entry the ``fusion-nb`` command builds on. It serves
both protocol eras on this process's stdin/stdout through the SDK's ``stdio_server``
and ends quietly however the client leaves:

* stdin closed: the SDK cancels what still runs (handlers' ``finally`` blocks run)
  and ``serve_stdio`` returns;
* the client stopped reading (its end of our stdout closed): the next write fails
  with a broken pipe; that is one INFO log line, what still runs is cancelled
  (cleanup runs) and ``serve_stdio`` returns. stdin is read on the event loop from a
  non-blocking pipe, not from a worker thread blocked in ``read()``, so nothing
  waits for the client to close stdin as well.

A message holding a lone surrogate (a client may send ``"\\ud800"``, a tool may echo it)
cannot be written as UTF-8: the SDK's writer would fail and the call go unanswered. Such
a message goes out with U+FFFD in the surrogate's place (``UnicodeSafeWriter``).

Run with ``python -u`` (or log to stderr): stray block-buffered prints would
otherwise be flushed onto the wire when the server exits.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import logging
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from ..engine import App
from .options import ServerOptions, with_options
from .server import server_for

log = logging.getLogger(__name__)

_CHUNK = 1 << 16


class PipeLines:
    """Lines read from a non-blocking file descriptor on the event loop (cancellable at any time).

    ``stdio_server(stdin=...)`` iterates it with ``async for``; the SDK parses each line.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._eof = False

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        """The next line (with its newline), or ``StopAsyncIteration`` at end of input."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return _parseable(line.decode("utf-8", errors="replace"))
            if self._eof:
                if not self._buffer:
                    raise StopAsyncIteration
                line = bytes(self._buffer)
                self._buffer.clear()
                return _parseable(line.decode("utf-8", errors="replace"))
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[PipeLines | None]:
    """Take fd 0 for the protocol (handlers then read EOF from the null device); restore it after.

    ``None`` when stdin is a regular file (no readiness to wait on): the SDK's own
    thread reader serves that case.
    """
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        yield None
        return
    if stat.S_ISREG(mode):
        yield None
        return
    private = os.dup(0)
    was_blocking = os.get_blocking(private)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.set_blocking(private, False)  # shared with fd 0's open file: restored below
        yield PipeLines(private)
    finally:
        os.set_blocking(private, was_blocking)
        os.dup2(private, 0)
        os.close(private)
        os.close(null)


class UnicodeSafeWriter:
    """The write stream of ``stdio_server``, replacing lone surrogates (U+FFFD) in a message UTF-8 cannot carry.

    Only a message that fails to serialize is rebuilt: the check is the SDK's own
    ``model_dump_json``, once more per message written (a few µs on a stdio call).
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    async def send(self, item: Any) -> None:
        """Send ``item`` (a ``SessionMessage``), made writable first if need be."""
        try:
            item.message.model_dump_json(by_alias=True, exclude_unset=True)
        except ValueError:  # pydantic's serialization error for a surrogate (a ValueError)
            item = _replaced_surrogates(item)
        await self.stream.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    async def __aenter__(self) -> UnicodeSafeWriter:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self.stream.__aexit__(*exc_info)


def _replaced_surrogates(item: Any) -> Any:
    """``item`` with every lone surrogate in its message's strings replaced by U+FFFD."""
    message = item.message
    data = _without_surrogates(message.model_dump(by_alias=True, exclude_unset=True))
    return type(item)(type(message).model_validate(data), metadata=getattr(item, "metadata", None))


def _without_surrogates(value: Any) -> Any:
    """``value`` (JSON data) with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_without_surrogates(key): _without_surrogates(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(inner) for inner in value]
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _parseable(line: str) -> str:
    """A line the SDK's strict parser takes: a JSON escape of a lone surrogate (``"\\ud800"``)
    becomes U+FFFD, as on the way out. The parser refuses such a line outright, and the
    request in it was never answered; a line with no such escape (nearly all) is not looked at."""
    if _SURROGATE_ESCAPE.search(line) is None:  # an escape of U+D800-U+DFFF (a lone one, or half a pair)
        return line
    try:
        value = json.loads(line)
    except ValueError:
        return line  # not JSON at all: the SDK's own answer to that
    cleaned = _without_surrogates(value)
    return line if cleaned == value else json.dumps(cleaned, ensure_ascii=False) + "\n"


def _is_gone(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError | ConnectionResetError)


@with_options(ServerOptions)
async def serve_stdio(app: App, options: ServerOptions) -> None:
    """Serve ``app`` on this process's stdin/stdout until the client leaves (both eras).

    The options are ``mcp_server``'s (``ServerOptions``: ``progress_interval``,
    ``request_state_keys`` ...). Returns normally when the client closes stdin or
    stops reading stdout.
    """
    server = server_for(app, options)
    try:
        with _claimed_stdin() as stdin:
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
                writer = UnicodeSafeWriter(write_stream)
                await server.run(read_stream, writer, server.create_initialization_options())  # type: ignore[arg-type]
    except BaseExceptionGroup as group:
        gone, rest = group.split(_is_gone)
        if rest is not None:
            raise
        assert gone is not None
        log.info("fusion-nb: the MCP client stopped reading; stdio server stopped")
        _discard_stdout()
    except (BrokenPipeError, ConnectionResetError):
        log.info("fusion-nb: the MCP client stopped reading; stdio server stopped")
        _discard_stdout()


def _discard_stdout() -> None:
    """Point fd 1 at the null device: the interpreter's exit flush must not hit the broken pipe."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def load_app(target: str) -> App:
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
    if not isinstance(app, App):
        raise SystemExit(f"fusion-nb: {target!r} is not a Fusion app; pass module:attr naming one.")
    return app


def main(argv: list[str] | None = None) -> None:
    """``python -u -m fusion_nb.mcp.stdio module:app``: serve one app over stdio, exit 0 when the client leaves."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        raise SystemExit("usage: python -u -m fusion_nb.mcp.stdio module:app")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    anyio.run(serve_stdio, load_app(args[0]))


if __name__ == "__main__":
    main()
