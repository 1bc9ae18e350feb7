"""One POSTed request's exchange: its state machine, and the SDK ``DispatchContext`` that writes by it.

Why a machine: an exchange is written to by its call (notifications, questions,
the answer), by its supervisor (keepalives) and ended by whatever stops the call
(its result, an error, a client's cancel, a session's end, a disconnect). When
that state lived in booleans flipped from several methods, which combinations could
happen was nowhere written down. Here, as in h11's ``_state.py``, ``ExchangeState``
holds every state and every legal move in one table and does no I/O; the I/O code
(``PostExchange``) asks it what may happen, acts, and records what did. A move not
in the table raises, so an impossible state cannot be reached silently.

A POST's answer is plain ``application/json`` when the call emitted nothing (the spec
lets the server choose per POST), and ``text/event-stream`` from the call's first
notification or server-to-client request on, with the answer as its last event. On
a 2025 session's stream every event carries an id and is kept in the stream's
``EventLog`` (``resume``), so a client whose stream dropped can resume it.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.runner import ServerRunner
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCResponse, RequestId
from starlette.requests import Request
from starlette.types import Send

from ._sdk import error_data_of
from .ending import STREAM_GONE, serving
from .wire import KEEPALIVE, SESSION_HEADER_BYTES, SSE_HEADERS, dump, encode, event, preencoded, respond, response_with

if TYPE_CHECKING:
    from .resume import EventLog
    from .sessions import Session

log = logging.getLogger("fusion_nb.http")

REQUEST_CANCELLED = -32800
"""The 2025 wire's answer to a request the client (or the session's end) cancelled."""


class Phase(enum.Enum):
    """Where one exchange is: is its call still running, what has its response committed to."""

    RUNNING = "running"
    """The call runs and nothing is written: its answer may still be plain JSON."""
    STREAMING = "streaming"
    """The call runs and the response is an event stream (something was written)."""
    SETTLED = "settled"
    """The call has its outcome, nothing was written: the answer will be plain JSON."""
    SETTLED_STREAMING = "settled streaming"
    """The call has its outcome: the answer will be the stream's last event."""
    ANSWERED = "answered"
    """The answer is committed (being written, or written): the exchange is over."""
    ABANDONED = "abandoned"
    """The client left a 2026 exchange (its call was cancelled), or a cut ended the answer: over, unanswered."""


class Move(enum.Enum):
    """What can happen to an exchange."""

    STREAM = "stream"
    """A notification, a server-to-client request or a keepalive is written while the call runs."""
    SETTLE = "settle"
    """The call ended: its handler returned or raised, or it was cancelled."""
    ANSWER = "answer"
    """The exchange's one answer (result, error or ``Request cancelled``) is written."""
    ABANDON = "abandon"
    """The exchange ends without an answer."""


class Client(enum.Enum):
    """Whether the POST that carries the exchange's response is still connected."""

    CONNECTED = "connected"
    GONE = "gone"


_MOVES: dict[Phase, dict[Move, Phase]] = {
    Phase.RUNNING: {Move.STREAM: Phase.STREAMING, Move.SETTLE: Phase.SETTLED, Move.ABANDON: Phase.ABANDONED},
    Phase.STREAMING: {
        Move.STREAM: Phase.STREAMING,
        Move.SETTLE: Phase.SETTLED_STREAMING,
        Move.ABANDON: Phase.ABANDONED,
    },
    Phase.SETTLED: {Move.ANSWER: Phase.ANSWERED, Move.ABANDON: Phase.ABANDONED},
    Phase.SETTLED_STREAMING: {Move.ANSWER: Phase.ANSWERED, Move.ABANDON: Phase.ABANDONED},
    Phase.ANSWERED: {},
    Phase.ABANDONED: {},
}
"""Every legal move of an exchange, and where it leads. Nothing else changes ``Phase``."""

ENDED = frozenset({Phase.ANSWERED, Phase.ABANDONED})
RUNNING = frozenset({Phase.RUNNING, Phase.STREAMING})
STREAMED = frozenset({Phase.STREAMING, Phase.SETTLED_STREAMING})


class ExchangeStateError(RuntimeError):
    """A move the exchange's state does not allow (a bug in the endpoint, never a client's doing)."""


class ExchangeState:
    """An exchange's state machine: ``phase`` and ``client``, changed only by ``apply`` and ``disconnect``."""

    __slots__ = ("client", "phase")

    def __init__(self) -> None:
        self.phase = Phase.RUNNING
        self.client = Client.CONNECTED

    def allows(self, move: Move) -> bool:
        return move in _MOVES[self.phase]

    def apply(self, move: Move) -> Phase:
        """Make ``move``; raises ``ExchangeStateError`` when the current phase does not allow it."""
        try:
            self.phase = _MOVES[self.phase][move]
        except KeyError:
            raise ExchangeStateError(f"an exchange in phase {self.phase.value!r} cannot {move.value}") from None
        return self.phase

    def disconnect(self) -> None:
        """The client's POST went away (once; the phase is not changed by it: a 2025 call runs on)."""
        if self.client is Client.GONE:
            raise ExchangeStateError("an exchange's client cannot disconnect twice")
        self.client = Client.GONE

    @property
    def running(self) -> bool:
        return self.phase in RUNNING

    @property
    def ended(self) -> bool:
        return self.phase in ENDED


class PostExchange:
    """The SDK's ``DispatchContext`` for one POSTed request: what the call sends rides this POST's response.

    Nothing is written until the call emits or ends: a call that ends without
    emitting is answered with plain JSON; the first notification (or
    server-to-client request) commits the response to an event stream. Once the
    call has settled, late notifications are dropped.
    """

    def __init__(
        self,
        send: Send,
        request: Request,
        request_id: RequestId | None,
        params: Mapping[str, Any] | None,
        *,
        session: Session | None,
        modern: bool,
        opening: bool = False,
        cancel_call: Callable[[], None] | None = None,
    ) -> None:
        self._send = send
        self._session = session
        self._opening = opening  # a failed opening request names no session (it is ended)
        self._modern = modern
        self.request_id = request_id
        self.progress_token = progress_token_from_params(params)
        can_ask = session is not None and request_id is not None
        self.transport = TransportContext(kind="streamable-http", can_send_request=can_ask, headers=request.headers)
        self.message_metadata = ServerMessageMetadata(request_context=request, can_send_request=can_ask)
        self.state = ExchangeState()
        self._lock: anyio.Lock | None = None
        self._cancel_requested: anyio.Event | None = None
        self._log: EventLog | None = None
        self._cancel_call = cancel_call  # a 2025 call's cancel: ends a call asking on a vanished stream
        self._asking = 0
        self.why: str | None = None  # why the transport is ending the call early (see ``ending``)

    def ending(self, because: str) -> None:
        """The transport is about to cancel this request: the call's sentence will say ``because``."""
        if self.why is None:
            self.why = because

    def ended_because(self) -> str | None:
        return self.why

    @property
    def can_send_request(self) -> bool:
        """Whether a server-to-client request can ride this POST's stream (2025 sessions, while the call runs)."""
        return self.transport.can_send_request and self.state.running

    @property
    def settled(self) -> bool:
        """Whether the call has its outcome (a late ``notifications/cancelled`` must not undo it)."""
        return not self.state.running

    @property
    def gone(self) -> bool:
        """Whether the client's POST (this response's stream) has disconnected."""
        return self.state.client is Client.GONE

    @property
    def cancel_requested(self) -> anyio.Event:
        """Set when the client sends ``notifications/cancelled`` for this request."""
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """Send a notification on this POST's stream (dropped once the call has settled)."""
        if not self.state.running:
            log.debug("dropped %s: its request has settled", method)
            return
        body = dict(params) if params is not None else None
        await self.emit(dump(JSONRPCNotification(jsonrpc="2.0", method=method, params=body)))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """``notifications/progress`` for this request, when the client sent a progress token.

        The SDK's own exchange contexts spell the same lines, but on private classes
        (``_SingleExchangeDispatchContext``); ``DispatchContext`` leaves ``progress``
        to each implementation and the SDK publishes no helper to build its
        parameters, so this is this context's own.
        """
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Ask the client (2025 sessions only) on this POST's stream; its answer arrives by another POST."""
        if not self.can_send_request or self._session is None or self.gone:
            raise NoBackChannelError(method)
        self._asking += 1
        try:
            return await self._session.questions.ask(self._emit_message, method, params, opts)
        finally:
            self._asking -= 1

    async def _emit_message(self, message: dict[str, Any]) -> None:
        await self.emit(encode(message))

    def disconnected(self) -> None:
        """The client's POST is gone: a question on its stream can never be seen, so a call asking one ends.

        A 2025 call otherwise runs on after its client leaves (that era's rule), its
        events kept for a client that resumes the stream; one that waits for an
        answer only the vanished stream could have prompted would wait for ever,
        holding its slots.
        """
        self.state.disconnect()
        if self._asking and self._cancel_call is not None:
            self.ending(STREAM_GONE)
            self._cancel_call()

    async def emit(self, payload: bytes) -> None:
        """Write one event, committing the response to an event stream first if needed (dropped once settled)."""
        async with self._writing():
            if self.state.running:
                await self._stream(payload)

    async def keepalive(self) -> None:
        """A comment line on a call that has been silent, so that no proxy's idle-read timeout cuts it."""
        async with self._writing():
            if self.state.running:
                await self._stream(None)

    def _writing(self) -> anyio.Lock:
        """The lock ordering the call's writes with the supervisor's (made once either writes)."""
        if self._lock is None:
            self._lock = anyio.Lock()
        return self._lock

    async def _stream(self, payload: bytes | None) -> None:
        """Write an event (``payload``) or a keepalive (``None``) on the stream, opening it first."""
        if self.state.phase is Phase.RUNNING:
            if self._session is not None:
                self._log = self._session.logs.open()
            self.state.apply(Move.STREAM)
            await self._send({"type": "http.response.start", "status": 200, "headers": self._headers(SSE_HEADERS)})
        await self._send({"type": "http.response.body", "body": self._frame(payload), "more_body": True})

    def _frame(self, payload: bytes | None) -> bytes:
        if payload is None:
            return KEEPALIVE
        return event(payload) if self._log is None else self._log.append(payload)[1]

    def _headers(self, fields: list[tuple[bytes, bytes]], failed: bool = False) -> list[tuple[bytes, bytes]]:
        if self._session is None or (failed and self._opening):
            return fields
        return [*fields, (SESSION_HEADER_BYTES, self._session.id.encode())]

    async def run(self, runner: ServerRunner[Any], method: str, params: Mapping[str, Any] | None) -> bool:
        """Serve the request through the SDK's kernel and answer it; ``False`` if it ended in an error.

        Cancellation (a disconnect on 2026, ``notifications/cancelled`` or a session's
        end on 2025) propagates; the caller then ends the exchange (``end_cancelled``
        or ``abandon``).
        """
        serving.set(self)  # (the task serving this POST serves this request alone)
        try:
            result = await runner.on_request(self, method, params)
        except Exception as exc:
            self.state.apply(Move.SETTLE)
            error = error_data_of(exc)
            await self._finish(dump(JSONRPCError(jsonrpc="2.0", id=self.request_id, error=error)), error.code)
            return False
        self.state.apply(Move.SETTLE)
        assert self.request_id is not None
        body = preencoded(result, ascii=True) if method.endswith("/list") else None  # a list page's bytes (``pages``)
        if body is not None:
            await self._finish(response_with(self.request_id, body, ascii=True), None)
        else:
            await self._finish(dump(JSONRPCResponse(jsonrpc="2.0", id=self.request_id, result=result)), None)
        return True

    async def _finish(self, payload: bytes, error_code: int | None) -> None:
        if self._lock is None:  # nothing else has written, and nothing will: the call has settled
            await self._answer(payload, error_code)
        else:
            async with self._lock:
                await self._answer(payload, error_code)

    async def _answer(self, payload: bytes, error_code: int | None) -> None:
        streamed = self.state.phase is Phase.SETTLED_STREAMING
        self.state.apply(Move.ANSWER)
        if streamed:
            try:
                await self._send({"type": "http.response.body", "body": self._frame(payload), "more_body": False})
            finally:
                self._end_log()
            return
        status = ERROR_CODE_HTTP_STATUS.get(error_code, 200) if self._modern and error_code is not None else 200
        await respond(self._send, status, payload, self._headers([], failed=error_code is not None))

    async def end_cancelled(self) -> None:
        """End a cancelled 2025 request's exchange with its one answer, ``-32800 Request cancelled``.

        That era's stream for a request ends only with a response for its id (the SDK's
        transport answers the same way, and keeps that answer for a resuming client),
        so the client learns the request is over. An exchange already answered is left
        as it is.
        """
        if self.state.ended:
            return
        if self.state.running:
            self.state.apply(Move.SETTLE)
        error = ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
        with anyio.CancelScope(shield=True):
            await self._finish(dump(JSONRPCError(jsonrpc="2.0", id=self.request_id, error=error)), None)

    def abandon(self) -> None:
        """End an exchange that will get no answer (its 2026 client left); idempotent once ended."""
        if not self.state.ended:
            self.state.apply(Move.ABANDON)
            self._end_log()

    def _end_log(self) -> None:
        if self._log is not None:
            self._log.end()
