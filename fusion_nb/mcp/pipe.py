"""One MCP connection over a pair of pipes (stdio), each message straight through the SDK's protocol kernel.

Why not the SDK's stdio transport as it comes: it relays every message through a
pydantic parse, two memory streams, an era-replay stream and task, the dispatcher and
a task per request, and writes through ``anyio.wrap_file`` (each ``write`` and
``flush`` a worker-thread round trip); on a trivial call that plumbing costs several
times what the protocol work does (``benchmarks/stdio.py`` measures both). The
Streamable HTTP endpoint (``streamable.py``) already serves each POST this way.

What stays the SDK's is everything that is protocol: ``ServerRunner.on_request``
validates the request, runs the ``initialize`` handshake, fusion-nb's middleware and
the handler, and shapes the result. What is here is the pipe:

* one reader on the event loop (a non-blocking descriptor: cancellable at any time,
  and nothing waits for the client to close stdin once it has stopped reading). On
  asyncio the loop's readiness callback reads and starts each call in the turn its
  line arrives; the reader task takes over only what must wait (the first request,
  ``initialize``, a notification for the server, a client behind). Lines are
  bounded (``max_line_bytes``): a longer one is skipped as it streams in and
  answered with one error line (for its id, when its first or last bytes name one);
* writes go out on the loop, in order, straight to the descriptor; when the client
  does not read and more than ``pipe_writer.HIGH_WATER`` bytes wait, writers and the reader wait
  (what waits is then that plus the answers of the calls already running); a client
  that has gone away (a broken pipe), or that closed our input and takes nothing
  more (MCP's stdio shutdown with answers unread), ends the connection;
* the first request fixes the era, as the SDK's ``serve_dual_era_loop`` does:
  ``initialize`` opens a 2025-11-25 connection (one ``Connection``, server-to-client
  requests such as elicitation on the same pipe), a request carrying the 2026-07-28
  envelope opens a modern one (a born-ready ``Connection`` per request, no
  server-to-client requests); a later request of the other era is refused;
* ``notifications/cancelled`` cancels the request it names (which is then never
  answered, as on the SDK's transport); at end of input every call still running
  is cancelled (its cleanup runs) and answered ``Connection closed``;
* a line that is not one JSON-RPC message gets one error line (id ``null`` unless
  it named one): JSON-RPC's answer, so a client waiting on a request it mangled is
  not left hanging.

Notifications from the client run in the reader, in order (fusion-nb's are quick:
``notifications/initialized`` remembers the connection).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Coroutine, Mapping
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner, aclose_shielded
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import (
    cancelled_request_id_from_params,
    handler_exception_to_error_data,
)
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    RequestId,
)
from pydantic_core import from_json

from ..engine.lowlevel import Event, Interruptible, current_backend
from . import era
from ._sdk import error_data_of
from .back_channel import BackChannel, counting_ids, lookup, request_key
from .ending import CONNECTION_ENDED, client_cancelled, serving
from .exchange_core import Exchange, Move, acknowledged
from .options import ANSWER_TIMEOUT
from .pipe_reader import MAX_LINE_BYTES, SURROGATE_ESCAPE, LineReader, Oversized, loads_leniently, unreadable, watchable
from .pipe_writer import PipeWriter, answer_line, encode_line, without_surrogates

log = logging.getLogger(__name__)

#: calls running at once on one connection; one more is refused at once (never queued unboundedly)
MAX_IN_FLIGHT = 4096
#: the bound on a last write (an answer to a call the end of input cancelled) to a peer that may not read
_FINAL_WRITE_TIMEOUT = 1.0
#: how long the end of the connection waits for cancelled calls to finish their cleanup
_CLEANUP_TIMEOUT = 10.0
_SERVER_BUSY = -32000
_CLOSED = ErrorData(code=CONNECTION_CLOSED, message="Connection closed")
_TRANSPORT = TransportContext(kind="stdio", can_send_request=True)
_MODERN_TRANSPORT = TransportContext(kind="stdio", can_send_request=False)


def _error(request_id: RequestId | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _error_message(request_id: RequestId | None, error: ErrorData) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.model_dump(mode="json", exclude_none=True)}


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


class _Call:
    """One running request: its exchange (the SDK's dispatch context), and how the reader ends its task.

    ``stop`` may come before the call's task has begun (the end of input, a cancel in
    the chunk that brought the request): ``stopped`` tells the task as it begins.
    """

    __slots__ = ("_cut", "exchange", "stopped")

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.stopped = False
        self._cut: Interruptible | None = None

    def interruptible(self) -> Interruptible:
        """What the call's own task runs in: ``stop`` from elsewhere ends it (made in that task)."""
        self._cut = current_backend().interruptible()
        return self._cut

    def stop(self, because: str) -> None:
        """End the call from the reader or the connection's end (its task may not have begun yet)."""
        self.exchange.ending(because)
        self.stopped = True
        if self._cut is not None:
            self._cut.cancel()


class PipeConnection:
    """One client on a pair of descriptors: its era, its calls, its questions; ``run`` serves it.

    It is also the 2025 connection's standalone channel (``Connection.outbound``):
    server-initiated messages (``tools/list_changed``) go out on the same pipe.
    """

    def __init__(
        self,
        server: Server[Any],
        read_fd: int,
        write_fd: int,
        *,
        lifespan_state: Any = None,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_in_flight: int = MAX_IN_FLIGHT,
        answer_timeout: float | None = ANSWER_TIMEOUT,
    ) -> None:
        self.server = server
        self.lifespan_state = lifespan_state
        self.max_in_flight = max_in_flight
        #: the questions asked of the client (each waits ``answer_timeout``; ``None``: for ever)
        self.questions = BackChannel(answer_timeout, counting_ids())
        self.reader = LineReader(read_fd, max_line_bytes)
        self.writer = PipeWriter(write_fd, self._client_gone)
        self.modern: bool | None = None  # fixed by the first request
        self.connection: Connection | None = None  # the 2025 era's one connection
        self.runner: ServerRunner[Any] | None = None
        self.client_gone = False  # the client stopped reading (a broken pipe)
        self._calls: dict[RequestId, _Call] = {}
        self._lead: list[dict[str, Any]] = []  # notifications before the first request (the SDK replays 8)
        self._running = 0
        self._idle: anyio.Event | None = None
        self._scope = anyio.CancelScope()
        self._ended = False
        self._held: dict[str, Any] | None = None  # a line read that needs the reader task (see ``_serve_ready``)
        self._handover: Event | None = None  # what the reader task waits on while the loop's callback reads
        self._failure: Exception | None = None
        self._left = False  # the client closed our input while behind and took nothing more (``_left_behind``)
        self.finished = anyio.Event()  # set once ``run`` has ended every call

    # -- the connection's standalone channel (Outbound), and writing
    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """Send a notification (dropped once the client has gone)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self.writer.write(encode_line(message))

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Ask the client and wait for its answer (``opts["timeout"]``, else ``answer_timeout``, bounds the wait)."""
        if self._ended or self.modern:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        return await self.questions.ask(self.send, method, params, opts)

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message (the outlet of the connection's exchanges: their notifications and questions)."""
        await self.writer.write(encode_line(message))

    def _client_gone(self) -> None:
        self.client_gone = True
        self.close()

    # -- serving
    def close(self) -> None:
        """End the connection as end of input does (calls cancelled, cleanups run, answered), from the loop."""
        self._scope.cancel()

    async def run(self, stop: anyio.Event | None = None) -> None:
        """Serve until end of input, the client stops reading or ``stop`` is set; every call has ended on return.

        Also when the task serving is cancelled from outside (Ctrl-C under ``asyncio.run``
        cancels the main task): the calls are ended and waited for all the same, so none
        outlives the connection and writes to descriptors its caller has taken back.
        """
        async with anyio.create_task_group() as group:
            group.start_soon(self.writer.run)
            if stop is not None:
                group.start_soon(self._close_when, stop)
            try:
                with self._scope:
                    try:
                        await self._read()
                    finally:
                        self.reader.close()
            finally:
                with anyio.CancelScope(shield=True):
                    await self._end()
                self.finished.set()
                group.cancel_scope.cancel()

    async def _end(self) -> None:
        """End every call (cancelled, cleaned up, answered ``Connection closed``), then the era's connection."""
        self._ended = True
        self.writer.release()  # answers queued for a client behind wait for the final drain, not for room
        self.questions.close()  # no answer: Connection closed
        for running in list(self._calls.values()):
            running.stop(CONNECTION_ENDED)
        with anyio.move_on_after(_CLEANUP_TIMEOUT) as waited:
            while self._running:
                self._idle = anyio.Event()
                await self._idle.wait()
        if waited.cancelled_caught:
            log.warning("fusion-nb: %d call(s) still cleaning up %g s after the end", self._running, _CLEANUP_TIMEOUT)
        if self.connection is not None:
            await aclose_shielded(self.connection)
        if not self._left:  # (it was given that long already)
            await self.writer.drain(_FINAL_WRITE_TIMEOUT)

    async def _read(self) -> None:
        """The reader task: what needs waiting (the era's opening, a notification to the server, a client behind)."""
        reader, writer = self.reader, self.writer
        while not writer.gone:
            if self._held is not None:
                message, self._held = self._held, None
                if "id" in message:
                    await self._request(message)
                else:
                    await self._notify_server(message)
            elif writer.backed_up:
                if await self._left_behind():  # a client that does not read gets no more work done for it
                    return
            elif self._serve_ready():
                if reader.ended:
                    return
                await self._more()

    async def _close_when(self, stop: anyio.Event) -> None:
        await stop.wait()
        self.close()

    async def _left_behind(self) -> bool:
        """Wait while the client is behind; ``True`` once it has left instead, without a broken pipe.

        Left: it closed our input and, for ``_FINAL_WRITE_TIMEOUT``, took nothing of what
        waits for it (as MCP's stdio shutdown goes: close the server's input, wait for it
        to exit; a client that reads, however slowly, is waited for). The connection then
        ends as at end of input; lines it wrote but were not read yet are not served.
        """
        writer = self.writer
        while writer.backed_up and not writer.gone:
            flushed = writer.flushed
            with anyio.move_on_after(_FINAL_WRITE_TIMEOUT):
                await writer.wait_for_room()
            if writer.backed_up and writer.flushed == flushed and self.reader.hung_up():
                log.info("fusion-nb: the MCP client closed stdin and reads nothing more; stopping")
                self._left = True
                return True
        return False

    async def _more(self) -> None:
        """Wait for more input: on asyncio, the loop's readiness callback serves it until a line needs this task."""
        if not self.reader.call_when_readable(self._on_readable):
            await self.reader.fill()
            return
        self._handover = handover = current_backend().new_event()
        await handover.wait()
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def _on_readable(self) -> None:
        """Read what came and serve it in the loop's readiness turn (a task woken would run one turn later)."""
        try:
            if not self.reader.read_nowait():
                return  # the readiness was stale: nothing to read yet
            if self._serve_ready() and not self.reader.ended:
                return
        except Exception as exc:  # a defect: the reader task raises it, as it would have reading itself
            self._failure = exc
        self.reader.pause()
        if self._handover is not None:
            self._handover.set()
            self._handover = None

    def _serve_ready(self) -> bool:
        """Serve the lines read whole, each at once: ``True`` when none is left, ``False`` when the task must go on.

        A request starts its call; what needs waiting is ``_held`` for the reader task
        (the first request, which opens the era; ``initialize``, served inline; a
        notification for the server); a client behind, or gone, stops it too.
        """
        reader, writer = self.reader, self.writer
        while not (writer.backed_up or writer.gone):
            line = reader.take()
            if line is None:
                return True
            if isinstance(line, Oversized):
                self._refuse_oversized(line)
                continue
            message = self._parse(line)
            if message is None:
                continue
            if "method" not in message:
                self.questions.answered(message)
            elif "id" not in message:
                if not self._notice(message):
                    self._held = message
                    return False
            elif self.modern is None or message["method"] == "initialize":
                self._held = message
                return False
            else:
                self._start(message)
        return False

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        """The line as one JSON-RPC message, or ``None`` (refused with one error line, or blank)."""
        if not line.strip():
            return None
        try:
            message = from_json(line)  # pydantic-core: a quarter of json.loads' time
        except ValueError:
            try:
                message = loads_leniently(line)
            except (ValueError, RecursionError) as exc:
                self._refuse(None, PARSE_ERROR, f"Parse error: {unreadable(exc)}.")
                return None
        if SURROGATE_ESCAPE.search(line) is not None:
            message = without_surrogates(message)  # as on the way out: U+FFFD for a lone surrogate
        if not isinstance(message, dict):
            kind = "a batch" if isinstance(message, list) else f"a JSON {type(message).__name__}"
            self._refuse(None, INVALID_REQUEST, f"Invalid Request: expected one JSON-RPC object, got {kind}.")
            return None
        request_id = message.get("id")
        named = request_id if _is_id(request_id) else None
        if "method" not in message and ("result" in message or "error" in message):
            # a response: never answered (JSON-RPC), not even a malformed one; one naming a question
            # the server asked settles it (``BackChannel.answered``: a malformed one as an error, never a wait forever)
            if named is None:
                log.debug("dropped a response without a usable id (%r)", request_id)
                return None
            return message
        if message.get("jsonrpc") != "2.0":
            self._refuse(named, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0".')
            return None
        if "id" in message and not _is_id(request_id):
            self._refuse(None, INVALID_REQUEST, "Invalid Request: an id must be a string or an integer.")
            return None
        if "method" in message:
            if not isinstance(message["method"], str):
                self._refuse(named, INVALID_REQUEST, 'Invalid Request: "method" must be a string.')
                return None
            params = message.get("params")
            if params is not None and not isinstance(params, dict):
                self._refuse(named, INVALID_REQUEST, 'Invalid Request: "params" must be an object.')
                return None
            return message
        self._refuse(
            named, INVALID_REQUEST, 'Invalid Request: expected a "method", or an id with a "result" or "error".'
        )
        return None

    def _refuse(self, request_id: RequestId | None, code: int, message: str) -> None:
        """Answer a message that cannot be served with one error line (queued: the reader never waits on it)."""
        self.writer.write_nowait(encode_line(_error(request_id, code, message)))

    def _refuse_oversized(self, line: Oversized) -> None:
        """One error line for a line over the limit (for its id, when its edges name one)."""
        limit = self.reader.limit
        self._refuse(
            line.request_id(),
            INVALID_REQUEST,
            f"Request too large: a line of {line.size:,} bytes was skipped (at most {limit:,} bytes per message).",
        )

    async def _request(self, message: dict[str, Any]) -> None:
        """A request the reader task serves: the first one (it fixes the era), or ``initialize``."""
        if self.modern is None:
            await self._open(message["method"], message.get("params"))
        call = self._start(message)
        if call is not None:
            await call  # initialize, inline as the SDK's loop does: a pipelined next request sees the handshake done

    def _start(self, message: dict[str, Any]) -> Coroutine[Any, Any, None] | None:
        """Start one request's call, or refuse it; ``initialize``'s call is returned to be awaited instead."""
        method: str = message["method"]
        params: dict[str, Any] | None = message.get("params")
        request_id: RequestId = message["id"]
        if len(self._calls) >= self.max_in_flight:
            self._refuse(
                request_id,
                _SERVER_BUSY,
                f"Server busy: {self.max_in_flight} calls in flight; retry once one has ended.",
            )
            return None
        modern = bool(self.modern)
        refusal = era.refusal_on_handshake(method, params) if not modern else None
        if refusal is not None:
            self.writer.write_nowait(encode_line(_error_message(request_id, refusal)))
            return None
        key = request_key(request_id)  # ("7" and 7 are one id, for calls as for answers)
        running = self._calls.get(key)
        if running is not None and not running.stopped:  # (one the client cancelled may be reused at once)
            self._refuse(
                request_id,
                INVALID_REQUEST,
                f"Invalid Request: id {_shown(request_id)} is in use by a call still running; "
                "send each request with an id of its own.",
            )
            return None
        if modern:
            exchange = Exchange(self, request_id, params, _MODERN_TRANSPORT)
        else:
            exchange = Exchange(self, request_id, params, _TRANSPORT, questions=self.questions)
        running = self._calls[key] = _Call(exchange)
        self._running += 1
        call = self._serve(running, key, method, params)
        if method == "initialize":
            return call
        # its first step at once where the loop can: a quick call answers without a loop turn of its own
        # (no done callback: ``_serve``'s ``finally`` counts it, and nothing cancels it before it starts)
        current_backend().spawn_eager(call, "fusion-nb stdio call", None)
        return None

    async def _open(self, method: str, params: dict[str, Any] | None) -> None:
        """The first request fixes the era; the notifications before it are replayed into it."""
        self.modern = era.opens_modern(method, params)
        if not self.modern:
            self.connection = Connection.for_loop(self)
            self.runner = ServerRunner(self.server, self.connection, self.lifespan_state)
        lead, self._lead = self._lead, []
        for message in lead:
            await self._notify_server(message)

    async def _serve(self, running: _Call, key: RequestId, method: str, params: Any) -> None:
        """Run one request and write its answer (none for a call the client cancelled)."""
        exchange = running.exchange
        request_id = exchange.request_id
        answer: dict[str, Any] | None = None
        serving.set(exchange)  # (this task serves this request alone)
        try:
            with running.interruptible() as cut:
                try:
                    if running.stopped:  # before its task began
                        if exchange.cancelled_by_client:
                            await cut.cancel_here()  # the client took it back: it never runs
                        # the end of input: cancelled at its first wait, as a running call is (a quick one answers)
                        current_backend().call_soon(cut.cancel)
                    result = await self._on_request(exchange, method, params)
                    answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
                except Exception as exc:
                    error = handler_exception_to_error_data(exc) or error_data_of(exc)
                    answer = _error_message(request_id, error)
                finally:
                    exchange.state.apply(Move.SETTLE)
                    if self._calls.get(key) is running:
                        del self._calls[key]
            if exchange.cancelled_by_client or (answer is None and self.writer.gone):
                exchange.state.apply(Move.ABANDON)
                return
            exchange.state.apply(Move.ANSWER)
            if answer is None:  # cancelled by the end of the connection
                answer = _error(request_id, CONNECTION_CLOSED, "Connection closed")
                with anyio.move_on_after(_FINAL_WRITE_TIMEOUT, shield=True):
                    await self.writer.write(encode_line(answer))
                return
            # alone: no other call runs, and no line read but not yet served could start one this turn
            alone = self._running == 1 and not self.reader.buffered
            await self.writer.write(answer_line(method, answer), gather=not alone)
        finally:
            self._running -= 1
            if not self._running and self._idle is not None:
                self._idle.set()

    async def _on_request(self, exchange: Exchange, method: str, params: Any) -> dict[str, Any]:
        if self.runner is not None:
            return await self.runner.on_request(exchange, method, params)
        connection = era.modern_connection(era.modern_route(method, params))
        runner: ServerRunner[Any] = ServerRunner(self.server, connection, self.lifespan_state)
        try:
            return await runner.on_request(exchange, method, params)
        finally:
            await aclose_shielded(connection)

    def _notice(self, message: dict[str, Any]) -> bool:
        """What a notification does at once (a cancel stops its call); ``False``: the server must hear it too."""
        if message["method"] == "notifications/cancelled":
            named = cancelled_request_id_from_params(message.get("params"))
            running = lookup(self._calls, named)
            if running is not None and not running.exchange.settled:
                running.exchange.cancel_requested.set()
                running.stop(client_cancelled(message.get("params")))
        if self.modern is None:
            if len(self._lead) < 8:
                self._lead.append(message)  # replayed into the era the first request opens
            return True
        return False

    async def _notify_server(self, message: dict[str, Any]) -> None:
        method: str = message["method"]
        params: dict[str, Any] | None = message.get("params")
        exchange = acknowledged(_MODERN_TRANSPORT if self.modern else _TRANSPORT)
        try:
            if self.runner is not None:
                await self.runner.on_notify(exchange, method, params)
            else:
                connection = era.notification_connection()
                try:
                    await ServerRunner(self.server, connection, self.lifespan_state).on_notify(exchange, method, params)
                finally:
                    await aclose_shielded(connection)
        except Exception:
            log.exception("MCP notification handler for %r failed", method)


def _shown(request_id: RequestId) -> str:
    """A request id as its sender wrote it, at most 40 characters."""
    text = json.dumps(request_id)
    return text if len(text) <= 40 else text[:39] + "…"


async def serve_pipe(
    server: Server[Any],
    read_fd: int,
    write_fd: int,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_in_flight: int = MAX_IN_FLIGHT,
    stop: anyio.Event | None = None,
    answer_timeout: float | None = ANSWER_TIMEOUT,
) -> bool:
    """Serve ``server`` to one client on ``read_fd``/``write_fd`` (pipes or files), in its lifespan.

    Returns whether the client stopped reading (a broken pipe) rather than ending
    its input. ``stop`` set ends the connection as end of input does. A pipe
    descriptor is read and written non-blocking: the caller restores its mode if it
    shares the descriptor.
    """
    async with server.lifespan(server) as state:
        connection = PipeConnection(
            server,
            read_fd,
            write_fd,
            lifespan_state=state,
            max_line_bytes=max_line_bytes,
            max_in_flight=max_in_flight,
            answer_timeout=answer_timeout,
        )
        await connection.run(stop)
    return connection.client_gone


__all__ = [
    "MAX_IN_FLIGHT",
    "MAX_LINE_BYTES",
    "LineReader",
    "Oversized",
    "PipeConnection",
    "PipeWriter",
    "serve_pipe",
    "watchable",
]
