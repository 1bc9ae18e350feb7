"""Interactive input over MCP, per protocol era (SPEC 4).

* 2026-07-28: the call ends with ``InputRequiredResult``; the engine's continuation
  travels as ``requestState``, sealed by the SDK's ``RequestStateBoundary``
  (AES-GCM, expiry, bound to tool, arguments and principal). The client retries
  with the answer and the engine resumes from the continuation.
* 2025-11-25: a connection whose client declared elicitation is asked live
  (``elicitation/create``, form or URL mode); the handler is re-entered in-process.
* Neither (no capability, no back channel): ``ELICITATION_UNSUPPORTED`` at once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from mcp import types
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..engine import DEFER, INVALID_INPUT, CallResult, InputChannel, InputRequest, InputResponse, ToolError
from .convert import result_to_wire


def client_can_answer(ctx: Any, request: InputRequest) -> bool:
    """Did the client declare the elicitation mode this request needs?"""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    if request.kind == "url":
        return elicitation.url is not None
    return elicitation.form is not None or elicitation.url is None  # a bare {} means form


class LiveElicitation(InputChannel):
    """2025 era: ask over the live session; protocol clients are not re-asked."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    async def ask(self, request: InputRequest, call: Any, problems: list[str] | None = None) -> InputResponse | None:
        ctx = self.ctx
        if not client_can_answer(ctx, request):
            return None
        try:
            if request.kind == "url":
                result = await ctx.session.elicit_url(
                    request.message, request.url, uuid.uuid4().hex, related_request_id=ctx.request_id
                )
            else:
                result = await ctx.session.elicit_form(
                    request.message, request.schema, related_request_id=ctx.request_id
                )
        except NoBackChannelError:
            return None  # stateless or JSON-response HTTP: nobody to ask
        except MCPError as exc:
            raise ToolError(
                "ELICITATION_UNSUPPORTED", f"The client could not answer the input request: {exc.message}."
            ) from None
        return InputResponse(result.action, result.content)


class ClientRetries(InputChannel):
    """2026 era: end the round with ``InputRequiredResult``; the client calls again."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    async def ask(self, request: InputRequest, call: Any, problems: list[str] | None = None) -> Any:
        return DEFER if client_can_answer(self.ctx, request) else None


def is_modern(ctx: Any) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def channel_for(ctx: Any) -> InputChannel:
    return ClientRetries(ctx) if is_modern(ctx) else LiveElicitation(ctx)


def resumption(params: types.CallToolRequestParams, plaintext: str) -> tuple[dict[str, Any], Any]:
    """The continuation and the client's answer carried by a 2026 retry."""
    try:
        state = json.loads(plaintext)
        key = state["pending"]["key"]
    except (ValueError, KeyError, TypeError):
        return {}, None  # the engine refuses it with a clear sentence
    answer = (params.input_responses or {}).get(key)
    if answer is None:
        return state, None
    return state, InputResponse(answer.action, answer.content)


def input_required(payload: dict[str, Any]) -> types.InputRequiredResult:
    """The wire form of an engine input request plus its continuation (sealed downstream)."""
    request: InputRequest = payload["request"]
    if request.kind == "url":
        params: Any = types.ElicitRequestURLParams(message=request.message, url=request.url)
    else:
        params = types.ElicitRequestFormParams(message=request.message, requested_schema=request.schema)
    return types.InputRequiredResult(
        input_requests={request.key: types.ElicitRequest(params=params)},
        request_state=json.dumps(payload["continuation"], separators=(",", ":")),
    )


class StateSeal:
    """The SDK's request-state protection, applied only to the calls that carry state.

    As server middleware (``RequestStateBoundary``) it would wrap every call; here
    it runs on the few rounds that bring or mint a ``requestState`` (it uses the
    boundary's own unseal/seal, so the claims, keys and checks are the SDK's).
    """

    def __init__(self, server_name: str, *, keys: Sequence[bytes | str] | None, ttl: float) -> None:
        security = RequestStateSecurity(keys=list(keys), ttl=ttl) if keys else RequestStateSecurity.ephemeral(ttl=ttl)
        self._boundary = RequestStateBoundary(security, default_audience=server_name)

    def open(self, ctx: Any) -> tuple[str, Any] | None:
        """``(plaintext, binding)``, or ``None`` for a tampered, expired or foreign state."""
        try:
            return self._boundary._unseal(ctx)
        except MCPError:
            return None

    def close(self, ctx: Any, result: types.InputRequiredResult, binding: Any) -> Any:
        return self._boundary._seal_result(ctx, result, binding)


def refused_state(name: str) -> dict[str, Any]:
    """A tampered, expired or foreign ``requestState`` as one clear tool error."""
    error = ToolError(
        INVALID_INPUT,
        f'The request state sent to tool "{name}" was altered, has expired, or belongs to another call.',
        recovery="Call the tool again without a request state to start over.",
    )
    return result_to_wire(CallResult.failure(error), has_output_schema=True)
