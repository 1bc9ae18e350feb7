"""Helpers shared by the interop tests: where the Node clients live, and the server env they pass on."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stdio_serving import StdioCommand

HERE = Path(__file__).parent


def server_env(command: StdioCommand) -> dict[str, str]:
    """What a Node client passes to the stdio server process it spawns."""
    return {**os.environ, "FUSION_NB_SERVER_ENV": json.dumps(command.env)}
