"""OAuth resource-server mode: the JWT/introspection verifier on real keys, and ``http_app(oauth=...)``.

The issuer is ``tests/oauth_issuer.py`` on loopback (real RSA/EC keys, real HTTP); asyncio
only: it and the served app run on uvicorn. It makes what a real provider never issues (a forged
signature, HS256, no ``aud``, a broken JWKS) and counts key reads; the same refusals from a
certified provider's own tokens, and the whole flow, are tests/interop/test_oauth_interop.py.
"""

from __future__ import annotations

import json

import httpx
import pytest
from http_serving import INIT, JSON_HEADERS, serve
from oauth_issuer import SigningKey, dead_url, issuing

from fusion_nb import Fusion
from fusion_nb.mcp.jwt_verifier import JwtVerifier
from fusion_nb.mcp.oauth import IssuerUnavailable, TokenRefused
from fusion_nb.mcp.options import OAuthSettings

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

RESOURCE = "https://nb.example.com/mcp"


def verifier_for(issuer, **options) -> JwtVerifier:
    client = {"client_id": issuer.introspector[0], "client_secret": issuer.introspector[1]}
    return JwtVerifier(OAuthSettings(issuer_url=issuer.url, **{**client, **options}), RESOURCE)


async def refusal(verifier: JwtVerifier, token: str) -> str:
    with pytest.raises(TokenRefused) as refused:
        await verifier.verify(token)
    return str(refused.value)


async def test_a_jwt_from_the_issuer_is_its_subject_through_its_client():
    async with issuing() as issuer:
        verifier = verifier_for(issuer)
        token = await verifier.verify(issuer.token(aud=RESOURCE, scope="notes:read reports:write"))
        await verifier.aclose()
    assert (token.client_id, token.subject, token.resource) == ("agent", "alice", RESOURCE)
    assert token.scopes == ["notes:read", "reports:write"]
    assert token.claims is not None and token.claims["iss"] == issuer.url


async def test_each_forged_or_malformed_jwt_is_one_clear_refusal():
    """What no real provider issues (expired, early, foreign-audience, foreign-issuer, ``none`` and
    unknown opaque tokens from a real one: tests/interop/test_oauth_interop.py)."""
    async with issuing() as issuer:
        verifier = verifier_for(issuer)
        stranger = SigningKey(kid=issuer.keys[0].kid)  # same kid, another key: a forged signature
        cases = {
            "the token has no 'aud' claim": issuer.token(),
            "the token's signature does not verify": issuer.token(aud=RESOURCE, key=stranger),
            "tokens signed with 'HS256' are not accepted": _hs256(issuer),
            "the token is 1000000 bytes long, more than the 16384 accepted": "x" * 1_000_000,
        }
        answers = {expected: await refusal(verifier, token) for expected, token in cases.items()}
        await verifier.aclose()
    for expected, answer in answers.items():
        assert answer.startswith(expected), (expected, answer)
        assert "\n" not in answer


def _hs256(issuer) -> str:
    import jwt

    return jwt.encode({"iss": issuer.url, "aud": RESOURCE, "exp": 4e9}, "a-guessed-secret-of-32-bytes-long!", "HS256")


async def test_a_rotated_key_is_fetched_once_and_unknown_keys_are_rate_limited():
    async with issuing() as issuer:
        slow = verifier_for(issuer, key_refresh_interval=3600)
        await slow.verify(issuer.token(aud=RESOURCE))
        fast = verifier_for(issuer, key_refresh_interval=0.001)
        await fast.verify(issuer.token(aud=RESOURCE))
        assert issuer.asked["jwks"] == 2
        issuer.rotate("ES256")
        # an unknown kid re-reads the keys, unless they were read within the interval
        assert (await fast.verify(issuer.token(aud=RESOURCE))).subject == "alice"
        with pytest.raises(TokenRefused, match="is not one the issuer publishes"):
            await slow.verify(issuer.token(aud=RESOURCE))
        assert issuer.asked["jwks"] == 3
        for _ in range(5):  # forged kids cannot make the server hammer its issuer
            with pytest.raises(TokenRefused, match="is not one the issuer publishes"):
                await slow.verify(issuer.token(aud=RESOURCE, key=SigningKey()))
        assert issuer.asked["jwks"] == 3
        await slow.aclose()
        await fast.aclose()


async def test_an_opaque_token_is_introspected_and_held_to_the_same_rules():
    async with issuing(oidc_only=True) as issuer:
        verifier = verifier_for(issuer)
        good = issuer.opaque_token(aud=RESOURCE, scope="notes:read", sub="bob", client_id="ide")
        token = await verifier.verify(good)
        assert (token.subject, token.client_id, token.scopes) == ("bob", "ide", ["notes:read"])
        other = issuer.opaque_token(aud="https://other.example.com/mcp")
        assert (await refusal(verifier, other)).startswith("the token is for another audience")
        expired = issuer.opaque_token(aud=RESOURCE, exp=1_000_000)
        assert await refusal(verifier, expired) == "the token has expired"
        anonymous = JwtVerifier(OAuthSettings(issuer_url=issuer.url), RESOURCE)
        assert (await refusal(anonymous, good)).startswith("the token is not a JWT, and this server has no")
        await verifier.aclose()
        await anonymous.aclose()


async def test_an_issuer_that_cannot_vouch_is_one_sentence_and_asked_again_only_later():
    verifier = JwtVerifier(OAuthSettings(issuer_url=dead_url(), key_refresh_interval=3600), RESOURCE)
    with pytest.raises(IssuerUnavailable, match=r"^the authorization server http://127\.0\.0\.1:\d+ does not answer"):
        await verifier.verify(foreign_jwt())
    with pytest.raises(IssuerUnavailable, match="does not answer"):  # (answered from memory: no new wait)
        await verifier.verify(foreign_jwt())
    async with issuing() as issuer:
        issuer.jwks_body = b"<html>not json</html>"
        broken = verifier_for(issuer)
        with pytest.raises(IssuerUnavailable, match=r"^its JWKS at http://\S+/jwks is not JSON$"):
            await broken.verify(issuer.token(aud=RESOURCE))
        await broken.aclose()


def foreign_jwt() -> str:
    """A well-formed RS256 JWT signed by a key no issuer publishes."""
    import jwt

    key = SigningKey()
    return jwt.encode({"sub": "x"}, key.private, algorithm="RS256", headers={"kid": key.kid})


# -- http_app(oauth=...) -------------------------------------------------------------------------


def oauth_app() -> Fusion:
    app = Fusion("oauth-test")

    @app.f.query("whoami").handle
    async def whoami(input, ctx):
        return {"ok": True}

    @app.f.mutation("report").scopes("reports:write").handle
    async def report(input, ctx):
        return {"written": True}

    return app


async def test_the_server_publishes_its_metadata_and_challenges_with_it():
    async with issuing() as issuer:
        settings = OAuthSettings(issuer_url=issuer.url, required_scopes=["notes:read"])
        async with (
            serve(oauth_app(), oauth=settings, public_url="https://nb.example.com") as served,
            httpx.AsyncClient() as http,
        ):
            documents = [
                (await http.get(served.base + path))
                for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp")
            ]
            missing = await http.post(served.url, json=INIT, headers=JSON_HEADERS)
            malformed = await http.post(served.url, json=INIT, headers={**JSON_HEADERS, "Authorization": "Bearer"})
            expired = await http.post(
                served.url,
                json=INIT,
                headers={
                    **JSON_HEADERS,
                    "Authorization": "Bearer " + issuer.token(aud="https://nb.example.com/mcp", exp=1_000_000),
                },
            )
    for document in documents:
        assert document.status_code == 200
        body = document.json()
        assert body["resource"] == "https://nb.example.com/mcp"
        assert body["authorization_servers"] == [issuer.url + "/"] or body["authorization_servers"] == [issuer.url]
        assert set(body["scopes_supported"]) == {"notes:read", "reports:write"}
    metadata = 'resource_metadata="https://nb.example.com/.well-known/oauth-protected-resource/mcp"'
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == (
        f'Bearer error_description="Authentication required", {metadata}, scope="notes:read"'
    )
    assert malformed.status_code == 401 and "is not 'Bearer <token>'" in malformed.headers["www-authenticate"]
    assert expired.status_code == 401
    assert expired.headers["www-authenticate"].startswith(
        'Bearer error="invalid_token", error_description="the token has expired"'
    )


async def test_calls_need_the_tools_scope_and_subjects_are_kept_apart():
    async with issuing() as issuer:
        settings = OAuthSettings(issuer_url=issuer.url)
        async with serve(oauth_app(), oauth=settings, public_url="https://nb.example.com") as served:
            audience = "https://nb.example.com/mcp"
            reader = issuer.token(aud=audience, scope="notes:read")
            writer = issuer.token(aud=audience, scope="notes:read reports:write", sub="bob")
            async with served.client("legacy", token=reader) as client:
                assert (await client.call_tool("whoami", {})).structured_content == {"ok": True}
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "report", "arguments": {}}}
            async with httpx.AsyncClient() as http:
                refused = await http.post(
                    served.url,
                    content=json.dumps(call),
                    headers={**JSON_HEADERS, "Authorization": f"Bearer {reader}", "MCP-Protocol-Version": "2026-07-28"},
                )
                # alice's 2025 session is hers: bob's token finds no such session
                opened = await http.post(
                    served.url, json=INIT, headers={**JSON_HEADERS, "Authorization": f"Bearer {reader}"}
                )
                session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
                stolen = await http.post(
                    served.url,
                    json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                    headers={**JSON_HEADERS, **session, "Authorization": f"Bearer {writer}"},
                )
            async with served.client(token=writer) as client:
                assert (await client.call_tool("report", {})).structured_content == {"written": True}
    assert refused.status_code == 403
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope", error_description="the tool \'report\' needs the')
    assert 'scope="reports:write"' in challenge
    assert stolen.status_code == 404


async def test_a_dead_issuer_is_a_503_and_the_server_keeps_serving():
    settings = OAuthSettings(issuer_url=dead_url())
    async with (
        serve(oauth_app(), oauth=settings, public_url="https://nb.example.com") as served,
        httpx.AsyncClient() as http,
    ):
        answers = [
            await http.post(served.url, json=INIT, headers={**JSON_HEADERS, "Authorization": f"Bearer {foreign_jwt()}"})
            for _ in range(2)
        ]
        health = await http.get(served.base + "/healthz")
    assert [answer.status_code for answer in answers] == [503, 503]
    assert (
        answers[0]
        .json()["error_description"]
        .endswith(
            "does not answer (its metadata at "
            + settings.issuer_url
            + "/.well-known/oauth-authorization-server: ConnectError)"
        )
    )
    assert health.status_code == 200


async def test_a_verified_jwt_is_remembered_until_it_expires_but_never_an_expired_one():
    """An RS256 check is a large share of a request's cost; a client repeats its token on every request."""
    async with issuing() as issuer:
        verifier = verifier_for(issuer)
        token = issuer.token(aud=RESOURCE)
        first = await verifier.verify(token)
        assert await verifier.verify(token) is first  # (answered from memory: no second verification)
        expired = issuer.token(aud=RESOURCE, exp=1_000_000)
        for _ in range(2):
            assert await refusal(verifier, expired) == "the token has expired"
        await verifier.aclose()
