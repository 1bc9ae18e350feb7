"""fusion-nb: host MCP tools in a Jupyter kernel.

``fnb.f`` builds tools on ``fnb.default_app``, the app the notebook extension serves.
``fnb.Fusion`` is the app: the engine's registry and runner plus its two MCP faces,
``mcp_server()`` and ``http_app()``, which import the MCP adapter only when used (the
engine itself never imports the SDK).
"""

from __future__ import annotations

import importlib.metadata as _metadata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ._checkout import map_checkout_widgets
from .engine import (
    App,
    Call,
    CallResult,
    Context,
    InputResponse,
    ProgressEvent,
    Tool,
    ToolError,
    ask,
    input_response,
    progress,
    read_input,
    read_request_state,
    require_input,
    respond,
)

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from starlette.applications import Starlette

    from .mcp import FusionServer


class Fusion(App):
    """An app: a registry of tools (``app.f``), the engine running their calls, and its MCP faces.

    ``Fusion(name, version=..., instructions=..., middleware=..., context_factory=...,
    grace=..., max_rounds=..., input_channel=...)``; see the engine for each option.
    """

    def mcp_server(
        self,
        *,
        progress_interval: float = 0.05,
        telemetry: bool = False,
        request_state_keys: Sequence[bytes | str] | None = None,
        request_state_ttl: float = 600.0,
    ) -> FusionServer:
        """The SDK's low-level ``Server`` serving this app: ``mcp.Client(server)``, stdio or HTTP.

        Same as ``fusion_nb.mcp.mcp_server(app, ...)``, which documents the options.
        """
        from .mcp import mcp_server

        return mcp_server(
            self,
            progress_interval=progress_interval,
            telemetry=telemetry,
            request_state_keys=request_state_keys,
            request_state_ttl=request_state_ttl,
        )

    def http_app(
        self,
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
        """The Streamable HTTP ASGI app serving this app (token, DNS-rebinding, size and time limits).

        Same as ``fusion_nb.mcp.http_app(app, ...)``, which documents the options.
        """
        from .mcp import http_app

        return http_app(
            self,
            host=host,
            token=token,
            tokens=tokens,
            auth=auth,
            json_response=json_response,
            stateless=stateless,
            max_body_bytes=max_body_bytes,
            body_timeout=body_timeout,
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            path=path,
            progress_interval=progress_interval,
            telemetry=telemetry,
            request_state_keys=request_state_keys,
            request_state_ttl=request_state_ttl,
            max_sessions=max_sessions,
            session_idle_timeout=session_idle_timeout,
            max_sessions_per_owner=max_sessions_per_owner,
            max_listens_per_owner=max_listens_per_owner,
            answer_timeout=answer_timeout,
            worker_name=worker_name,
        )


# Run from a source checkout (e.g. a notebook at the repository root), ``fusion_nb.widgets``
# is the checkout's top-level ``widgets/`` folder, as pyproject maps it for an installed copy.
map_checkout_widgets(Path(__file__).resolve().parent)

default_app = Fusion("fusion-nb")
f = default_app.f

__version__ = _metadata.version("fusion-nb")

__all__ = [
    "Call",
    "CallResult",
    "Context",
    "Fusion",
    "InputResponse",
    "ProgressEvent",
    "Tool",
    "ToolError",
    "ask",
    "default_app",
    "f",
    "input_response",
    "progress",
    "read_input",
    "read_request_state",
    "require_input",
    "respond",
]


def load_ipython_extension(shell: InteractiveShell) -> None:
    """``%load_ext fusion_nb``: the cell magics, ``%fusion`` and interrupt wiring (see ``fusion_nb.notebook``)."""
    from .notebook import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell: InteractiveShell) -> None:
    """``%unload_ext fusion_nb``: undo what loading did."""
    from .notebook import unload_ipython_extension as unload

    unload(shell)
