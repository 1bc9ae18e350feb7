"""The OAuth resource server's token check: JWTs against the issuer's keys, other tokens by introspection.

Needs the ``oauth`` extra (PyJWT with its crypto); only OAuth mode imports this module.
What the issuer publishes is read on the first token, not at start-up: a server whose
issuer is down still starts and serves ``/healthz``, and its clients get 503 with one
sentence until the issuer answers (retried at most once per ``key_refresh_interval``).

A refusal is a ``TokenRefused`` (the client's token: 401) or an ``IssuerUnavailable``
(the issuer's side: 503), each one sentence that names no secret.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt
from mcp.server.auth.provider import AccessToken

from .oauth import IssuerUnavailable, TokenRefused
from .options import OAuthSettings

__all__ = ["MAX_TOKEN_BYTES", "JwtVerifier"]

MAX_TOKEN_BYTES = 16_384
"""The longest token looked at (real access tokens are 1-4 KB); a longer one is refused unread."""

_MAX_DOCUMENT_BYTES = 1_000_000

_CACHED_TOKENS = 1024
"""Verified JWTs remembered (a client sends one token on every request until it expires)."""

_CACHE_SECONDS = 300.0
"""The longest a verified JWT is remembered, however late it expires."""


class JwtVerifier:
    """An SDK ``TokenVerifier`` for one issuer and one audience (this server's resource URL).

    ``verify_token`` answers as the SDK's protocol asks (an ``AccessToken`` or ``None``);
    ``verify`` raises the reason instead, for the 401 and 503 answers. The token's
    ``sub`` and ``iss`` go to ``AccessToken.subject`` and ``claims``, so sessions, tasks
    and sealed request state belong to the person and the client (the SDK's
    ``principal_components``), not the client alone.
    """

    def __init__(self, settings: OAuthSettings, audience: str) -> None:
        self.settings = settings
        self.audience = audience
        self._http: httpx2.AsyncClient | None = None
        self._lock = anyio.Lock()
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str | None, tuple[jwt.PyJWK, str | None]] = {}  # kid -> (key, the alg it pins)
        self._keys_read_at = -float("inf")
        self._failure: tuple[float, str] | None = None
        self._verified: dict[str, tuple[float, AccessToken]] = {}  # JWT -> (remembered until, its AccessToken)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``TokenVerifier`` protocol: the verified token, or ``None`` when refused."""
        try:
            return await self.verify(token)
        except TokenRefused:
            return None

    async def verify(self, token: str) -> AccessToken:
        """The verified token; raises ``TokenRefused`` (401) or ``IssuerUnavailable`` (503)."""
        remembered = self._verified.get(token)
        if remembered is not None:
            if time.time() < remembered[0]:
                return remembered[1]
            del self._verified[token]
        if len(token) > MAX_TOKEN_BYTES:
            raise TokenRefused(f"the token is {len(token)} bytes long, more than the {MAX_TOKEN_BYTES} accepted")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            return await self._introspect(token)
        verified = await self._verify_jwt(token, header)
        self._remember(token, verified)
        return verified

    def _remember(self, token: str, verified: AccessToken) -> None:
        """Keep a verified JWT until it expires (at most ``_CACHE_SECONDS``): an RS256 check is the dearest step.

        A JWT cannot be revoked before its ``exp`` anyway; only its signature, claims and
        clock were checked, and the clock is checked again on every use.
        """
        now = time.time()
        until = min(verified.expires_at or now, now + _CACHE_SECONDS)
        if until <= now:
            return
        if len(self._verified) >= _CACHED_TOKENS:
            self._verified.pop(next(iter(self._verified)))  # (the oldest entry)
        self._verified[token] = (until, verified)

    async def aclose(self) -> None:
        """Close the connection pool to the issuer (the app's lifespan ends)."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _verify_jwt(self, token: str, header: Mapping[str, Any]) -> AccessToken:
        algorithm = header.get("alg")
        if algorithm not in self.settings.algorithms:
            accepted = ", ".join(self.settings.algorithms)
            raise TokenRefused(f"tokens signed with {str(algorithm)[:20]!r} are not accepted (only {accepted})")
        key, pinned = await self._key(header.get("kid"))
        if pinned is not None and pinned != algorithm:
            raise TokenRefused(f"the token says {algorithm}, but its signing key is for {pinned}")
        metadata = await self._issuer_metadata()
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[str(algorithm)],
                audience=self.audience,
                issuer=metadata["issuer"],
                leeway=self.settings.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("the token is not valid yet (its nbf or iat is in the future)") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused(f"the token is for another audience, not {self.audience}") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused(f"the token was issued by another issuer, not {metadata['issuer']}") from None
        except jwt.MissingRequiredClaimError as missing:
            raise TokenRefused(f"the token has no {missing.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("the token's signature does not verify") from None
        except jwt.PyJWTError as invalid:  # (a malformed token, a key of another type ...)
            raise TokenRefused(f"the token is not valid: {str(invalid)[:120]}") from None
        return _access_token(token, claims, self.audience)

    async def _key(self, kid: object) -> tuple[jwt.PyJWK, str | None]:
        """The issuer's key ``kid`` (re-reading the keys once if unknown, at most once per interval)."""
        if not isinstance(kid, str | None):
            raise TokenRefused("the token's key id (kid) is not a string")
        if not self._keys:
            await self._read_keys(force=True)
        key = self._find(kid)
        if key is None:
            await self._read_keys(force=False)
            key = self._find(kid)
        if key is None:
            raise TokenRefused(f"the token's signing key {str(kid)[:64]!r} is not one the issuer publishes")
        return key

    def _find(self, kid: str | None) -> tuple[jwt.PyJWK, str | None] | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _read_keys(self, *, force: bool) -> None:
        """Read the JWKS, unless another request just did (``force``: unless one did since we looked)."""
        seen = self._keys_read_at
        async with self._lock:
            if self._keys_read_at != seen:
                return  # another request read them while this one waited
            if not force and time.monotonic() - seen < self.settings.key_refresh_interval:
                return
            try:
                await self._read_keys_locked()
            except IssuerUnavailable as failed:
                self._failure = (time.monotonic(), str(failed))
                raise

    async def _read_keys_locked(self) -> None:
        if self._failure is not None and time.monotonic() - self._failure[0] < self.settings.key_refresh_interval:
            raise IssuerUnavailable(self._failure[1])  # (asked recently: answer again without asking)
        metadata = await self._issuer_metadata_locked()
        uri = metadata.get("jwks_uri")
        if not isinstance(uri, str):
            raise IssuerUnavailable(f"the authorization server {self.settings.issuer_url} publishes no jwks_uri")
        document = await self._get_json(uri, "its JWKS")
        keys = {}
        listed = document.get("keys")
        for entry in listed if isinstance(listed, list) else []:
            if isinstance(entry, dict) and entry.get("use", "sig") == "sig":
                try:
                    key = jwt.PyJWK(entry)
                except jwt.PyJWTError:
                    continue  # (a key type or curve this PyJWT cannot use: the others still serve)
                pinned = entry.get("alg")
                keys[key.key_id] = (key, pinned if isinstance(pinned, str) else None)
        if not keys:
            raise IssuerUnavailable(f"the JWKS at {uri} holds no signing key this server can use")
        self._keys = keys
        self._keys_read_at = time.monotonic()
        self._failure = None

    async def _issuer_metadata(self) -> dict[str, Any]:
        if self._metadata is not None:
            return self._metadata
        async with self._lock:
            return await self._issuer_metadata_locked()

    async def _issuer_metadata_locked(self) -> dict[str, Any]:
        """RFC 8414 metadata, else OpenID discovery; a recent failure is answered again without asking."""
        if self._metadata is not None:
            return self._metadata
        if self._failure is not None and time.monotonic() - self._failure[0] < self.settings.key_refresh_interval:
            raise IssuerUnavailable(self._failure[1])
        issuer = self.settings.issuer_url
        parts = urlsplit(issuer)
        path = parts.path.rstrip("/")
        candidates = [
            f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{path}",
            f"{issuer.rstrip('/')}/.well-known/openid-configuration",
        ]
        why = ""
        try:
            for url in candidates:
                try:
                    document = await self._get_json(url, "its metadata")
                except IssuerUnavailable as failed:
                    if "does not answer" in str(failed):
                        raise
                    why = str(failed)
                    continue
                named = document.get("issuer")
                if not isinstance(named, str) or named.rstrip("/") != issuer.rstrip("/"):
                    raise IssuerUnavailable(f"the metadata at {url} names the issuer {str(named)[:80]!r}, not {issuer}")
                self._metadata = document
                self._failure = None
                return document
            raise IssuerUnavailable(f"the authorization server {issuer} publishes no metadata ({why})")
        except IssuerUnavailable as failed:
            self._failure = (time.monotonic(), str(failed))
            raise

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        return await self._json_of(await self._request("GET", url, what), url, what)

    async def _request(self, method: str, url: str, what: str, **options: Any) -> httpx2.Response:
        if self._http is None:
            self._http = httpx2.AsyncClient(timeout=self.settings.timeout, follow_redirects=False)
        try:
            return await self._http.request(method, url, **options)
        except httpx2.HTTPError as failed:
            reason = type(failed).__name__
            raise IssuerUnavailable(
                f"the authorization server {self.settings.issuer_url} does not answer ({what} at {url}: {reason})"
            ) from None

    async def _json_of(self, response: httpx2.Response, url: str, what: str) -> dict[str, Any]:
        if response.status_code != 200:
            raise IssuerUnavailable(f"{what} at {url} answered HTTP {response.status_code}")
        if len(response.content) > _MAX_DOCUMENT_BYTES:
            raise IssuerUnavailable(f"{what} at {url} is larger than {_MAX_DOCUMENT_BYTES} bytes")
        try:
            document = json.loads(response.content)
        except ValueError:
            raise IssuerUnavailable(f"{what} at {url} is not JSON") from None
        if not isinstance(document, dict):
            raise IssuerUnavailable(f"{what} at {url} is not a JSON object")
        return document

    async def _introspect(self, token: str) -> AccessToken:
        """RFC 7662: ask the issuer about a token that is not a JWT (an opaque one)."""
        settings = self.settings
        metadata = await self._issuer_metadata()
        endpoint = metadata.get("introspection_endpoint")
        if not isinstance(endpoint, str) or settings.client_id is None:
            raise TokenRefused(
                "the token is not a JWT, and this server has no introspection client to ask the issuer about it"
            )
        response = await self._request(
            "POST",
            endpoint,
            "its introspection",
            data={"token": token, "token_type_hint": "access_token"},
            auth=(settings.client_id, settings.client_secret or ""),
        )
        answer = await self._json_of(response, endpoint, "introspection")
        if answer.get("active") is not True:
            raise TokenRefused("the issuer says the token is not active (expired, revoked or unknown)")
        now = time.time()
        expires = answer.get("exp")
        if isinstance(expires, int | float) and expires + settings.leeway < now:
            raise TokenRefused("the token has expired")
        starts = answer.get("nbf")
        if isinstance(starts, int | float) and starts - settings.leeway > now:
            raise TokenRefused("the token is not valid yet (its nbf is in the future)")
        issuer = answer.get("iss")
        if issuer is not None and str(issuer).rstrip("/") != str(metadata["issuer"]).rstrip("/"):
            raise TokenRefused(f"the token was issued by another issuer, not {metadata['issuer']}")
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if self.audience not in audiences:
            raise TokenRefused(f"the token is for another audience, not {self.audience}")
        return _access_token(token, answer, self.audience)


def _access_token(token: str, claims: Mapping[str, Any], audience: str) -> AccessToken:
    """The SDK's ``AccessToken`` for verified ``claims`` (a JWT's, or an introspection answer)."""
    scopes = claims.get("scope", claims.get("scp", ""))
    names = scopes.split() if isinstance(scopes, str) else [str(s) for s in scopes] if isinstance(scopes, list) else []
    subject = claims.get("sub")
    client = claims.get("client_id") or claims.get("azp") or subject or "unknown-client"
    expires = claims.get("exp")
    return AccessToken(
        token=token,
        client_id=str(client),
        scopes=names,
        expires_at=int(expires) if isinstance(expires, int | float) else None,
        resource=audience,
        subject=str(subject) if subject is not None else None,
        claims=dict(claims),
    )
