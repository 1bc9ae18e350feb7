"""Malformed request params answered in one sentence that names the field, not the SDK's bare ``-32602``.

The SDK validates each request's params against its protocol models inside the
middleware chain and answers a failure with ``-32602 "Invalid request parameters"``
and empty data, whatever was wrong: a client sending ``{"name": 5}`` to ``tools/call``,
a ``cursor`` that is a number, or ``tools/list`` before ``initialize`` all read the
same. ``ParamsInOneSentence`` is server middleware (documented: a request-side
failure reaches middleware as the ``ValidationError`` of the malformed params, or as
the ``MCPError`` of the handshake gate) that keeps the code and replaces the message:

* ``Invalid params for tools/call: field "params.name" expected a string, got 5 (int).``
  (the clauses of a tool's own INVALID_INPUT answer: ``engine.validation_sentence``,
  bounded whatever was sent);
* ``tools/list came before initialize: send initialize, then notifications/initialized.``

A ``-32601`` keeps the SDK's answer, but the method it names back in ``data`` is cut to
200 characters (a client can send a method name of megabytes; the SDK echoes it whole).

Only the validation of the request's params is reworded (an error titled by a request
model, every location under ``params``, or by a handler's params model); any other
``ValidationError`` a handler raises keeps the SDK's generic answer, so nothing
internal reaches a client. Both transports (stdio and HTTP) get it: it runs in the
SDK's protocol kernel.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from pydantic import ValidationError

from ..engine import validation_sentence


class ParamsInOneSentence:
    """Server middleware: a ``-32602`` for malformed params says which field, what was expected, what was sent;
    a ``-32601`` names the unknown method in at most 200 characters."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Run the chain; reword the SDK's refusal of the request's params (the code stays ``-32602``)."""
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            under = _params_error(exc)
            if under is None:
                raise
            sentence = validation_sentence(f"Invalid params for {ctx.method}: ", exc, under=under)
            raise MCPError(INVALID_PARAMS, sentence) from None
        except MCPError as exc:
            if exc.code == METHOD_NOT_FOUND and isinstance(exc.data, str) and len(exc.data) > _METHOD_SHOWN:
                raise MCPError(METHOD_NOT_FOUND, exc.message, exc.data[: _METHOD_SHOWN - 1] + "…") from None
            if not _before_handshake(ctx, exc):
                raise
            raise MCPError(
                INVALID_PARAMS,
                f"{ctx.method} came before initialize: send initialize, then notifications/initialized.",
            ) from None


def _params_error(exc: ValidationError) -> tuple[str, ...] | None:
    """Where ``exc``'s locations sit under the request, when it is the validation of a request's params."""
    if exc.title.endswith("Request") and all(error["loc"][:1] == ("params",) for error in exc.errors()):
        return ()  # the SDK's surface check of the whole request: locations already under params
    if exc.title.endswith("RequestParams"):  # a handler's params model: locations relative to params
        return ("params",)
    return None


def _before_handshake(ctx: ServerRequestContext[Any, Any], exc: MCPError) -> bool:
    """Whether ``exc`` is the SDK's gate refusing a request sent before ``initialize`` (its bare -32602)."""
    return (
        exc.code == INVALID_PARAMS
        and exc.message == _GATE
        and not exc.data
        and ctx.method != "initialize"
        and ctx.session.client_params is None
    )


_METHOD_SHOWN = 200  # characters of an unknown method's name a -32601 echoes
_GATE = "Invalid request parameters"  # the SDK's message for its handshake gate (and its params check)
