"""Streamable HTTP for a App app: the SDK's Starlette app plus fusion-nb's security defaults.

* Bearer token: one static secret (generated when none is given) or several named
  ones, compared in constant time by ``BearerGate`` on the MCP route. It gives the
  SDK exactly what the SDK's own bearer stack gives it (the SDK's ``AuthenticatedUser``
  in the ASGI scope, its auth context for ``get_access_token()``, the same 401), so
  the verified token reaches handlers (``RequestInfo.access_token``), stateful
  sessions are bound to it and so is sealed request state; it only does so in one
  layer with each token's user built once, instead of three layers per request.
* DNS-rebinding protection is always on: the ``Host`` must be one this server
  answers to (421 otherwise) and a browser ``Origin`` must be a matching
  ``http(s)://`` origin (403 otherwise).
* Request bodies over ``max_body_bytes`` get 413, judged on ``Content-Length`` and
  on the bytes actually streamed (the SDK's ``RequestBodyLimitMiddleware``).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import secrets
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..engine import App
from . import client_config
from .bounded import BoundedRequests
from .server import mcp_server
from .streamable import StreamableEndpoint

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")

#: the MCP Inspector release printed in ready-to-paste commands (one copy, in client_config); tests/interop pins it
INSPECTOR_VERSION = client_config.INSPECTOR_VERSION


SINGLE_TOKEN_CLIENT = "fusion-nb-client"
"""The client id of the one token ``http_app(token=...)`` accepts (named tokens use their names)."""

TOKENS_ENV = "FUSION_NB_TOKENS"
"""The environment variable ``tokens_from_env()`` reads: ``alice=<token>,ci=<token>``."""


class NamedTokenVerifier:
    """Accepts a set of bearer tokens, each its own client (``BearerGate`` asks it who a token is).

    The name becomes the verified ``AccessToken.client_id``: handlers see who called
    (``RequestInfo.access_token``), stateful sessions stay with their token's client,
    and sealed request state is bound to it, so one client cannot resume another's
    call. Every token is compared in constant time, all of them on every request.
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise ValueError("tokens= needs at least one name=token pair.")
        seen: set[str] = set()
        for name, token in tokens.items():
            if not name or not isinstance(name, str):
                raise ValueError("every token needs a non-empty name (the client id it stands for).")
            if not isinstance(token, str) or not token:
                raise ValueError(f"the token named {name!r} is empty.")
            if token in seen:
                raise ValueError(f"the token named {name!r} is also given under another name; each must be unique.")
            seen.add(token)
        self._tokens = [(token.encode(), name) for name, token in tokens.items()]

    def client_of(self, offered: bytes) -> str | None:
        """The name of the token ``offered`` is (compared with every token, in constant time), or ``None``."""
        client = None
        for secret, name in self._tokens:
            if hmac.compare_digest(offered, secret):
                client = name
        return client


_UNAUTHORIZED_BODY = b'{"error": "invalid_token", "error_description": "Authentication required"}'
_UNAUTHORIZED_START = {
    "type": "http.response.start",
    "status": 401,
    "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_UNAUTHORIZED_BODY)).encode()),
        (b"www-authenticate", b'Bearer error="invalid_token", error_description="Authentication required"'),
    ],
}


class BearerGate:
    """ASGI wrapper of the MCP endpoint: requests need an accepted bearer token (401 otherwise).

    What the SDK's bearer stack (Starlette's ``AuthenticationMiddleware`` with the
    SDK's ``BearerAuthBackend``, ``AuthContextMiddleware`` and ``RequireAuthMiddleware``)
    does for static tokens, in one layer and without per-request objects: the scope
    gets the token's ``AuthenticatedUser`` and ``AuthCredentials`` (the SDK binds
    2025 sessions to that user), the SDK's auth context holds the user while the
    request runs (``get_access_token()``, which binds sealed request state to the
    client), and a missing or unknown token gets the SDK's 401, byte for byte.
    Each token's user is built once: these tokens never expire and carry no scopes.
    """

    def __init__(self, app: ASGIApp, tokens: Mapping[str, str]) -> None:
        self.app = app
        self.verifier = NamedTokenVerifier(tokens)
        self._credentials = AuthCredentials([])
        self._users = {
            name: AuthenticatedUser(AccessToken(token=secret, client_id=name, scopes=[]))
            for name, secret in tokens.items()
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request as its token's client, or answer 401."""
        user = self._user(scope["headers"])
        if user is None:
            await send(_UNAUTHORIZED_START)
            await send({"type": "http.response.body", "body": _UNAUTHORIZED_BODY})
            return
        scope["user"] = user
        scope["auth"] = self._credentials
        token = auth_context_var.set(user)
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(token)

    def _user(self, headers: list[tuple[bytes, bytes]]) -> AuthenticatedUser | None:
        """The user of the first ``Authorization: Bearer <token>`` header (read as the SDK reads it), or ``None``."""
        for key, value in headers:
            if key == b"authorization" or key.lower() == b"authorization":
                if value[:7].lower() != b"bearer ":
                    return None
                name = self.verifier.client_of(value[7:].decode("latin-1").encode())
                return self._users[name] if name is not None else None
        return None


def tokens_from_env(variable: str = TOKENS_ENV) -> dict[str, str] | None:
    """Named tokens from the environment (``alice=<token>,ci=<token>``), or ``None`` when unset.

    For ``http_app(app, tokens=tokens_from_env())``; malformed entries raise ``ValueError``
    naming the entry's position, never its secret.
    """
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return None
    tokens: dict[str, str] = {}
    for position, entry in enumerate(raw.replace("\n", ",").split(","), start=1):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, token = entry.partition("=")
        if not sep or not name.strip() or not token.strip():
            raise ValueError(f"{variable}: entry {position} is not name=token (expected alice=<token>,ci=<token>).")
        if name.strip() in tokens:
            raise ValueError(f"{variable}: the name {name.strip()!r} appears twice.")
        tokens[name.strip()] = token.strip()
    return tokens


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
    app: App,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    tokens: Mapping[str, str] | None = None,
    auth: bool = True,
    json_response: bool = False,
    stateless: bool = False,
    max_body_bytes: int = 1_000_000,
    body_timeout: float = 30.0,
    allowed_hosts: Iterable[str] | None = None,
    allowed_origins: Iterable[str] | None = None,
    path: str = "/mcp",
    progress_interval: float = 0.05,
    telemetry: bool = False,
    request_state_keys: Iterable[bytes | str] | None = None,
    request_state_ttl: float = 600.0,
    max_sessions: int | None = 10_000,
    session_idle_timeout: float | None = 30 * 60,
    max_sessions_per_owner: int | None = 1_000,
    max_listens_per_owner: int | None = 100,
    answer_timeout: float | None = 600.0,
    worker_name: str | None = None,
) -> Starlette:
    """The ASGI app serving ``app`` over Streamable HTTP at ``path`` (both protocol eras).

    Clients authenticate with a bearer token: either one ``token`` (generated when
    neither is given; its client id is ``fusion-nb-client``) or named ``tokens``
    (``{"alice": "...", "ci": "..."}``, see ``tokens_from_env``), each its own
    client id. ``app.state.token`` holds the single token (``None`` with named
    tokens or ``auth=False``), ``app.state.tokens`` the names and tokens accepted;
    ``app.state.server`` the SDK server.

    Bodies over ``max_body_bytes`` get 413; a body not complete within
    ``body_timeout`` seconds gets 408; a client that disconnects early is one INFO
    log line (logger ``fusion_nb.http``). ``GET /healthz`` answers 200 without auth. ``json_response=True``
    answers with plain JSON: no progress and no live elicitation there.
    ``stateless=True`` makes 2025-era sessions per-request (2026 is always
    per-request). At most ``max_sessions`` 2025-era sessions are open at once (503
    beyond); one with nothing in flight for ``session_idle_timeout`` seconds ends
    (``None``: no limit). One credential holds at most ``max_sessions_per_owner`` of
    them and ``max_listens_per_owner`` 2026 ``subscriptions/listen`` streams, so one
    token cannot lock the others out; beyond a limit the answer is 503 with
    ``Retry-After``. A 2025 question to the client (an elicitation) waits at most
    ``answer_timeout`` seconds for its answer, and its call is cancelled when the POST
    that carried it disconnects. Each call builds a fresh server: the SDK's session
    manager runs once per app. ``worker_name`` (letters, digits, ``-``, ``_``) begins
    every 2025 session id as ``NAME.``, so a load balancer in front of several workers
    can send a session's requests to the worker that holds it (``deploy/nginx``).

    The default mode is served by ``StreamableEndpoint`` (each request in its POST's
    own task, on the SDK's protocol kernel); ``json_response`` and ``stateless``
    modes by the SDK's own transport.
    """
    server = mcp_server(
        app,
        progress_interval=progress_interval,
        telemetry=telemetry,
        request_state_keys=list(request_state_keys) if request_state_keys else None,
        request_state_ttl=request_state_ttl,
    )
    if not body_timeout > 0:
        raise ValueError(f"body_timeout must be a positive number of seconds, got {body_timeout!r}")
    if token is not None and tokens is not None:
        raise ValueError("pass token= (one client) or tokens= (named clients), not both.")
    if worker_name is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", worker_name):
        raise ValueError(f"worker_name must be 1 to 32 letters, digits, - or _, got {worker_name[:40]!r}.")
    accepted: dict[str, str] = {}
    if auth:
        if tokens is not None:
            accepted = dict(tokens)
        else:
            token = token if token is not None else secrets.token_urlsafe(32)
            accepted = {SINGLE_TOKEN_CLIENT: token}
    security = transport_security(host, allowed_hosts, allowed_origins)
    asgi = server.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        max_request_body_size=max_body_bytes,
        transport_security=security,
        host=host,
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_timeout,
    )
    if not json_response and not stateless:
        endpoint = StreamableEndpoint(
            server,
            _mcp_route(asgi, path).app,
            security,
            max_sessions=max_sessions,
            idle_timeout=session_idle_timeout,
            max_sessions_per_owner=max_sessions_per_owner,
            max_listens_per_owner=max_listens_per_owner,
            answer_timeout=answer_timeout,
            session_prefix=f"{worker_name}." if worker_name else "",
        )
        _serve_lean(asgi, path, endpoint, max_body_bytes)
    if auth:
        _guard_endpoint(asgi, path, accepted)
    asgi.add_middleware(BoundedRequests, body_timeout=body_timeout)
    asgi.state.token = token if auth and tokens is None else None
    asgi.state.tokens = accepted
    asgi.state.server = server
    asgi.state.server_mode = _server_mode(json_response=json_response, stateless=stateless)
    return asgi


def _mcp_route(asgi: Starlette, path: str) -> Route:
    """The SDK app's route serving the MCP endpoint."""
    for route in asgi.router.routes:
        if isinstance(route, Route) and route.path == path:
            return route
    raise RuntimeError(f"the SDK's Streamable HTTP app has no route at {path!r}")


def _guard_endpoint(asgi: Starlette, path: str, tokens: Mapping[str, str]) -> None:
    """Put ``BearerGate`` in front of the MCP route's endpoint (other paths stay as the SDK built them)."""
    route = _mcp_route(asgi, path)
    route.app = BearerGate(route.app, tokens)


def _serve_lean(asgi: Starlette, path: str, endpoint: StreamableEndpoint, max_body_bytes: int) -> None:
    """Serve the MCP route with ``endpoint`` (the SDK's entry, its fallback, stays behind it).

    Its sessions live as long as the app: their lifetime joins the SDK's in the app's lifespan.
    """
    _mcp_route(asgi, path).app = RequestBodyLimitMiddleware(endpoint, max_body_bytes)
    sdk_lifespan = asgi.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with sdk_lifespan(app), endpoint.sessions.running():
            yield

    asgi.router.lifespan_context = lifespan
    asgi.state.endpoint = endpoint  # ``in_loop_server`` ends its GET streams first when stopping


def _server_mode(*, json_response: bool, stateless: bool) -> str | None:
    """The words naming a mode that leaves 2025-era calls no back channel (refusals quote them)."""
    modes = [
        *(["answers with single JSON responses (json_response=True)"] if json_response else []),
        *(["keeps no 2025-11-25 sessions (stateless=True)"] if stateless else []),
    ]
    return " and ".join(modes) or None


@contextlib.asynccontextmanager
async def connect(
    url: str,
    token: str | None = None,
    *,
    mode: str = "auto",
    headers: Mapping[str, str] | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """An SDK ``mcp.Client`` connected to a Streamable HTTP endpoint with a bearer token.

    ``mode="legacy"`` speaks the 2025-11-25 handshake era, ``"auto"`` prefers
    2026-07-28; ``headers`` are sent with every request (the token's ``Authorization``
    wins); ``transport`` replaces the HTTP client's (``fusion-nb connect`` watches
    for a failed upstream there); ``options`` go to ``mcp.Client`` (``elicitation_callback`` ...). The HTTP
    client has the SDK's own defaults (30 s, 300 s reads for long streams).
    """
    headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})} or None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), transport=transport) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,
    ):
        yield client
