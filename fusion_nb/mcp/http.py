"""Streamable HTTP for an app: one Starlette app composed of fusion-nb's parts and the SDK's transport.

* OAuth resource-server mode (``oauth=``): an outside issuer's access tokens, checked
  by ``fusion_nb.mcp.oauth`` (which also serves the RFC 9728 document); otherwise
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
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..engine import App
from . import client_config
from .bounded import BoundedRequests
from .options import HttpOptions, check_tokens, parse_tokens, with_options
from .server import FusionServer
from .streamable import StreamableEndpoint

HEALTH_PATH = "/healthz"
"""The health route's path (answered without auth; ``fusion-nb serve`` answers it first while draining)."""

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
        check_tokens(tokens)
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
    return parse_tokens(raw, variable) if raw else None


def transport_security(
    host: str, allowed_hosts: Iterable[str] | None = None, allowed_origins: Iterable[str] | None = None
) -> TransportSecuritySettings:
    """Loopback names (any port) plus ``host`` and the extras given, for both Host and Origin."""
    names = list(_LOOPBACK)
    bracketed = client_config.url_host(host)
    if bracketed not in names and host not in ("0.0.0.0", "::"):
        names.append(bracketed)
    hosts = [f"{name}:*" for name in names] + list(allowed_hosts or ())
    origins = [f"{scheme}://{name}:*" for name in names for scheme in ("http", "https")] + list(allowed_origins or ())
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class HttpApp(Starlette):
    """The ASGI app ``http_app`` returns: a Starlette app composed once, with what its callers need.

    Routes: the MCP endpoint at ``options.path`` (its request-body limit, the bearer
    gate, ``StreamableEndpoint`` over the SDK's session manager, or the SDK's own
    transport in the ``json_response`` and ``stateless`` modes) and ``GET /healthz``
    (200 ``ok``, no auth, no details, for load balancers and probes); around them
    ``BoundedRequests``; one lifespan running the SDK's session manager and the
    endpoint's 2025 sessions. The attributes are set here only, and only read elsewhere:

    * ``token``: the single bearer token (``None`` with named tokens, ``oauth`` or ``auth=False``);
    * ``tokens``: the client ids and tokens accepted (empty with ``oauth`` or ``auth=False``);
    * ``server``: the SDK server serving the app (``FusionServer``);
    * ``options``: the ``HttpOptions`` it was built from (``options.back_channel_refusal``
      names a mode that leaves 2025 calls no way to ask the client);
    * ``endpoint``: the ``StreamableEndpoint`` serving the default mode (``None`` in the
      modes the SDK's transport serves); stopping, ``in_loop_server`` first ends its
      long-lived ``GET`` streams (``endpoint.end_streams()``).
    """

    def __init__(self, app: App, options: HttpOptions) -> None:
        token = options.token
        if not options.auth or options.oauth is not None:
            token, accepted = None, {}
        elif options.tokens is not None:
            accepted = dict(options.tokens)
        else:
            token = token if token is not None else client_config.new_token()
            accepted = {SINGLE_TOKEN_CLIENT: token}
        self.token: str | None = token
        self.tokens: Mapping[str, str] = accepted
        self.options = options
        self.server = server = FusionServer(app, options, http_mode=options.back_channel_refusal)
        hosts, origins = list(options.allowed_hosts or ()), list(options.allowed_origins or ())
        if options.public_url is not None:  # (the name clients reach it by, behind a proxy)
            hosts.append(urlsplit(options.public_url).netloc)
            origins.append(options.public_url)
        security = transport_security(options.host, hosts, origins)
        sessions = StreamableHTTPSessionManager(
            server,
            json_response=options.json_response,
            stateless=options.stateless,
            security_settings=security,
            max_request_body_size=options.max_body_bytes,
            session_idle_timeout=options.session_idle_timeout,
            max_sessions=options.max_sessions,
        )
        sdk_transport = StreamableHTTPASGIApp(sessions)
        endpoint: ASGIApp = sdk_transport
        lean: StreamableEndpoint | None = None
        if not options.json_response and not options.stateless:
            lean = StreamableEndpoint(
                server,
                sdk_transport,
                security,
                max_sessions=options.max_sessions,
                idle_timeout=options.session_idle_timeout,
                max_sessions_per_owner=options.max_sessions_per_owner,
                max_listens_per_owner=options.max_listens_per_owner,
                answer_timeout=options.answer_timeout,
                session_prefix=f"{options.worker_name}." if options.worker_name else "",
            )
            endpoint = RequestBodyLimitMiddleware(lean, options.max_body_bytes)
        discovery: list[Route] = []
        close_verifier: Callable[[], Any] | None = None
        if options.oauth is not None and options.public_url is not None:
            from .oauth import oauth_parts

            endpoint, discovery, close_verifier = oauth_parts(
                endpoint,
                options.oauth,
                public_url=options.public_url,
                path=options.path,
                name=app.name,
                tool_scopes=lambda name: tool.scopes if (tool := app.get(name)) is not None else (),
                all_tool_scopes=lambda: [scope for tool in app.tools for scope in tool.scopes],
                max_body_bytes=options.max_body_bytes,
            )
        elif options.auth:
            endpoint = BearerGate(endpoint, accepted)
        self.endpoint = lean

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            async with sessions.run(), lean.sessions.running() if lean is not None else contextlib.nullcontext():
                try:
                    yield
                finally:
                    if close_verifier is not None:
                        await close_verifier()

        super().__init__(
            routes=[Route(options.path, endpoint), Route(HEALTH_PATH, _Health()), *discovery],
            middleware=[Middleware(BoundedRequests, body_timeout=options.body_timeout)],
            lifespan=lifespan,
        )


_HEALTHY_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")],
}


class _Health:
    """``GET /healthz``: 200 ``ok`` (no auth, no details); any other method finds no route (404).

    An ASGI app rather than a function: Starlette would make a function a request/response endpoint.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            raise HTTPException(status_code=404)
        await send(_HEALTHY_START)
        await send({"type": "http.response.body", "body": b"ok"})


@with_options(HttpOptions)
def http_app(app: App, options: HttpOptions) -> HttpApp:
    """The ASGI app serving ``app`` over Streamable HTTP at ``path`` (both protocol eras).

    The options are ``HttpOptions``' (``fusion_nb.mcp.options``), which documents them;
    each is checked before anything is built. The app's ``token`` holds the single
    token (``None`` with named tokens or ``auth=False``), its ``tokens`` the names and
    tokens accepted, its ``server`` the SDK server (see ``HttpApp``).

    A client that disconnects early is one INFO log line (logger ``fusion_nb.http``).
    ``GET /healthz`` answers 200 without auth. Each call builds a fresh server: the
    SDK's session manager runs once per app.

    The default mode is served by ``StreamableEndpoint`` (each request in its POST's
    own task, on the SDK's protocol kernel); ``json_response`` and ``stateless``
    modes by the SDK's own transport. What each costs per call: ``benchmarks/http.py``.
    """
    return HttpApp(app, options)


def bearer_headers(token: str | None, headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """``headers`` plus ``Authorization: Bearer <token>`` when there is a token (the token wins)."""
    return {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}


@contextlib.asynccontextmanager
async def connect(
    url: str,
    token: str | None = None,
    *,
    mode: str = "auto",
    headers: Mapping[str, str] | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    outgoing: Callable[[Any], Any] | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """An SDK ``mcp.Client`` connected to a Streamable HTTP endpoint with a bearer token.

    ``mode="legacy"`` speaks the 2025-11-25 handshake era, ``"auto"`` prefers
    2026-07-28; ``headers`` are sent with every request (the token's ``Authorization``
    wins); ``options`` go to ``mcp.Client`` (``elicitation_callback`` ...). The HTTP
    client has the SDK's own defaults (30 s, 300 s reads for long streams).

    For a bridge (``fusion-nb connect``): ``transport`` replaces the HTTP client's
    (it watches for a failed upstream there), and ``outgoing`` wraps the client's
    write stream (it restamps each request for the host it forwards).
    """
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(
        headers=bearer_headers(token, headers) or None, timeout=timeout, transport=transport
    ) as http:
        streams = streamable_http_client(url, http_client=http)
        async with Client(_written_through(streams, outgoing) if outgoing else streams, mode=mode, **options) as client:
            yield client


@contextlib.asynccontextmanager
async def _written_through(streams: Any, outgoing: Callable[[Any], Any]) -> AsyncIterator[Any]:
    """The transport's ``(read, write)`` streams, the write stream wrapped by ``outgoing``."""
    async with streams as (read_stream, write_stream):
        yield read_stream, outgoing(write_stream)
