"""Every place fusion-nb relies on something the ``mcp`` SDK does not publish, in one module.

The rest of ``fusion_nb.mcp`` uses only the SDK's public names. What is here has no
public route in ``mcp`` 2.3; each function degrades safely when the SDK changes
shape (never silently dropping a feature), and ``tests/mcp/test_sdk_contract.py``
holds one test per touch point that fails with a sentence naming the SDK change,
so an upgrade is a test run, not a hunt.

Touch points:

* ``on_connection_close``: a handshake-era connection's end, to forget it for
  ``tools/list_changed`` (``ServerSession._connection.exit_stack``).
* ``direct_progress_requested``: whether an in-process 2026 caller passed a
  progress callback (the direct path carries no progress token;
  ``ServerSession._request_outbound`` ... ``_on_progress``).
* ``error_data_of``: the kernel's exception-to-``ErrorData`` mapping
  (``mcp.server.runner.modern_error_data``, in no ``__all__``), so an error a
  handler raises reaches the wire as the SDK's own entries write it.
* ``accepted_media``: the transport's ``Accept`` reading
  (``mcp.server.streamable_http.check_accept_headers``, in no ``__all__``), so the
  endpoint refuses exactly what the SDK's transport refuses.
* ``protected_resource_routes``: the SDK's RFC 9728 document and its URL
  (``mcp.server.auth.routes.create_protected_resource_routes`` and
  ``build_resource_metadata_url``, in no ``__all__``), served at the path it names
  and at the bare ``/.well-known/oauth-protected-resource`` some clients ask first.
* ``handshake_pending``: whether a connection still waits for its 2025 handshake
  (``ServerSession._connection.initialize_accepted``), so the list pages answered
  before the SDK's handler (``pages.PageMiddleware``) keep its refusal before ``initialize``.
* ``principal_of``: who a verified token stands for (``principal_components``), the
  triple the SDK binds 2025 sessions and request state to, so tasks follow it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types
from mcp.server.auth.provider import AccessToken, principal_components
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.runner import modern_error_data
from mcp.server.session import ServerSession
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.direct_dispatcher import DIRECT_TRANSPORT_KIND
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.routing import Route

SDK_SERIES = "mcp 2.3"
"""The SDK release series these touch points were written and tested against."""

_MISSING = object()


def connection_of(session: ServerSession) -> object:
    """The connection ``session`` speaks for: the same object for every request and notification of it.

    The SDK builds a fresh ``ServerSession`` per message, so the session object itself
    cannot tell two messages of one connection apart from two connections. Falls back
    to ``session`` when this SDK keeps no connection there.
    """
    connection = getattr(session, "_connection", None)
    return session if connection is None else connection


def on_connection_close(session: ServerSession, callback: Callable[[], object]) -> bool:
    """Run ``callback`` when the connection ``session`` belongs to closes.

    Returns ``False`` when this SDK offers no way to know (the caller then relies on
    a failed send to forget the connection, which only costs memory until then).
    """
    connection = getattr(session, "_connection", None)
    stack = getattr(connection, "exit_stack", None)
    if stack is None:
        return False
    stack.callback(callback)
    return True


def handshake_pending(session: ServerSession) -> bool:
    """Whether ``session``'s connection has not yet accepted ``initialize`` (the SDK then refuses requests).

    ``True`` when this SDK's shape is not the one known here: the caller then takes
    the SDK's own path, slower but never answering what the SDK would refuse.
    """
    accepted = getattr(getattr(session, "_connection", None), "initialize_accepted", None)
    return accepted is not True


def _request_dispatch(session: ServerSession) -> Any:
    """The request-scoped dispatch context under the session (unwrapping the 2026 era's guard)."""
    outbound = getattr(session, "_request_outbound", _MISSING)
    return getattr(outbound, "_inner", outbound)


def direct_progress_requested(session: ServerSession) -> bool:
    """On the 2026 in-process direct path: did the caller pass a progress callback?

    ``False`` on every other path (there a progress token in ``_meta`` decides).
    ``True`` when the SDK's shape is not the one known here: allocating a progress
    pump costs a little, while a missing one would drop progress without a sound.
    """
    dispatch = _request_dispatch(session)
    if dispatch is _MISSING:
        return True
    transport = getattr(dispatch, "transport", None)
    if getattr(transport, "kind", None) != DIRECT_TRANSPORT_KIND:
        return False
    callback = getattr(dispatch, "_on_progress", _MISSING)
    return callback is _MISSING or callback is not None


def error_data_of(exc: Exception) -> mcp_types.ErrorData:
    """The JSON-RPC error the SDK's kernel answers for ``exc`` (its own ladder's errors keep their code)."""
    return modern_error_data(exc)


def accepted_media(request: Request) -> tuple[bool, bool]:
    """Whether ``request``'s ``Accept`` admits ``application/json`` and ``text/event-stream``, as the SDK reads it."""
    return check_accept_headers(request)


def protected_resource_routes(
    resource: str, issuer: str, scopes: list[str], name: str | None
) -> tuple[list[Route], str]:
    """The SDK's RFC 9728 routes for ``resource`` (plus the bare well-known path), and the document's URL."""
    routes = create_protected_resource_routes(
        AnyHttpUrl(resource), [AnyHttpUrl(issuer)], scopes_supported=scopes or None, resource_name=name
    )
    url = str(build_resource_metadata_url(AnyHttpUrl(resource)))
    bare = "/.well-known/oauth-protected-resource"
    extra = [Route(bare, route.endpoint, methods=route.methods) for route in routes if route.path != bare]
    return [*routes, *extra], url


def principal_of(token: AccessToken) -> tuple[str, str | None, str | None]:
    """The (client id, issuer, subject) a verified token stands for (issuer and subject ``None`` if not given)."""
    return principal_components(token)
