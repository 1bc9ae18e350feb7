"""Why a transport ended a request early, for the sentence of the call it aborts.

The SDK runs a ``tools/call`` handler in the task its transport serves the request
in. The transport marks that task with the request's exchange (``serving``), and the
handler gives the engine the exchange's ``ended_because`` (``CallRequest.ended_by``),
asked only if a cancellation comes: "its client disconnected", "its client cancelled it".
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Protocol

#: the longest reason a client's ``notifications/cancelled`` may add to a sentence
REASON_LIMIT = 200

CLIENT_DISCONNECTED = "its client disconnected"
CONNECTION_ENDED = "the connection to its client ended"
SESSION_ENDED = "its client's session ended"
STREAM_GONE = "its client's stream closed while it waited for an answer"


class Ending(Protocol):
    def ended_because(self) -> str | None: ...


#: the exchange of the request this task serves (set by the transports)
serving: ContextVar[Ending | None] = ContextVar("fusion_nb_serving", default=None)


def client_cancelled(params: Mapping[str, Any] | None) -> str:
    """``its client cancelled it ("user pressed stop")``: the client's own reason, bounded, if it gave one."""
    reason = params.get("reason") if isinstance(params, Mapping) else None
    if not isinstance(reason, str) or not reason.strip():
        return "its client cancelled it"
    reason = " ".join(reason.split())
    if len(reason) > REASON_LIMIT:
        reason = reason[: REASON_LIMIT - 1] + "…"
    return f'its client cancelled it ("{reason}")'
