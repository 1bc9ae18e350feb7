"""OAuth resource-server mode of ``http_app``: the gate, its challenges and the RFC 9728 document.

Only ``http_app(..., oauth=OAuthSettings(...))`` (``fusion-nb serve --auth-issuer``) builds
these; static tokens stay on ``BearerGate`` and publish no discovery document, because a
client that finds one drops its configured header and starts OAuth.

``OAuthGate`` does for an outside issuer's tokens what the SDK's bearer stack
(``BearerAuthBackend``, ``AuthContextMiddleware``, ``RequireAuthMiddleware``) does, plus
what that stack cannot know: a tool's own scopes (``.scopes(...)`` on its builder, read
from the ``tools/call`` body) and a reason in every refusal. Its answers:

* no token: 401 ``Bearer resource_metadata="...", scope="..."`` (where discovery starts);
* a refused token: 401 ``error="invalid_token"`` with the reason in ``error_description``
  (and one log line: the operator sees why a client is turned away; no token at all is the
  first step of discovery, not logged);
* a token without a scope the call needs: 403 ``error="insufficient_scope", scope="..."``;
* an issuer that cannot vouch now (down, keys not JSON): 503 and one log line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._sdk import protected_resource_routes
from .options import OAuthSettings

__all__ = ["IssuerUnavailable", "OAuthGate", "TokenRefused", "oauth_parts"]

log = logging.getLogger("fusion_nb.http")

#: a token's reason kept short in a header (descriptions are ASCII, quote-free: RFC 6750 §3)
_MAX_DESCRIPTION = 200


class TokenRefused(Exception):
    """The client's token is not accepted here (401); the message says why in one sentence."""


class IssuerUnavailable(Exception):
    """The authorization server cannot vouch for tokens now (503); the message says why in one sentence."""


def _quoted(text: str) -> str:
    printable = "".join(ch if 0x20 <= ord(ch) < 0x7F and ch not in '"\\' else "'" for ch in text)
    return printable[:_MAX_DESCRIPTION]


class OAuthGate:
    """ASGI wrapper of the MCP endpoint in OAuth mode (see the module's docstring for its answers).

    ``verify`` is the verifier's reason-raising check (``JwtVerifier.verify``), or a
    ``TokenVerifier``'s ``verify_token`` adapted to it; ``tool_scopes(name)`` the
    scopes a tool needs on top of ``required_scopes`` (read live: a kernel may add
    tools). The request body is read here only when some tool needs scopes, at most
    ``max_body_bytes`` of it (a longer one is passed on for the 413).
    """

    def __init__(
        self,
        app: ASGIApp,
        verify: Callable[[str], Any],
        *,
        metadata_url: str,
        required_scopes: Sequence[str],
        tool_scopes: Callable[[str], Sequence[str]],
        any_tool_scopes: Callable[[], bool],
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.verify = verify
        self.metadata_url = metadata_url
        self.required_scopes = tuple(required_scopes)
        self.tool_scopes = tool_scopes
        self.any_tool_scopes = any_tool_scopes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request as its token's principal, or answer 401, 403 or 503."""
        header = _authorization(scope["headers"])
        if header is None:
            await self._challenge(send, 401, None, "Authentication required", self.required_scopes)
            return
        if header[:7].lower() != b"bearer " or not header[7:].strip():
            malformed = "the Authorization header is not 'Bearer <token>'"
            log.warning("bearer token refused: %s", malformed)
            await self._challenge(send, 401, "invalid_token", malformed)
            return
        try:
            token: AccessToken = await self.verify(header[7:].strip().decode("latin-1"))
        except TokenRefused as refused:
            log.warning("bearer token refused: %s", refused)
            await self._challenge(send, 401, "invalid_token", str(refused), self.required_scopes)
            return
        except IssuerUnavailable as down:
            log.warning("cannot check bearer tokens: %s", down)
            await _unavailable(send, str(down))
            return
        missing = [name for name in self.required_scopes if name not in token.scopes]
        if not missing and scope["method"] == "POST" and self.any_tool_scopes():
            receive, tool = await self._called_tool(receive)
            if tool is not None:
                missing = [name for name in self.tool_scopes(tool) if name not in token.scopes]
                if missing:
                    needed = [*self.required_scopes, *self.tool_scopes(tool)]
                    why = f"the tool {tool[:80]!r} needs the scope {' '.join(missing)}"
                    await self._challenge(send, 403, "insufficient_scope", why, needed)
                    return
        if missing:
            await self._challenge(
                send,
                403,
                "insufficient_scope",
                f"this server needs the scope {' '.join(missing)}",
                self.required_scopes,
            )
            return
        user = AuthenticatedUser(token)
        scope["user"] = user
        scope["auth"] = AuthCredentials(token.scopes)
        context = auth_context_var.set(user)
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(context)

    async def _called_tool(self, receive: Receive) -> tuple[Receive, str | None]:
        """The tool a ``tools/call`` body names (``None`` for other requests), and a ``receive`` replaying the body."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body_bytes or not message.get("more_body", False):
                break
        tool = None
        if size <= self.max_body_bytes:
            try:
                body = json.loads(b"".join(m.get("body", b"") for m in messages))
            except ValueError:
                body = None
            if isinstance(body, dict) and body.get("method") == "tools/call" and isinstance(body.get("params"), dict):
                name = body["params"].get("name")
                tool = name if isinstance(name, str) else None
        pending = iter(messages)

        async def replay() -> Message:
            return next(pending, None) or await receive()

        return replay, tool

    async def _challenge(
        self, send: Send, status: int, error: str | None, description: str, scopes: Iterable[str] = ()
    ) -> None:
        parts = [f'error="{error}"'] if error else []
        parts.append(f'error_description="{_quoted(description)}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        scopes = list(dict.fromkeys(scopes))
        if scopes:
            parts.append(f'scope="{_quoted(" ".join(scopes))}"')
        body = json.dumps({"error": error or "invalid_token", "error_description": description}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", ("Bearer " + ", ".join(parts)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _unavailable(send: Send, why: str) -> None:
    body = json.dumps({"error": "temporarily_unavailable", "error_description": why}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"5"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _authorization(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The first ``Authorization`` header's value (as the SDK reads it), or ``None``."""
    for key, value in headers:
        if key == b"authorization" or key.lower() == b"authorization":
            return value
    return None


class _AdaptedVerifier:
    """A ``TokenVerifier`` given by the caller, with ``verify``'s contract: ``None`` becomes a refusal."""

    def __init__(self, verifier: Any) -> None:
        self.verifier = verifier

    async def __call__(self, token: str) -> AccessToken:
        verified = await self.verifier.verify_token(token)
        if verified is None:
            raise TokenRefused("the token is not accepted")
        return verified


def oauth_parts(
    endpoint: ASGIApp,
    settings: OAuthSettings,
    *,
    public_url: str,
    path: str,
    name: str,
    tool_scopes: Callable[[str], Sequence[str]],
    all_tool_scopes: Callable[[], Sequence[str]],
    max_body_bytes: int,
) -> tuple[OAuthGate, list[Route], Callable[[], Any]]:
    """The gate around ``endpoint``, the RFC 9728 routes, and what closes the verifier.

    The resource is ``public_url + path``; tokens must name it (or ``settings.audience``)
    as their audience. The document lists the issuer and every scope a call may need.
    """
    resource = public_url + path
    audience = settings.audience or resource
    if settings.token_verifier is not None:
        verify: Callable[[str], Any] = _AdaptedVerifier(settings.token_verifier)

        async def close() -> None:
            return None

    else:
        try:
            from .jwt_verifier import JwtVerifier
        except ImportError as missing:
            raise ValueError(
                "oauth= checks JWTs with PyJWT, which is not installed: pip install 'fusion-nb[oauth]'"
            ) from missing
        verifier = JwtVerifier(settings, audience)
        verify, close = verifier.verify, verifier.aclose
    scopes = list(dict.fromkeys([*settings.required_scopes, *all_tool_scopes()]))
    routes, metadata_url = protected_resource_routes(resource, settings.issuer_url, scopes, name)
    gate = OAuthGate(
        endpoint,
        verify,
        metadata_url=metadata_url,
        required_scopes=settings.required_scopes,
        tool_scopes=tool_scopes,
        any_tool_scopes=lambda: bool(all_tool_scopes()),
        max_body_bytes=max_body_bytes,
    )
    return gate, routes, close
