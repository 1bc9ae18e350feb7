"""The Streamable HTTP endpoint on the SDK's protocol kernel: routing by era, each POST served in its own task.

Why not the SDK's transport as it comes: it carries every message through memory
streams into a per-session read loop and back out, with a task group per POST for
the response stream; on a trivial call that plumbing costs several times what the
protocol work does (``benchmarks/http.py`` measures both, side by side). What stays
the SDK's is everything that is protocol: ``ServerRunner.on_request`` validates the
request, runs the ``initialize`` handshake, fusion-nb's middleware and the handler,
and shapes the result; the JSON-RPC messages are the SDK's models; the 2026
validation ladder, the Accept rules, DNS-rebinding checks and body limits are the
SDK's functions.

Each request is decided once. On 2026-07-28 this endpoint runs the ladder's checks
itself and answers a refusal with the bytes and status the SDK's entry would
(``tests/mcp/test_http_differential.py`` compares them); only what it does not serve
goes to ``fallback``, the SDK's own entry: non-POST methods and every request of a
server without ``get_tool_input_schema`` untouched, and ``subscriptions/listen``
streams (recognised by their body, handed on with it before any check here, so the
entry checks them once).

* 2026-07-28: each POST builds a born-ready ``Connection`` from its envelope; a
  client that disconnects cancels its call.
* 2025-11-25: ``Sessions`` (``sessions``) keeps one ``Connection`` and
  ``ServerRunner`` per ``Mcp-Session-Id``, owned by the bearer token that opened it.
  The POST carrying a client's answer to ``elicitation/create`` wakes the call
  waiting for it; ``notifications/cancelled`` cancels the call it names; ``GET``
  opens the session's stream for server-initiated messages, or with
  ``Last-Event-ID`` resumes a stream that dropped (``resume``); ``DELETE`` ends the
  session. A disconnect does not cancel a call (that era's rule).

One POST's exchange is ``exchange_core``'s, written through ``exchange.ResponseOutlet``; the bytes are ``wire``.
``http_app`` uses this for its default mode; ``json_response=True`` and
``stateless=True`` keep the SDK's transport.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner, aclose_shielded
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    InboundLadderRejection,
    unsupported_protocol_version_rejection,
)
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..engine.lowlevel import current_backend
from . import era
from ._sdk import accepted_media
from .back_channel import lookup, request_key
from .ending import CLIENT_DISCONNECTED
from .exchange import ResponseOutlet
from .exchange_core import Exchange, acknowledged
from .limits import RETRY_AFTER, OwnerQuota, RateLimitedLog
from .resume import EventLog
from .sessions import ANSWER_TIMEOUT, Session, Sessions
from .wire import KEEPALIVE, SESSION_HEADER, SESSION_HEADER_BYTES, SSE_HEADERS, refuse, reject, respond

_lookup = lookup  # re-exported: its tests import it from here, as before the split

__all__ = ["ANSWER_TIMEOUT", "KEEPALIVE_SECONDS", "ResponseOutlet", "Session", "Sessions", "StreamableEndpoint"]

log = logging.getLogger("fusion_nb.http")

_VERSION_HEADER = b"mcp-protocol-version"
_LAST_EVENT_ID = "last-event-id"
KEEPALIVE_SECONDS = 15.0
"""A call (or ``GET`` stream) silent this long gets a comment line, and then again every so often,
so that a proxy's idle-read timeout does not cut it (the SDK's transport does the same)."""
_FINAL_WRITE_TIMEOUT = 5.0
_INVALID_BODY = "Body must be a single JSON-RPC request or notification object"
_UNREADABLE = object()  # a body that is not JSON


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands out an already-read body once, then defers to the real one."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


async def _disconnected(receive: Receive) -> None:
    """Return once the client has gone away (the body has been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once the client goes away."""
    await _disconnected(receive)
    scope.cancel()


async def _supervise(outlet: ResponseOutlet, receive: Receive, cancel_on_disconnect: anyio.CancelScope | None) -> None:
    """While a call runs: a keepalive every ``KEEPALIVE_SECONDS``; if its client goes, cancel (2026) or stop (2025)."""
    while True:
        with anyio.move_on_after(KEEPALIVE_SECONDS):
            await _disconnected(receive)
            if cancel_on_disconnect is not None:
                outlet.exchange.ending(CLIENT_DISCONNECTED)
                cancel_on_disconnect.cancel()
            outlet.disconnected()
            return
        await outlet.keepalive()


def _supervising(
    outlet: ResponseOutlet, receive: Receive, cancel_on_disconnect: anyio.CancelScope | None
) -> Callable[[], None]:
    """Supervise a call (``_supervise``) once it has let the loop run; returns the function that stops it.

    The supervisor starts only at the loop's next turn (on asyncio: a ``call_soon``).
    A call that completes without suspending, as most quick tools do, never pays for
    a task: starting, then cancelling one costs two extra loop turns (measured by
    ``benchmarks/http.py``'s quick calls).
    """
    supervise = partial(_supervise, outlet, receive, cancel_on_disconnect)
    return current_backend().start_later(supervise, "fusion-nb call supervisor")


async def _stream_response(
    send: Send, session: Session, receive: Receive, frames: Callable[[], Any], replaced: anyio.CancelScope | None = None
) -> None:
    """An event stream response of ``session``: each frame ``frames()`` yields, until it ends or the client goes."""
    headers = [*SSE_HEADERS, (SESSION_HEADER_BYTES, session.id.encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    with replaced if replaced is not None else anyio.CancelScope():
        async with anyio.create_task_group() as group:
            group.start_soon(_cancel_on_disconnect, receive, group.cancel_scope)
            async for chunk in frames():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            group.cancel_scope.cancel()
    # bounded: a half-open connection may never drain what is still queued for it
    with anyio.move_on_after(_FINAL_WRITE_TIMEOUT, shield=True):
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class StreamableEndpoint:
    """The ASGI endpoint of the MCP path, both eras; ``fallback`` (the SDK's own entry) serves what this does not."""

    def __init__(
        self,
        server: Server[Any],
        fallback: ASGIApp,
        security: TransportSecuritySettings,
        *,
        max_sessions: int | None = 10_000,
        idle_timeout: float | None = 30 * 60,
        max_sessions_per_owner: int | None = None,
        max_listens_per_owner: int | None = None,
        answer_timeout: float | None = ANSWER_TIMEOUT,
        session_prefix: str = "",
    ) -> None:
        self.server = server
        self.fallback = fallback
        self.security = TransportSecurityMiddleware(security)
        self.sessions = Sessions(
            server,
            max_sessions=max_sessions,
            idle_timeout=idle_timeout,
            max_per_owner=max_sessions_per_owner,
            answer_timeout=answer_timeout,
            id_prefix=session_prefix,
        )
        # below the SDK's own 1,024 (an INTERNAL_ERROR without Retry-After), so this 503 comes first
        self.listens = OwnerQuota("listen streams", per_owner=max_listens_per_owner, total=_MAX_LISTENS)
        # without a schema lookup the SDK's entry finds schemas through tools/list: it serves 2026 whole
        self._serves_modern = server.get_tool_input_schema is not None
        self._param_headers = era.ParamHeaders(server)
        # one limiter per kind of refusal: a stranger's repeats must not hide the session limit
        self._listen_refusals = RateLimitedLog(log)
        self._owner_refusals = RateLimitedLog(log)
        self._session_refusals = RateLimitedLog(log)

    def end_streams(self) -> None:
        """End the sessions' ``GET`` streams (a stopping server calls this before it drains)."""
        self.sessions.end_streams()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route by era the way the SDK does: a non-handshake ``MCP-Protocol-Version`` is 2026-07-28."""
        version = next((value for key, value in scope["headers"] if key == _VERSION_HEADER), None)
        if era.routes_modern(version):
            if scope["method"] == "POST" and self._serves_modern:
                await self._modern(scope, receive, send)
            else:
                await self.fallback(scope, receive, send)
            return
        await self._legacy(scope, receive, send)

    # -- 2026-07-28
    async def _modern(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One 2026 POST, through the SDK's ladder in the SDK entry's order; a refusal answered as it answers.

        A ``subscriptions/listen`` request is recognised by its body alone and handed
        to the SDK's entry before any check here: the entry checks it whole, once.
        """
        request = Request(scope, receive)
        body = await request.body()
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            decoded = _UNREADABLE
        if type(decoded) is dict and decoded.get("method") == "subscriptions/listen" and "id" in decoded:
            await self._listen(scope, body, receive, send)
            return
        refusal = await self.security.validate_request(request, is_post=True)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        has_json, has_sse = accepted_media(request)
        if not (has_json and has_sse):
            await respond(send, 406, b"")
            return
        if decoded is _UNREADABLE:
            await reject(send, None, PARSE_ERROR, "Parse error")
            return
        if isinstance(decoded, dict) and "id" not in decoded:
            await self._acknowledge(request, decoded, send)
            return
        try:
            message = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            await reject(send, None, INVALID_REQUEST, _INVALID_BODY)
            return
        headers = request.headers
        verdict = era.ladder(decoded, headers.items())
        if isinstance(verdict, InboundLadderRejection):
            await reject(send, message.id, verdict.code, verdict.message, verdict.data)
            return
        if message.method == "tools/call":
            rejection = self._param_headers.rejection(message.params, headers)
            if rejection is not None:
                await reject(send, message.id, rejection.code, rejection.message, rejection.data)
                return
        await self._serve_modern(request, message, era.modern_connection(verdict), receive, send)

    async def _serve_modern(
        self, request: Request, message: JSONRPCRequest, connection: Connection, receive: Receive, send: Send
    ) -> None:
        outlet = ResponseOutlet(send, request, message.id, message.params, session=None, modern=True)
        runner: ServerRunner[Any] = ServerRunner(self.server, connection, self.sessions.lifespan_state)
        cancel = anyio.CancelScope()
        stop_supervising = _supervising(outlet, receive, cancel)
        try:
            with cancel:
                await outlet.run(runner, message.method, message.params)
        finally:
            stop_supervising()
            await aclose_shielded(connection)
        if not outlet.state.ended:
            outlet.abandon()
            log.debug("MCP client disconnected during %s (id %r); the call was cancelled", message.method, message.id)

    async def _acknowledge(self, request: Request, decoded: dict[str, Any], send: Send) -> None:
        """An id-less 2026 POST: ``202`` for a notification at a served version, else the SDK entry's refusal."""
        try:
            JSONRPCNotification.model_validate(decoded)
        except ValidationError:
            await reject(send, None, INVALID_REQUEST, _INVALID_BODY)
            return
        unsupported = unsupported_protocol_version_rejection(request.headers.get("mcp-protocol-version", ""))
        if unsupported is not None:
            await reject(send, None, unsupported.code, unsupported.message, unsupported.data)
            return
        await respond(send, 202, b"")

    async def _listen(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """A ``subscriptions/listen`` stream, served by the SDK's entry within its owner's quota (503 beyond).

        The quota is this endpoint's own, so it is the one thing asked before the entry
        checks the request (an owner over it hears 503 whatever else is wrong).
        """
        owner = _owner(scope)
        refusal = self.listens.refusal(owner)
        if refusal is not None:
            self._listen_refusals.log(logging.WARNING, "refused a listen stream: %s", refusal)
            await refuse(send, 503, refusal, INTERNAL_ERROR, retry_after=RETRY_AFTER)
            return
        self.listens.take(owner)
        try:
            await self.fallback(scope, _replaying(body, receive), send)
        finally:
            self.listens.release(owner)

    # -- 2025-11-25
    async def _legacy(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        owner = _owner(scope)
        session_id = request.headers.get(SESSION_HEADER)
        session = None
        if session_id is not None:
            session = self.sessions.get(session_id)
            if session is None or session.owner != owner:
                if session is not None:
                    self._owner_refusals.log(
                        logging.WARNING, "refused a session's request: another credential opened it"
                    )
                await refuse(send, 404, "Session not found")
                return
        method = scope["method"]
        refusal = await self.security.validate_request(request, is_post=method == "POST")
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if method == "POST":
            await self._post(request, session, owner, receive, send)
        elif session is None and method in ("GET", "DELETE"):
            await refuse(send, 400, "Bad Request: Missing session ID")
        elif method == "GET":
            assert session is not None
            await self._get(request, session, receive, send)
        elif method == "DELETE":
            assert session is not None
            await self.sessions.end(session)
            await respond(send, 200, b"", [(SESSION_HEADER_BYTES, session.id.encode())])
        else:
            await refuse(send, 405, "Method Not Allowed", allow="GET, POST, DELETE")

    async def _post(
        self, request: Request, session: Session | None, owner: object, receive: Receive, send: Send
    ) -> None:
        has_json, has_sse = accepted_media(request)
        if not (has_json and has_sse):
            await refuse(send, 406, "Not Acceptable: Client must accept both application/json and text/event-stream")
            return
        if not _is_json(request.headers.get("content-type")):
            await refuse(send, 415, "Unsupported Media Type: Content-Type must be application/json")
            return
        body = await request.body()
        try:
            raw = json.loads(body.decode())  # strict UTF-8: no byte-order mark, as the SDK's transport reads it
        except (ValueError, RecursionError) as exc:
            await refuse(send, 400, f"Parse error: {exc}", PARSE_ERROR)
            return
        try:
            message = jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except ValidationError:
            if session is not None and isinstance(raw, dict) and "method" not in raw:
                session.questions.answered(raw)  # a malformed answer still settles its question, in one sentence
            await refuse(
                send,
                400,
                "Validation error: the body is not one JSON-RPC request, notification or response.",
                INVALID_PARAMS,
            )
            return
        if isinstance(message, JSONRPCNotification) and isinstance(raw, dict) and "id" in raw:
            # an id that is neither string nor number: a request the validator took for a notification
            await refuse(send, 400, "Invalid Request: a request id must be a string or a number.")
            return
        opening = isinstance(message, JSONRPCRequest) and message.method == "initialize" and session is None
        if opening:
            opened = self.sessions.open(owner)
            if isinstance(opened, str):
                self._session_refusals.log(logging.WARNING, "refused a new MCP session: %s", opened)
                await refuse(send, 503, opened, INTERNAL_ERROR, retry_after=RETRY_AFTER)
                return
            session = opened
        if session is None:
            await refuse(send, 400, "Bad Request: Missing session ID")
            return
        if not isinstance(message, JSONRPCRequest):
            await respond(send, 202, b"", [(SESSION_HEADER_BYTES, session.id.encode())])
            await self._received(session, request, message, raw)
            return
        scope = anyio.CancelScope()
        outlet = ResponseOutlet(
            send,
            request,
            message.id,
            message.params,
            session=session,
            modern=False,
            opening=opening,
            cancel_call=scope.cancel,
        )
        answered = await self._serve(session, outlet, scope, message, receive)
        if opening and not answered:
            await self.sessions.end(session)  # a failed initialize establishes nothing

    async def _serve(
        self,
        session: Session,
        outlet: ResponseOutlet,
        scope: anyio.CancelScope,
        message: JSONRPCRequest,
        receive: Receive,
    ) -> bool:
        """Run one request of ``session`` in this task, in ``scope``; cancellable by ``notifications/cancelled``.

        Its client disconnecting does not cancel it (that era's rule).
        """
        key = request_key(message.id)  # ("7" and 7 are one id)
        exchange = outlet.exchange
        session.calls[key] = (scope, exchange)
        answered = False
        stop_supervising = _supervising(outlet, receive, None)
        try:
            with session.in_use(), scope:
                answered = await outlet.run(session.runner, message.method, message.params)
        finally:
            stop_supervising()
            if session.calls.get(key, (None, None))[1] is exchange:
                del session.calls[key]
        if not outlet.state.ended:  # cancelled by the client or by the session's end
            await outlet.end_cancelled()
        return answered

    async def _received(self, session: Session, request: Request, message: Any, raw: dict[str, Any]) -> None:
        """A notification or an answer the client POSTed (already acknowledged with 202)."""
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            session.questions.answered(raw)
            return
        if message.method == "notifications/cancelled":
            session.cancel(message.params)
        try:
            await session.runner.on_notify(_acknowledged(request), message.method, message.params)
        except Exception:
            log.exception("MCP notification handler for %r failed", message.method)

    async def _get(self, request: Request, session: Session, receive: Receive, send: Send) -> None:
        """``GET``: the session's stream of server-initiated messages, or (``Last-Event-ID``) a resumed stream."""
        _, has_sse = accepted_media(request)
        if not has_sse:
            await refuse(send, 406, "Not Acceptable: Client must accept text/event-stream")
            return
        last_event_id = request.headers.get(_LAST_EVENT_ID)
        if last_event_id is None:
            await self._standalone(session, None, receive, send)
            return
        found = session.logs.find(last_event_id)
        if found is None:
            shown = last_event_id if len(last_event_id) <= 80 else last_event_id[:77] + "..."
            await refuse(send, 400, f"Bad Request: Last-Event-ID {shown!r} names no event of this session's streams")
            return
        event_log, number = found
        if session.is_standalone_log(event_log):
            await self._standalone(session, number, receive, send)
        else:
            await self._resume(session, event_log, number, receive, send)

    async def _resume(self, session: Session, event_log: EventLog, number: int, receive: Receive, send: Send) -> None:
        """A POST's stream again, after event ``number``: what was missed, then the rest, its answer last."""
        with session.in_use():
            await _stream_response(send, session, receive, partial(event_log.follow, number, quiet=KEEPALIVE_SECONDS))

    async def _standalone(self, session: Session, resume_after: int | None, receive: Receive, send: Send) -> None:
        """The session's stream of server-initiated messages, until the session or the client ends it.

        Each message is numbered in the session's ``standalone_log`` as it is sent;
        ``resume_after`` (a ``Last-Event-ID``'s number) first sends the logged ones
        after it (none, and the stream ends at once, when the log no longer holds
        them all: what the SDK's transport does for an id its store has dropped).
        """
        replaced = anyio.CancelScope()  # cancelled when a newer GET of the session takes over
        event_log = session.standalone_log
        missed = [] if resume_after is None else event_log.after(resume_after)
        with session.in_use(), session.standalone_stream(replaced) as reader:

            async def frames() -> Any:
                if missed is None:
                    return
                for frame in missed:
                    yield frame
                while True:
                    with anyio.move_on_after(KEEPALIVE_SECONDS) as quiet:
                        try:
                            payload = await reader.receive()
                        except anyio.EndOfStream:
                            return
                    yield KEEPALIVE if quiet.cancelled_caught else event_log.append(payload)[1]

            await _stream_response(send, session, receive, frames, replaced)


def _acknowledged(request: Request) -> Exchange:
    """The dispatch context of a POSTed notification: its POST was answered ``202`` already, nothing rides it."""
    transport = TransportContext(kind="streamable-http", can_send_request=False, headers=request.headers)
    return acknowledged(transport, ServerMessageMetadata(request_context=request, can_send_request=False))


_MAX_LISTENS = 1000


def _is_json(content_type: str | None) -> bool:
    """Whether a 2025 POST's ``Content-Type`` is ``application/json`` (parameters allowed, any case).

    The SDK's security check only asks for the prefix (so ``application/json-rpc``
    passes it, and a non-JSON prefix is its 400); its transport then answers 415 to
    anything but ``application/json``, as here. A media type is case-insensitive and
    one per header (RFC 9110 8.3), so ``Application/JSON`` is accepted and a list is not.
    """
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _owner(scope: Scope) -> object:
    """Who a session belongs to: the bearer token's identity (as the SDK compares it), or nobody."""
    user = scope.get("user")
    return authorization_context(user) if isinstance(user, AuthenticatedUser) else None
