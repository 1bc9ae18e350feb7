"""How tests start the stdio server: one place, so the command can later become ``fusion-nb serve``.

``StdioCommand`` is what the ``stdio_command`` fixture gives tests: the argv and
environment of a server process serving ``stdio_app:app`` (the test app plus
``linger``), as the SDK's ``StdioServerParameters`` or as raw argv for other
clients (the Node interop scripts, raw-pipe tests).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mcp import StdioServerParameters

HERE = Path(__file__).parent
REPO = HERE.parent.parent


@dataclass(frozen=True)
class StdioCommand:
    """A server process command line: ``argv`` run in ``cwd`` with ``env`` added to the environment."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = str(REPO)

    def full_env(self, **extra: str) -> dict[str, str]:
        """This process's environment plus the server's and ``extra``."""
        return {**os.environ, **self.env, **extra}

    def params(self, **extra: str) -> StdioServerParameters:
        """The SDK client's form (its default environment is minimal: ours is added explicitly)."""
        return StdioServerParameters(command=self.argv[0], args=self.argv[1:], env={**self.env, **extra}, cwd=self.cwd)


def stdio_command() -> StdioCommand:
    """The stdio server under test (today ``python -u -m fusion_nb.mcp.stdio stdio_app:app``)."""
    return StdioCommand(
        argv=[sys.executable, "-u", "-m", "fusion_nb.mcp.stdio", "stdio_app:app"],
        env={"PYTHONPATH": f"{HERE}{os.pathsep}{REPO}"},
    )
