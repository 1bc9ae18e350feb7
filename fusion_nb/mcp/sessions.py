"""2025-11-25 sessions: one ``Connection`` and ``ServerRunner`` per ``Mcp-Session-Id``, their calls and streams.

Why a module of its own: that era's state outlives a request. A session holds the
SDK's kernel for its connection, the calls in flight (a client's
``notifications/cancelled`` names one), the questions the server asked (a client's
answer arrives by a later POST), its ``GET`` stream for server-initiated messages
and its streams' event logs (``resume``); ``Sessions`` bounds how many live, per
owner and in all, and ends the idle ones. The endpoint (``streamable``) only routes
requests to them.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner, aclose_shielded
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp_types import (
    JSONRPCNotification,
    RequestId,
)

from .back_channel import BackChannel, lookup
from .ending import SESSION_ENDED, client_cancelled
from .limits import OwnerQuota, RateLimitedLog
from .options import ANSWER_TIMEOUT
from .resume import EventLog, EventLogs
from .wire import dump, encode

if TYPE_CHECKING:
    from .exchange_core import Exchange

log = logging.getLogger("fusion_nb.http")

# ANSWER_TIMEOUT (``options``): how long a 2025 server-to-client request (an elicitation) waits for
# the client's answer. Without a deadline an abandoned question never ends: its call holds its
# slots (a mutation's serializer: every other client's calls of that tool queue behind it) and its
# session is never idle. Ten minutes leave a person time to answer a form.
STANDALONE_BUFFER = 64
"""Server-initiated messages a ``GET`` stream queues (and its log keeps for a resume); beyond, they are dropped."""


class _GetStream:
    """A session's open ``GET`` stream: the buffer its messages wait in, and how to end its response."""

    __slots__ = ("ender", "reader", "writer")

    def __init__(self, ender: anyio.CancelScope) -> None:
        self.ender = ender
        self.writer: MemoryObjectSendStream[bytes]
        self.writer, self.reader = anyio.create_memory_object_stream[bytes](STANDALONE_BUFFER)

    def hand_over(self, successor: _GetStream) -> None:
        """End this stream for ``successor``, which gets the messages this one had not sent."""
        self.writer.close()
        with contextlib.suppress(anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            while True:
                successor.writer.send_nowait(self.reader.receive_nowait())
        self.ender.cancel()


class Session:
    """One 2025-11-25 session: its ``Connection``, the SDK's kernel over it, its calls and its streams.

    It is also the connection's standalone channel (``Connection.outbound``):
    server-initiated messages go to the ``GET`` stream when one is open.
    """

    def __init__(
        self,
        server: Server[Any],
        lifespan_state: Any,
        owner: object,
        answer_timeout: float | None = ANSWER_TIMEOUT,
        id_prefix: str = "",
    ) -> None:
        self.id = id_prefix + uuid.uuid4().hex
        self.owner = owner
        self.answer_timeout = answer_timeout
        self.connection = Connection.for_loop(self, session_id=self.id)
        self.runner: ServerRunner[Any] = ServerRunner(server, self.connection, lifespan_state)
        self.calls: dict[RequestId, tuple[anyio.CancelScope, Exchange]] = {}
        self.logs = EventLogs()
        self.busy = 0
        self.idle_since = anyio.current_time()
        self._ended = False
        #: the questions asked of the client (random ids: a client cannot answer another call's by guessing)
        self.questions = BackChannel(answer_timeout)
        self._standalone: _GetStream | None = None
        self._standalone_log: EventLog | None = None

    @property
    def ended(self) -> bool:
        return self._ended

    # -- the connection's standalone channel (Outbound)
    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """A server-initiated notification on the ``GET`` stream (dropped when none is open)."""
        body = dict(params) if params is not None else None
        self._standalone_write(dump(JSONRPCNotification(jsonrpc="2.0", method=method, params=body)))

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """A server-initiated request on the ``GET`` stream (none open: no channel)."""
        if self._standalone is None:
            raise NoBackChannelError(method)
        return await self.questions.ask(self._standalone_emit, method, params, opts)

    def _standalone_write(self, payload: bytes) -> None:
        if self._standalone is None:
            return
        try:
            self._standalone.writer.send_nowait(payload)
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            log.debug("dropped a server-initiated message: session %s's stream is full or closed", self.id)

    # -- server-to-client requests and their answers
    async def _standalone_emit(self, message: dict[str, Any]) -> None:
        self._standalone_write(encode(message))

    def cancel(self, params: Mapping[str, Any] | None) -> None:
        """``notifications/cancelled``: cancel the call it names (a finished or unknown one is ignored)."""
        running = lookup(self.calls, cancelled_request_id_from_params(params))
        if running is not None and not running[1].settled:  # a call with its result in hand is not undone
            scope, exchange = running
            exchange.cancel_requested.set()
            exchange.ending(client_cancelled(params))
            scope.cancel()

    # -- the GET stream
    @contextlib.contextmanager
    def standalone_stream(self, ender: anyio.CancelScope) -> Iterator[MemoryObjectReceiveStream[bytes]]:
        """Open the session's stream for server-initiated messages, yielding its reader.

        One stream at a time, and the newest wins: an open one is ended (``ender``
        cancels its response loop, which then ends its response cleanly) and what it
        had not sent yet moves to the new one. A client reopens its stream when its
        old one is dead to it, often while the server still holds that connection
        half-open; refusing the reopening GET (409, as the SDK's transport does) would
        leave the session without notifications until the old connection times out.
        Messages written while no stream is open are dropped; what a stream sent is
        in ``standalone_log``, for a client that resumes it.
        """
        stream = _GetStream(ender)
        previous, self._standalone = self._standalone, stream
        if previous is not None:
            log.debug("MCP session %s: a new GET stream replaces the open one", self.id)
            previous.hand_over(stream)
        try:
            with stream.reader:
                yield stream.reader
        finally:
            if self._standalone is stream:
                self._standalone = None
            stream.writer.close()

    @property
    def standalone_log(self) -> EventLog:
        """The log of what the session's ``GET`` streams sent (made with the first; as bounded as their queue)."""
        if self._standalone_log is None:
            self._standalone_log = self.logs.open()
            self._standalone_log.max_events = STANDALONE_BUFFER
        return self._standalone_log

    def is_standalone_log(self, log_: EventLog) -> bool:
        """Whether ``log_`` is the log of this session's ``GET`` streams (not of a POST's)."""
        return log_ is self._standalone_log

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Count a request (or ``GET`` stream) in flight: the idle sweep spares the session meanwhile."""
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1
            self.idle_since = anyio.current_time()

    @property
    def has_standalone_stream(self) -> bool:
        return self._standalone is not None

    def end_stream(self) -> None:
        """End the ``GET`` stream, if one is open (its response ends cleanly)."""
        if self._standalone is not None:
            self._standalone.writer.close()

    async def end(self) -> None:
        """End the session: cancel its calls, fail its questions, close its stream, free its logs, run its cleanup."""
        if self._ended:
            return
        self._ended = True
        for scope, exchange in list(self.calls.values()):
            exchange.ending(SESSION_ENDED)
            scope.cancel()
        self.questions.close()
        if self._standalone is not None:
            self._standalone.writer.close()
        self.logs.clear()
        await aclose_shielded(self.connection)


class Sessions:
    """The live 2025-11-25 sessions of one endpoint: bounded in number, ended when idle."""

    def __init__(
        self,
        server: Server[Any],
        *,
        max_sessions: int | None,
        idle_timeout: float | None,
        max_per_owner: int | None = None,
        answer_timeout: float | None = ANSWER_TIMEOUT,
        id_prefix: str = "",
    ) -> None:
        self.server = server
        self.id_prefix = id_prefix  # names this worker in every session id (a load balancer routes by it)
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.answer_timeout = answer_timeout
        self.quota = OwnerQuota("sessions", per_owner=max_per_owner, total=max_sessions)
        self.lifespan_state: Any = None
        self._live: dict[str, Session] = {}
        self._swept_log = RateLimitedLog(log)

    def __len__(self) -> int:
        return len(self._live)

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def open(self, owner: object) -> Session | str:
        """A new session for ``owner``, or why not (the session limit, or ``owner``'s quota)."""
        refusal = self.quota.refusal(owner)
        if refusal is not None:
            return refusal
        session = Session(self.server, self.lifespan_state, owner, self.answer_timeout, self.id_prefix)
        self._live[session.id] = session
        self.quota.take(owner)
        return session

    def end_streams(self) -> None:
        """End every session's ``GET`` stream: a stopping server has nothing to drain there."""
        for session in self._live.values():
            session.end_stream()

    async def end(self, session: Session) -> None:
        """Forget ``session`` (its id answers 404 from now on) and end it."""
        if self._live.pop(session.id, None) is not None:
            self.quota.release(session.owner)
        await session.end()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The sessions' lifetime (the app's lifespan): the server's lifespan, the idle sweep, the final end."""
        async with self.server.lifespan(self.server) as state, anyio.create_task_group() as group:
            self.lifespan_state = state
            if self.idle_timeout is not None:
                group.start_soon(self._sweep, self.idle_timeout)
            try:
                yield
            finally:
                group.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    for session in list(self._live.values()):
                        await self.end(session)

    async def _sweep(self, idle_timeout: float) -> None:
        """End sessions with nothing in flight for ``idle_timeout`` seconds (checked a few times per timeout)."""
        while True:
            await anyio.sleep(min(max(idle_timeout / 4, 0.05), 60.0))
            horizon = anyio.current_time() - idle_timeout
            for session in list(self._live.values()):
                if session.busy == 0 and session.idle_since <= horizon:
                    self._swept_log.log(logging.INFO, "an MCP session ended after %g s idle", idle_timeout)
                    await self.end(session)
