"""The 2025-11-25 back channel: the server's requests to the client and their answers, for both transports.

Why one module: a question (``elicitation/create``, ``sampling/createMessage``)
goes out on the pipe, or on a POST's or ``GET``'s stream, and its answer comes back
by the reader or by a later POST; everything in between is the same, and was
written twice, and drifted (one side matched ``7`` with ``"7"``, the other did not;
one settled a malformed answer in a sentence, the other left the question waiting).
Here: the id a question gets, the one rule an answer is matched by (``lookup``), an
answer of any shape settling its question in one sentence, the wait's bound, and
every question failed when the channel closes. Writing the question is the
transport's (``emit``).
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT, ErrorData, RequestId

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_DECIMAL_ID = re.compile(r"-?[0-9]{1,20}")
_CANCEL_WRITE_TIMEOUT = 1.0
CLOSED = ErrorData(code=CONNECTION_CLOSED, message="Connection closed")

Emit = Callable[[dict[str, Any]], Awaitable[None]]
"""Write one JSON-RPC message (a question, or the ``notifications/cancelled`` that takes it back) to the client."""


def request_key(request_id: RequestId) -> RequestId:
    """The one key of an id in a table: a plain decimal string as its number (``"7"`` and ``7`` are one id)."""
    if isinstance(request_id, str) and _DECIMAL_ID.fullmatch(request_id):
        return int(request_id)
    return request_id


def lookup(table: Mapping[RequestId, _T], request_id: object) -> _T | None:
    """``table[request_id]``, matching ``7`` and ``"7"`` as the same id (peers differ in how they echo ids).

    The one rule for every id a client names (an answer, a cancel). Only a plain
    ASCII decimal of at most 20 digits is read as a number: whatever else a client
    sends (``"²"``, ``"--1"``, 5,000 digits) is just an id nothing waits for.
    """
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None  # (no id, or one no request can have: ``null``, a list, an object)
    found = table.get(request_id)
    if found is None:
        if isinstance(request_id, int):
            found = table.get(str(request_id))
        elif isinstance(request_id, str) and _DECIMAL_ID.fullmatch(request_id):
            found = table.get(int(request_id))
    return found


def counting_ids() -> Callable[[], RequestId]:
    """1, 2, 3 ...: for a channel only its one client can answer on (a pipe)."""
    return itertools.count(1).__next__


def random_ids() -> RequestId:
    """A random string: on a channel others can post to (HTTP), no client answers another's question by guessing."""
    return secrets.token_urlsafe(12)


def outcome_of(message: Mapping[str, Any]) -> dict[str, Any] | ErrorData:
    """What an answer says, whatever its shape: its result, or an error (a malformed answer's in one sentence)."""
    result, error = message.get("result"), message.get("error")
    if isinstance(result, dict):
        return result
    if isinstance(error, dict) or "result" not in message:
        try:
            return ErrorData.model_validate(error)
        except ValueError:
            return ErrorData(code=INVALID_REQUEST, message="the client sent a malformed error")
    kind = "null" if result is None else f"a JSON {type(result).__name__}"
    return ErrorData(
        code=INVALID_REQUEST, message=f"the client sent a malformed answer (its result is {kind}, not an object)"
    )


class _Question:
    """Where the client's answer to one question lands."""

    __slots__ = ("arrived", "outcome")

    def __init__(self) -> None:
        self.arrived = anyio.Event()
        self.outcome: dict[str, Any] | ErrorData = CLOSED

    def settle(self, outcome: dict[str, Any] | ErrorData) -> None:
        if not self.arrived.is_set():
            self.outcome = outcome
            self.arrived.set()


class BackChannel:
    """The questions one connection (a pipe, a session) has asked its client and not yet had answered.

    ``answer_timeout`` bounds each wait (``opts["timeout"]`` wins; ``None``: for
    ever). A question the server stops waiting for (timed out, its call cancelled)
    is taken back with ``notifications/cancelled``, so a client still asking its user
    stops. ``close`` fails every question waiting, and every later one, ``Connection closed``.
    """

    def __init__(self, answer_timeout: float | None, new_id: Callable[[], RequestId] = random_ids) -> None:
        self.answer_timeout = answer_timeout
        self.closed = False
        self._new_id = new_id
        self._waiting: dict[RequestId, _Question] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    async def ask(
        self, emit: Emit, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Send a request to the client with ``emit``; its result (an error answer raises ``MCPError``)."""
        if self.closed:
            raise MCPError(code=CLOSED.code, message=CLOSED.message)
        request_id = self._new_id()
        key = request_key(request_id)
        question = self._waiting[key] = _Question()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        timeout = (opts or {}).get("timeout", self.answer_timeout)
        try:
            await emit(message)
            with anyio.fail_after(timeout if timeout is not None else math.inf):
                await question.arrived.wait()
        except TimeoutError:
            await self._take_back(emit, request_id, f"no answer within {timeout:g} s")
            raise MCPError(code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out after {timeout:g} s") from None
        except anyio.get_cancelled_exc_class():
            await self._take_back(emit, request_id, "the server call was cancelled")
            raise
        finally:
            del self._waiting[key]
        outcome = question.outcome
        if isinstance(outcome, ErrorData):
            raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
        return outcome

    def answered(self, message: Mapping[str, Any]) -> None:
        """The client's answer (``result`` or ``error``, any shape) settles its question; late or unknown ones drop."""
        question = lookup(self._waiting, message.get("id"))
        if question is None or question.arrived.is_set():
            log.debug("dropped an answer to unknown or settled request %r", message.get("id"))
            return
        question.settle(outcome_of(message))

    def close(self) -> None:
        """Fail every question waiting (``Connection closed``), and refuse every later one."""
        self.closed = True
        for question in self._waiting.values():
            question.settle(CLOSED)

    async def _take_back(self, emit: Emit, request_id: RequestId, reason: str) -> None:
        """``notifications/cancelled`` for a question nobody waits for any more (best effort, bounded)."""
        if self.closed:
            return
        with anyio.move_on_after(_CANCEL_WRITE_TIMEOUT, shield=True):
            params = {"requestId": request_id, "reason": reason}
            await emit({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
