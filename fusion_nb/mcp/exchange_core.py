"""One request's exchange, for both transports: its state machine, and the SDK ``DispatchContext`` on it.

Why one: an exchange is written to by its call (notifications, progress, questions
to the client) and ended by whatever stops the call; the pipe, a POST and a POSTed
notification each had their own ``DispatchContext`` for that, and their rules
drifted. Here, as in h11's ``_state.py``, ``ExchangeState`` holds every state and
every legal move in one table and does no I/O; ``Exchange`` is the one dispatch
context, and writes through an ``Outlet``: the pipe connection (``pipe``), an HTTP
response that may turn into SSE (``exchange.ResponseOutlet``), or ``NULL_OUTLET``
for a request whose answer went out already (a notification's ``202``). The
questions it asks go through the connection's ``BackChannel``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import anyio
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.transport_context import TransportContext
from mcp_types import RequestId

from .back_channel import BackChannel

log = logging.getLogger(__name__)


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


class Outlet(Protocol):
    """Where an exchange's messages go while its call runs (its answer is the transport's to write)."""

    async def send(self, message: dict[str, Any]) -> None:
        """Write one notification or question (a JSON-RPC message as a dict)."""
        ...


class _NullOutlet:
    """The outlet of a request already answered (a POSTed notification's ``202``): nothing rides it."""

    async def send(self, message: dict[str, Any]) -> None:
        log.debug("dropped %s: its request has no stream", message.get("method"))


NULL_OUTLET: Outlet = _NullOutlet()


class Exchange:
    """The SDK's ``DispatchContext`` for one request: what its call sends goes out through ``outlet``.

    ``questions`` is the connection's back channel (``None`` where the era or the
    transport has none: 2026-07-28, a stateless request, a notification). Once the
    call has settled (``state``), late notifications are dropped and questions refused.
    """

    __slots__ = (
        "_cancel_requested",
        "asking",
        "message_metadata",
        "outlet",
        "progress_token",
        "questions",
        "request_id",
        "state",
        "transport",
        "why",
    )

    def __init__(
        self,
        outlet: Outlet,
        request_id: RequestId | None,
        params: Mapping[str, Any] | None,
        transport: TransportContext,
        *,
        questions: BackChannel | None = None,
        message_metadata: Any = None,
    ) -> None:
        self.outlet = outlet
        self.request_id = request_id
        self.progress_token = progress_token_from_params(params)
        self.transport = transport
        self.message_metadata = message_metadata
        self.questions = questions
        self.state = ExchangeState()
        self.asking = 0  # questions waiting for the client's answer
        self._cancel_requested: anyio.Event | None = None
        self.why: str | None = None  # why the transport is ending the call early (see ``ending``)

    def ending(self, because: str) -> None:
        """The transport is about to cancel this request: the call's sentence will say ``because``."""
        if self.why is None:
            self.why = because

    def ended_because(self) -> str | None:
        return self.why

    @property
    def settled(self) -> bool:
        """Whether the call has its outcome (a late ``notifications/cancelled`` must not undo it)."""
        return not self.state.running

    @property
    def can_send_request(self) -> bool:
        """Whether a question can go to the client now (a back channel, a request, a call still running)."""
        return self.questions is not None and self.request_id is not None and self.state.running

    @property
    def cancel_requested(self) -> anyio.Event:
        """Set when the client sends ``notifications/cancelled`` for this request."""
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    @property
    def cancelled_by_client(self) -> bool:
        return self._cancel_requested is not None and self._cancel_requested.is_set()

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """A notification about this request (dropped once it has settled)."""
        if not self.state.running:
            log.debug("dropped %s: its request has settled", method)
            return
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self.outlet.send(message)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """``notifications/progress`` for this request, when the client sent a progress token.

        ``DispatchContext`` leaves ``progress`` to each implementation and the SDK
        publishes no helper to build its parameters, so this is the one builder.
        """
        if self.progress_token is None or not self.state.running:
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
        """Ask the client (2025 era, while the call runs and its client listens); its answer comes back by the reader
        or a later POST (``BackChannel``)."""
        if not self.can_send_request or self.state.client is Client.GONE:
            raise NoBackChannelError(method)
        assert self.questions is not None
        self.asking += 1
        try:
            return await self.questions.ask(self.outlet.send, method, params, opts)
        finally:
            self.asking -= 1


def acknowledged(transport: TransportContext, message_metadata: Any = None) -> Exchange:
    """The dispatch context of a notification: nothing rides it, it asks nothing."""
    exchange = Exchange(NULL_OUTLET, None, None, transport, message_metadata=message_metadata)
    exchange.state.apply(Move.ABANDON)
    return exchange
