"""The protocol era of a request, one rule for both transports (``pipe`` and ``streamable``).

Why one module: 2025-11-25 opens a connection with ``initialize``; 2026-07-28
carries its envelope (version, client capabilities) in every request's
``params._meta`` and, over HTTP, in headers. Which era a request speaks, what is
refused when the eras mix, and the 2026 ladder (the SDK's rungs, then the
``Mcp-Param-*`` check) were written once per transport and could drift; here they
are written once. What a transport does with a verdict (a line, an HTTP status) stays
the transport's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    InboundLadderRejection,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
    x_mcp_header_map,
)
from mcp_types import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    PROTOCOL_VERSION_META_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorData,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS

log = logging.getLogger("fusion_nb.http")  # (what it logs is the HTTP ladder's)

_PARAM_HEADER_PREFIX = "mcp-param-"

MODERN_ON_HANDSHAKE = ErrorData(
    code=INVALID_REQUEST,
    message="this connection serves the handshake protocol era; "
    "requests carrying the 2026-07-28 envelope are not accepted on it",
)
"""The refusal of a 2026-07-28 request on a connection a 2025-11-25 ``initialize`` opened."""


def has_modern_envelope(params: Any) -> bool:
    """Whether ``params._meta`` carries the 2026-07-28 protocol-version key (what marks a request modern)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


def opens_modern(method: str, params: Any) -> bool:
    """Whether a stream's first request fixes it to 2026-07-28 (else ``initialize`` opens 2025-11-25)."""
    return method != "initialize" and has_modern_envelope(params)


def refusal_on_handshake(method: str, params: Any) -> ErrorData | None:
    """Why a request cannot be served on a 2025-11-25 connection (it speaks the other era), or ``None``."""
    return MODERN_ON_HANDSHAKE if opens_modern(method, params) else None


def handshake_refused(params: Any) -> MCPError:
    """The refusal of ``initialize`` on a 2026-07-28 connection, naming the versions served."""
    requested = params.get("protocolVersion") if isinstance(params, Mapping) else None
    data: dict[str, Any] = {"supported": list(MODERN_PROTOCOL_VERSIONS)}
    if isinstance(requested, str):
        data["requested"] = requested
    return MCPError(
        code=UNSUPPORTED_PROTOCOL_VERSION,
        message="connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted",
        data=data,
    )


def routes_modern(version: bytes | None) -> bool:
    """Whether an HTTP request's ``MCP-Protocol-Version`` routes it to 2026-07-28 (any non-handshake version)."""
    return version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS


def ladder(
    message: Mapping[str, Any], header_lines: list[tuple[str, str]] | None = None
) -> InboundModernRoute | InboundLadderRejection:
    """The SDK's 2026 ladder over a request (and its HTTP header lines, when it came by HTTP): first failure wins.

    A routing header given twice is refused first, as the SDK's entry does: the
    first-copy and last-copy readers of a folded mapping would disagree.
    """
    headers = None
    if header_lines is not None:
        duplicated = find_duplicated_routing_header(header_lines)
        if duplicated is not None:
            return InboundLadderRejection(code=HEADER_MISMATCH, message=f"{duplicated} header appears more than once")
        headers = dict(header_lines)
    return classify_inbound_request(message, headers=headers)


def modern_connection(route: InboundModernRoute) -> Connection:
    """A born-ready ``Connection`` for one 2026-07-28 request, from its envelope."""
    return Connection.from_envelope(route.protocol_version, route.client_info, route.client_capabilities)


def notification_connection() -> Connection:
    """The ``Connection`` a 2026-07-28 notification is handled in (a notification carries no envelope to read)."""
    return Connection.from_envelope(LATEST_MODERN_VERSION, None, None)


def modern_route(method: str, params: Any) -> InboundModernRoute:
    """The route of a 2026-07-28 request without headers (stdio); the ladder's refusal raised as an ``MCPError``."""
    if method == "initialize":
        raise handshake_refused(params)
    route = ladder({"method": method, "params": params})
    if isinstance(route, InboundLadderRejection):
        raise MCPError(code=route.code, message=route.message, data=route.data)
    return route


class ParamHeaders:
    """The ``Mcp-Param-*`` rung of a 2026 ``tools/call`` over HTTP, its schema lookups cached per tool.

    Skipped when no header or declaration is involved, and failing open (as the SDK's
    entry does) when the schema lookup raises: header validation never breaks a call.
    """

    def __init__(self, server: Server[Any]) -> None:
        self._server = server  # its ``get_tool_input_schema``, read per call as the SDK's entry reads it
        self._maps: dict[str, tuple[object, bool]] = {}

    def rejection(self, params: Mapping[str, Any] | None, headers: Mapping[str, str]) -> InboundLadderRejection | None:
        name = (params or {}).get("name")
        arguments = (params or {}).get("arguments")
        lookup = self._server.get_tool_input_schema
        if lookup is None or not isinstance(name, str):
            return None
        if arguments is not None and not isinstance(arguments, Mapping):
            return None
        carries = any(key.startswith(_PARAM_HEADER_PREFIX) for key in headers)
        if not arguments and not carries:
            return None
        try:
            schema = lookup(name)
        except Exception:
            log.exception("Mcp-Param header validation skipped: get_tool_input_schema raised")
            return None
        if schema is None:
            return None
        cached = self._maps.get(name)
        if cached is None or cached[0] is not schema:
            cached = self._maps[name] = (schema, bool(x_mcp_header_map(schema)))
        if not cached[1] and not carries:
            return None
        return validate_mcp_param_headers(schema, arguments or {}, headers)
