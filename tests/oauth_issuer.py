"""A small authorization server for the resource-server tests: real keys, real HTTP on loopback.

It publishes RFC 8414 metadata (or only OpenID discovery), a JWKS that a test can
rotate or break, and RFC 7662 introspection for opaque tokens; it signs JWTs with
real RSA and EC keys (PyJWT over ``cryptography``). It counts what it was asked, so a
test can see the verifier's key refreshes. The end-to-end tests use a certified provider
(``oidc-provider``: tests/interop/test_oauth_interop.py); this one stays for what no real
provider produces (a JWKS that is not JSON, a forged signature under a published kid, HS256,
a token without ``aud``), for counting the key reads, and for the tests that run without Node.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fusion_nb.mcp.uvicorn_server import in_loop_server, listening_socket


class SigningKey:
    """A private key, its ``kid``, its JWT algorithm and its public JWK."""

    def __init__(self, algorithm: str = "RS256", kid: str | None = None) -> None:
        self.algorithm = algorithm
        self.kid = kid or secrets.token_hex(4)
        if algorithm.startswith("ES"):
            self.private: Any = ec.generate_private_key(ec.SECP256R1())
            jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.jwk = {**jwk, "kid": self.kid, "use": "sig", "alg": algorithm}


class Issuer:
    """The authorization server's state; ``url`` once serving."""

    def __init__(self, *, oidc_only: bool = False) -> None:
        self.url = ""
        self.keys = [SigningKey()]
        self.oidc_only = oidc_only
        self.jwks_body: bytes | None = None  # set: served instead of the keys (a broken JWKS)
        self.opaque: dict[str, dict[str, Any]] = {}
        self.asked: Counter[str] = Counter()
        self.introspector = ("fusion-nb", "introspection-secret")

    def token(self, *, key: SigningKey | None = None, headers: dict[str, Any] | None = None, **claims: Any) -> str:
        """A JWT signed by ``key`` (the current key): ``claims`` over sensible defaults (``None`` drops one)."""
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": self.url, "sub": "alice", "client_id": "agent", "iat": now, "exp": now + 300, **claims}
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, key.private, algorithm=key.algorithm, headers={"kid": key.kid, **(headers or {})})

    def opaque_token(self, **answer: Any) -> str:
        """An opaque token the introspection endpoint answers ``answer`` for (active by default)."""
        token = secrets.token_urlsafe(32)
        now = int(time.time())
        self.opaque[token] = {"active": True, "iss": self.url, "sub": "alice", "client_id": "agent", "exp": now + 300}
        self.opaque[token].update(answer)
        return token

    def rotate(self, algorithm: str = "RS256") -> SigningKey:
        """Publish a new key only (the old one is withdrawn); returns it."""
        self.keys = [SigningKey(algorithm)]
        return self.keys[0]

    def app(self) -> Starlette:
        async def metadata(request: Request) -> Response:
            self.asked["metadata"] += 1
            if self.oidc_only and "openid" not in request.url.path:
                return Response(status_code=404)
            return JSONResponse(
                {
                    "issuer": self.url,
                    "jwks_uri": f"{self.url}/jwks",
                    "introspection_endpoint": f"{self.url}/introspect",
                    "authorization_endpoint": f"{self.url}/authorize",
                    "token_endpoint": f"{self.url}/token",
                    "response_types_supported": ["code"],
                }
            )

        async def jwks(request: Request) -> Response:
            self.asked["jwks"] += 1
            if self.jwks_body is not None:
                return Response(self.jwks_body, media_type="application/json")
            return JSONResponse({"keys": [key.jwk for key in self.keys]})

        async def introspect(request: Request) -> Response:
            self.asked["introspect"] += 1
            expected = "Basic " + base64.b64encode(":".join(self.introspector).encode()).decode()
            if request.headers.get("authorization") != expected:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            form = await request.form()
            return JSONResponse(self.opaque.get(str(form.get("token")), {"active": False}))

        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", metadata),
                Route("/.well-known/openid-configuration", metadata),
                Route("/jwks", jwks),
                Route("/introspect", introspect, methods=["POST"]),
            ]
        )


@contextlib.asynccontextmanager
async def issuing(**options: Any) -> AsyncIterator[Issuer]:
    """An ``Issuer`` served on a free loopback port (asyncio) until the block ends."""
    issuer = Issuer(**options)
    sock = listening_socket()
    issuer.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = in_loop_server(issuer.app())
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        yield issuer
    finally:
        server.should_exit = True
        await task
        sock.close()


def dead_url() -> str:
    """A loopback URL nobody answers at (a port bound, then closed)."""
    sock = listening_socket()
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"
