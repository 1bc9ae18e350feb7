"""stdio transport: ``serve_stdio(app)``, and ``python -m fusion_nb.mcp.stdio module:app``.

``serve_stdio`` is the library entry the ``fusion-nb`` command builds on. It serves
both protocol eras on this process's stdin/stdout, each message straight through the
SDK's protocol kernel (``pipe.PipeConnection``), and ends quietly however the client
leaves:

* stdin closed: what still runs is cancelled (handlers' ``finally`` blocks run) and
  ``serve_stdio`` returns;
* the client stopped reading (its end of our stdout closed): the next write fails
  with a broken pipe; that is one INFO log line, what still runs is cancelled
  (cleanup runs) and ``serve_stdio`` returns. stdin is read on the event loop from a
  non-blocking pipe, not from a worker thread blocked in ``read()``, so nothing
  waits for the client to close stdin as well.

While serving, fd 0 reads the null device and fd 1 writes to stderr, as under the
SDK's ``stdio_server``: a handler reading stdin sees end of input, and a stray
``print`` misses the wire. Both are restored afterwards.

A message holding a lone surrogate (a client may send ``"\\ud800"``, a tool may echo it)
cannot be written as UTF-8: it goes out with U+FFFD in the surrogate's place, and one
read with such an escape is read with U+FFFD too.

Run with ``python -u`` (or log to stderr): stray block-buffered prints would
otherwise be flushed onto the wire when the server exits.

This module imports no SDK transport: ``fusion-nb serve`` over stdio starts faster
without them (``tests/cli`` bounds spawn-to-first-answer).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..engine import App
from .options import ANSWER_TIMEOUT, ServerOptions, with_options

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server

log = logging.getLogger("fusion_nb.mcp.stdio")  # (not __name__: run with -m it is "__main__")


class PipeLines:
    """Lines read from a non-blocking file descriptor on the event loop (cancellable at any time), as text."""

    def __init__(self, fd: int) -> None:
        from .pipe import LineReader

        self.fd = fd
        self._reader = LineReader(fd, limit=1 << 30, watch=False)  # nothing closes it: registered per wait

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        """The next line (with its newline), or ``StopAsyncIteration`` at end of input."""
        line = await self._reader.next()
        if line is None:
            raise StopAsyncIteration
        assert isinstance(line, bytes)
        return line.decode("utf-8", errors="replace") + "\n"


@contextlib.contextmanager
def _claimed(fd: int, diversion: int, watched: bool) -> Iterator[int]:
    """Take ``fd`` for the protocol: a private duplicate serves the wire, ``fd`` points at ``diversion``.

    A pipe's (``watched``: the loop waits for it) duplicate is made non-blocking (read
    and written on the event loop); its mode is shared with ``fd``'s open file and
    restored, with ``fd``, afterwards.
    """
    private = os.dup(fd)
    was_blocking = os.get_blocking(private)
    try:
        os.dup2(diversion, fd)
        if watched:
            os.set_blocking(private, False)
        yield private
    finally:
        os.set_blocking(private, was_blocking)
        os.dup2(private, fd)
        os.close(private)


@contextlib.contextmanager
def _claimed_stdio() -> Iterator[tuple[int, int]]:
    """``(read_fd, write_fd)`` for the protocol; meanwhile fd 0 reads the null device and fd 1 writes to stderr."""
    from .pipe import watchable

    watched = [watchable(fd) for fd in (0, 1)]
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        with _claimed(0, null, watched[0]) as read_fd, _claimed(1, 2, watched[1]) as write_fd:
            yield read_fd, write_fd
    finally:
        os.close(null)


@with_options(ServerOptions)
async def serve_stdio(app: App, options: ServerOptions) -> None:
    """Serve ``app`` on this process's stdin/stdout until the client leaves (both eras).

    The options are ``mcp_server``'s (``ServerOptions``: ``progress_interval``,
    ``request_state_keys`` ...). Returns normally when the client closes stdin or
    stops reading stdout, and on SIGTERM (how a host stops a server it started,
    after closing its stdin) or SIGHUP (its terminal or session went away): the calls
    still running are then cancelled, their cleanup runs and they are answered, as at
    end of input. (Where signals cannot be received, not in the main thread, both
    signals keep their own meaning.)
    """
    from .server import FusionServer

    await serve_server_stdio(FusionServer(app, options), answer_timeout=options.answer_timeout)


async def serve_server_stdio(server: Server[Any], *, answer_timeout: float | None = ANSWER_TIMEOUT) -> None:
    """``serve_stdio`` for an SDK ``Server`` built elsewhere (``fusion-nb connect``'s bridge): the same pipe,
    the same ways of ending (stdin closed, stdout gone, SIGTERM or SIGHUP), the same lines on stderr;
    a question to the client waits at most ``answer_timeout`` seconds."""
    from .pipe import serve_pipe

    stop = anyio.Event()
    with _claimed_stdio() as (read_fd, write_fd):
        async with anyio.create_task_group() as group:
            if _receives_signals():
                await group.start(_stop_on_signal, stop)
            gone = await serve_pipe(server, read_fd, write_fd, stop=stop, answer_timeout=answer_timeout)
            group.cancel_scope.cancel()
    if gone:
        log.info("fusion-nb: the MCP client stopped reading; stdio server stopped")
        _discard_stdout()


def _receives_signals() -> bool:
    return sys.platform != "win32" and threading.current_thread() is threading.main_thread()


async def _stop_on_signal(stop: anyio.Event, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    """Set ``stop`` on the first SIGTERM or SIGHUP; a second one, with the default handler back, ends the process.

    SIGTERM is how a host stops a server it started; SIGHUP is what a server gets when
    the terminal or session that started it goes away: either way the calls running
    are cancelled and cleaned up, never killed mid-step.
    """
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as received:
        task_status.started()
        async for number in received:
            log.info("fusion-nb: %s: ending the stdio connection", signal.Signals(number).name)
            stop.set()
            return


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


_EVENTS = "fusion-nb connection events"  # the handler's name: added once


def log_connection_events() -> None:
    """Write the connection's own lines (the client left, SIGTERM, calls still cleaning up) to stderr.

    For a server process (``fusion-nb serve``, ``python -m fusion_nb.mcp.stdio``): a
    host keeps its server's stderr as that server's log, and without a handler Python
    would show warnings only. A library caller configures logging its own way.
    """
    events = logging.getLogger("fusion_nb.mcp")
    if any(handler.get_name() == _EVENTS for handler in events.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_EVENTS)
    handler.setFormatter(logging.Formatter("%(message)s"))
    events.addHandler(handler)
    events.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> None:
    """``python -u -m fusion_nb.mcp.stdio module:app``: serve one app over stdio, exit 0 when the client leaves.

    Ctrl-C (SIGINT) cancels what runs (cleanups run), then exits 130 with one line.
    """
    from .._std_fds import reopen_closed_std_fds

    reopen_closed_std_fds()
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        raise SystemExit("usage: python -u -m fusion_nb.mcp.stdio module:app")
    log_connection_events()
    try:
        anyio.run(serve_stdio, load_app(args[0]))
    except KeyboardInterrupt:
        print("fusion-nb: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
