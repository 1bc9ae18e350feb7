"""One POST's response as an exchange's outlet: plain JSON until the call emits, then an event stream.

Why an outlet of its own: the exchange (``exchange_core.Exchange``, the SDK's
dispatch context) is the same on both transports; what differs is where its
messages go. A POST's answer is plain ``application/json`` when the call emitted
nothing (the spec lets the server choose per POST), and ``text/event-stream`` from
the call's first notification or server-to-client request on, with the answer as
its last event. The choice is the exchange's ``ExchangeState`` (its ``Phase`` x
``Move`` table): this module asks it what may happen, writes, and records what did.
On a 2025 session's stream every event carries an id and is kept in the stream's
``EventLog`` (``resume``), so a client whose stream dropped can resume it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.runner import ServerRunner
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ErrorData, JSONRPCError, JSONRPCResponse, RequestId
from starlette.requests import Request
from starlette.types import Send

from ._sdk import error_data_of
from .ending import STREAM_GONE, serving
from .exchange_core import Exchange, Move, Phase
from .wire import KEEPALIVE, SESSION_HEADER_BYTES, SSE_HEADERS, dump, encode, event, preencoded, respond, response_with

if TYPE_CHECKING:
    from .resume import EventLog
    from .sessions import Session

log = logging.getLogger("fusion_nb.http")

REQUEST_CANCELLED = -32800
"""The 2025 wire's answer to a request the client (or the session's end) cancelled."""


class ResponseOutlet:
    """Where one POSTed request's exchange writes: this POST's response (its ``exchange`` is made with it).

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
        can_ask = session is not None and request_id is not None
        self.exchange = Exchange(
            self,
            request_id,
            params,
            TransportContext(kind="streamable-http", can_send_request=can_ask, headers=request.headers),
            questions=session.questions if session is not None else None,
            message_metadata=ServerMessageMetadata(request_context=request, can_send_request=can_ask),
        )
        self.state = self.exchange.state
        self._lock: anyio.Lock | None = None
        self._log: EventLog | None = None
        self._cancel_call = cancel_call  # a 2025 call's cancel: ends a call asking on a vanished stream

    async def send(self, message: dict[str, Any]) -> None:
        """A notification or question of the call's, on this POST's stream (dropped once the call has settled)."""
        await self.emit(encode(message))

    def disconnected(self) -> None:
        """The client's POST is gone: a question on its stream can never be seen, so a call asking one ends.

        A 2025 call otherwise runs on after its client leaves (that era's rule), its
        events kept for a client that resumes the stream; one that waits for an
        answer only the vanished stream could have prompted would wait for ever,
        holding its slots.
        """
        self.state.disconnect()
        if self.exchange.asking and self._cancel_call is not None:
            self.exchange.ending(STREAM_GONE)
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
        exchange = self.exchange
        serving.set(exchange)  # (the task serving this POST serves this request alone)
        try:
            result = await runner.on_request(exchange, method, params)
        except Exception as exc:
            self.state.apply(Move.SETTLE)
            error = error_data_of(exc)
            await self._finish(dump(JSONRPCError(jsonrpc="2.0", id=exchange.request_id, error=error)), error.code)
            return False
        self.state.apply(Move.SETTLE)
        request_id = exchange.request_id
        assert request_id is not None
        body = preencoded(result, ascii=True) if method.endswith("/list") else None  # a list page's bytes (``pages``)
        if body is not None:
            await self._finish(response_with(request_id, body, ascii=True), None)
        else:
            await self._finish(dump(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)), None)
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
            await self._finish(dump(JSONRPCError(jsonrpc="2.0", id=self.exchange.request_id, error=error)), None)

    def abandon(self) -> None:
        """End an exchange that will get no answer (its 2026 client left); idempotent once ended."""
        if not self.state.ended:
            self.state.apply(Move.ABANDON)
            self._end_log()

    def _end_log(self) -> None:
        if self._log is not None:
            self._log.end()
