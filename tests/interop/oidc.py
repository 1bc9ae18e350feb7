"""A certified OpenID provider (npm ``oidc-provider``, pinned in package.json) on loopback for the OAuth tests.

``OidcProvider`` runs ``oidc_provider.mjs`` (see its header for the configuration): two issuers
on free ports, ``issuer`` the one trusted and ``other`` one with the same keys at another
URL. The tests take tokens from it as a client would (``token``: RFC 6749 client credentials
with an RFC 8707 resource), rotate its signing key and skew its clock through its test
controls. It ends when its stdin closes, so a killed test leaves no provider behind.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).parent
INTROSPECTION = ("fusion-nb", "introspection-secret")
"""The resource server's client at the provider (it may introspect opaque tokens)."""


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
