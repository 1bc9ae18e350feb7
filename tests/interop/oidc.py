"""A certified OpenID provider (npm ``oidc-provider``, pinned in package.json) on loopback for the OAuth tests.

``OidcProvider`` runs ``oidc_provider.mjs`` (see its header for the configuration): two issuers
on free ports, ``issuer`` the one trusted and ``other`` one with the same keys at another
URL. The tests take tokens from it as a client would: ``token`` by RFC 6749 client credentials,
``person`` by the authorization code flow of a person (PKCE, the login and consent forms
answered over HTTP) through a client ``register`` made (RFC 7591), each with an RFC 8707
resource; they rotate its signing key and skew its clock through its test controls. It ends
when its stdin closes, so a killed test leaves no provider behind.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import subprocess
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).parent
INTROSPECTION = ("fusion-nb", "introspection-secret")
"""The resource server's client at the provider (it may introspect opaque tokens)."""
REDIRECT = "http://127.0.0.1:9/callback"
"""Where a registered client's person is sent back with the code (never reached: read off the redirect)."""


class OidcProvider:
    """The running provider; ``issuer`` and ``other`` are their URLs."""

    def __init__(self, node: str) -> None:
        self.process = subprocess.Popen(
            [node, str(HERE / "oidc_provider.mjs")],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # (its start-up warnings about development-only features)
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # (the script prints it once both listen)
        if not line:
            raise RuntimeError(f"oidc_provider.mjs exited {self.process.wait()} before serving")
        urls = json.loads(line)
        self.issuer: str = urls["issuer"]
        self.other: str = urls["other"]

    def token(self, resource: str, scope: str = "notes:read", client: str = "agent", issuer: str | None = None) -> str:
        """An access token for ``resource`` from the client-credentials grant (``opaque-agent``: opaque)."""
        answer = httpx.post(
            f"{issuer or self.issuer}/token",
            data={"grant_type": "client_credentials", "scope": scope, "resource": resource},
            auth=(client, f"{client}-secret"),
        )
        answer.raise_for_status()
        return str(answer.json()["access_token"])

    def register(self) -> str:
        """A new public client (dynamic registration, no initial access token); its ``client_id``."""
        metadata = {
            "client_name": "fusion-nb test client",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "native",
        }
        answer = httpx.post(f"{self.issuer}/reg", json=metadata)
        answer.raise_for_status()
        return str(answer.json()["client_id"])

    def person(self, client_id: str, resource: str, login: str, scope: str = "notes:read") -> str:
        """The access token ``login`` grants ``client_id`` for ``resource``: code flow with PKCE, forms answered."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        asked = {
            "client_id": client_id,
            "response_type": "code",
            "redirect_uri": REDIRECT,
            "scope": scope,
            "resource": resource,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": secrets.token_hex(8),
        }
        with httpx.Client(base_url=self.issuer) as browser:  # (it keeps the provider's cookies)
            page = browser.get("/auth", params=asked)
            for _ in range(20):
                if page.is_redirect:
                    where = page.headers["location"]
                    if where.startswith(REDIRECT):
                        code = httpx.URL(where).params["code"]
                        break
                    page = browser.get(where)
                    continue
                prompt = re.search(r'name="prompt" value="(\w+)"', page.text)
                action = re.search(r'<form[^>]*action="([^"]+)"', page.text)
                assert prompt and action, f"unexpected page {page.status_code}: {page.text[:300]}"
                form = {"prompt": prompt[1]} | ({"login": login, "password": "-"} if prompt[1] == "login" else {})
                page = browser.post(action[1].replace("&amp;", "&"), data=form)
            else:
                raise AssertionError("the authorization ended in no redirect with a code")
            answer = browser.post(
                "/token",
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": REDIRECT,
                    "client_id": client_id,
                    "code_verifier": verifier,
                    "resource": resource,
                },
            )
        answer.raise_for_status()
        return str(answer.json()["access_token"])

    def rotate(self) -> str:
        """Sign with a new key from now on (the old one stays published); its kid."""
        return str(self._control("/_test/rotate")["kid"])

    def skew(self, seconds: float) -> None:
        """Issue tokens as if the clock were ``seconds`` off (0 puts it right)."""
        self._control(f"/_test/clock?seconds={seconds}")

    def _control(self, path: str) -> Any:
        answer = httpx.post(self.issuer + path)
        answer.raise_for_status()
        return answer.json()

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
