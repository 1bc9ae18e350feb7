"""Streamable HTTP for a Fusion app: the SDK's Starlette app plus fusion-nb's security defaults.

* Bearer token: the SDK's own ``token_verifier``/``AuthSettings`` mechanism, fed one
  static secret (generated when none is given) compared in constant time. Being the
  SDK's auth, the verified token reaches handlers (``RequestInfo.access_token``) and
  stateful sessions are bound to it.
* DNS-rebinding protection is always on: the ``Host`` must be one this server
  answers to (421 otherwise) and a browser ``Origin`` must be a matching
  ``http(s)://`` origin (403 otherwise).
* Request bodies over ``max_body_bytes`` get 413, judged on ``Content-Length`` and
  on the bytes actually streamed (the SDK's ``RequestBodyLimitMiddleware``).
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from ..engine import Fusion
from .server import mcp_server

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")

INSPECTOR_VERSION = "2.12.0"
"""The MCP Inspector release printed in ready-to-paste commands; tests/interop pins and runs the same one."""


class StaticTokenVerifier:
    """Accepts exactly one bearer token (the SDK's ``TokenVerifier`` protocol)."""

    def __init__(self, token: str, client_id: str = "fusion-nb-client") -> None:
        self._token = token.encode()
        self._client_id = client_id

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id=self._client_id, scopes=[])
        return None


def transport_security(
    host: str, allowed_hosts: Iterable[str] | None = None, allowed_origins: Iterable[str] | None = None
) -> TransportSecuritySettings:
    """Loopback names (any port) plus ``host`` and the extras given, for both Host and Origin."""
    names = list(_LOOPBACK)
    bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if bracketed not in names and host not in ("0.0.0.0", "::"):
        names.append(bracketed)
    hosts = [f"{name}:*" for name in names] + list(allowed_hosts or ())
    origins = [f"{scheme}://{name}:*" for name in names for scheme in ("http", "https")] + list(allowed_origins or ())
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def http_app(
    app: Fusion,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    auth: bool = True,
    json_response: bool = False,
    stateless: bool = False,
    max_body_bytes: int = 1_000_000,
    allowed_hosts: Iterable[str] | None = None,
    allowed_origins: Iterable[str] | None = None,
    path: str = "/mcp",
    progress_interval: float = 0.05,
    telemetry: bool = False,
    request_state_keys: Iterable[bytes | str] | None = None,
    request_state_ttl: float = 600.0,
) -> Starlette:
    """The ASGI app serving ``app`` over Streamable HTTP at ``path`` (both protocol eras).

    ``app.state.token`` holds the bearer token clients must send (``None`` with
    ``auth=False``); ``app.state.server`` the SDK server. ``json_response=True``
    answers with plain JSON: no progress and no live elicitation there.
    ``stateless=True`` makes 2025-era sessions per-request (2026 is always
    per-request). Each call builds a fresh server: the SDK's session manager
    runs once per app.
    """
    server = mcp_server(
        app,
        progress_interval=progress_interval,
        telemetry=telemetry,
        request_state_keys=list(request_state_keys) if request_state_keys else None,
        request_state_ttl=request_state_ttl,
    )
    if auth and token is None:
        token = secrets.token_urlsafe(32)
    options: dict[str, Any] = {}
    if auth:
        options["auth"] = AuthSettings(
            issuer_url="http://localhost", resource_server_url=None, validate_token_resource=False
        )
        options["token_verifier"] = StaticTokenVerifier(token)  # type: ignore[arg-type]
    asgi = server.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        max_request_body_size=max_body_bytes,
        transport_security=transport_security(host, allowed_hosts, allowed_origins),
        host=host,
        **options,
    )
    asgi.state.token = token if auth else None
    asgi.state.server = server
    asgi.state.server_mode = _server_mode(json_response=json_response, stateless=stateless)
    return asgi


def _server_mode(*, json_response: bool, stateless: bool) -> str | None:
    """The words naming a mode that leaves 2025-era calls no back channel (refusals quote them)."""
    modes = [
        *(["answers with single JSON responses (json_response=True)"] if json_response else []),
        *(["keeps no 2025-11-25 sessions (stateless=True)"] if stateless else []),
    ]
    return " and ".join(modes) or None


@contextlib.asynccontextmanager
async def connect(url: str, token: str | None = None, *, mode: str = "auto", **options: Any) -> AsyncIterator[Client]:
    """An SDK ``mcp.Client`` connected to a Streamable HTTP endpoint with a bearer token.

    ``mode="legacy"`` speaks the 2025-11-25 handshake era, ``"auto"`` prefers
    2026-07-28; ``options`` go to ``mcp.Client`` (``elicitation_callback`` ...). The
    HTTP client has the SDK's own defaults (30 s, 300 s reads for long streams).
    """
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,
    ):
        yield client
