"""The Streamable HTTP endpoint's bytes: JSON-RPC bodies, SSE frames, whole refusals.

Every module of the endpoint (``exchange``, ``sessions``, ``resume``, ``streamable``)
writes the same wire, and a client compares it byte for byte with the SDK's
transport (``tests/mcp/test_http_differential.py``): one place spells it, so the
eras and the modules cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import (
    INVALID_REQUEST,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic_core import PydanticSerializationError, to_json
from starlette.types import Send

SESSION_HEADER = "mcp-session-id"
SESSION_HEADER_BYTES = SESSION_HEADER.encode()
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
KEEPALIVE = b": ping\r\n\r\n"
"""An SSE comment line: keeps a quiet stream alive through proxies, and is no event (it carries no id)."""


def dump(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification | JSONRPCRequest) -> bytes:
    """A JSON-RPC message's wire bytes, as the SDK's 2026 entry writes them.

    ``json.dumps`` writes ASCII, escaping what a client sent: a lone surrogate in the
    arguments (valid JSON, not valid UTF-8) comes back escaped, never as a 500.
    """
    body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(message, JSONRPCError) and message.id is None:
        body["id"] = None  # JSON-RPC wants ``id: null`` when the request id is unknown
    return json.dumps(body, separators=(",", ":")).encode()


def encode(message: Mapping[str, Any]) -> bytes:
    """A JSON-RPC message built as a dict (a question of ``back_channel``'s), as ``dump`` writes it."""
    return dump(jsonrpc_message_adapter.validate_python(message))


def event(payload: bytes, event_id: str | None = None) -> bytes:
    """One SSE ``message`` event carrying ``payload``, with its ``id:`` first (as sse-starlette orders the fields)."""
    frame = b"event: message\r\ndata: " + payload + b"\r\n\r\n"
    return frame if event_id is None else b"id: " + event_id.encode() + b"\r\n" + frame


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A whole HTTP response in two ASGI messages (JSON when there is a body)."""
    fields = [(b"content-type", b"application/json")] if body else []
    fields += [(b"content-length", str(len(body)).encode()), *(headers or ())]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


async def refuse(send: Send, status: int, message: str, code: int = INVALID_REQUEST, **headers: str) -> None:
    """A transport-level refusal: a JSON-RPC error without a request id, with an HTTP status."""
    error = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))
    fields = [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    await respond(send, status, dump(error), fields)


async def reject(send: Send, request_id: Any, code: int, message: str, data: Any = None) -> None:
    """A 2026 ladder refusal as the SDK's entry writes it: its JSON-RPC error, with the table's HTTP status."""
    error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message, data=data))
    await respond(send, ERROR_CODE_HTTP_STATUS.get(code, 200), dump(error))


class Preencoded(list[Any]):
    """A page's items that also carry the whole page result's JSON, encoded once (``pages.ListPages``).

    A list to everyone else (the SDK's in-memory path reads the items); fusion-nb's
    transports find it in a result and write its bytes (``preencoded``) instead of
    encoding megabytes again. ``size``: the result's key count, so a result some
    middleware changed after the page was made is encoded afresh.
    """

    __slots__ = ("_forms", "_result", "size")

    def __init__(self, items: list[Any], result: Mapping[str, Any]) -> None:
        super().__init__(items)
        self._result = {key: list(items) if value is items else value for key, value in result.items()}
        self.size = len(result)
        self._forms: dict[bool, bytes | None] = {}

    def encoded(self, ascii: bool) -> bytes | None:
        """The result's JSON: as ``json.dumps`` writes it (ASCII, the HTTP face) or as pydantic-core does (the pipe)."""
        form = self._forms.get(ascii, b"")
        if form == b"":
            try:
                form = (
                    json.dumps(self._result, separators=(",", ":")).encode()
                    if ascii
                    else to_json(self._result, inf_nan_mode="null")
                )
            except (PydanticSerializationError, ValueError):  # (a lone surrogate: the transport's own path copes)
                form = None
            self._forms[ascii] = form
        return form


def preencoded(result: Mapping[str, Any], *, ascii: bool) -> bytes | None:
    """The encoded JSON of a list page's ``result`` (``Preencoded``), else ``None`` (encode it as usual)."""
    for value in result.values():
        if type(value) is Preencoded:
            return value.encoded(ascii) if len(result) == value.size else None
    return None


def response_with(request_id: Any, body: bytes, *, ascii: bool) -> bytes:
    """A JSON-RPC response around an encoded ``result``, keys in the order ``dump`` writes them."""
    rid = json.dumps(request_id).encode() if ascii else to_json(request_id)
    return b'{"jsonrpc":"2.0","id":' + rid + b',"result":' + body + b"}"
