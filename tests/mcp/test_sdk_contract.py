"""One test per place fusion-nb leans on ``mcp`` internals (``fusion_nb/mcp/_sdk.py``) or on a
specific SDK behaviour; each fails with a sentence naming what changed in the SDK.

Plus a guard that nothing outside ``_sdk.py`` reaches into SDK privates, so a new
touch point cannot slip in without its contract test.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from eras import client_for
from mcp import Client
from mcp.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from fusion_nb.mcp._sdk import (
    SDK_SERIES,
    accepted_media,
    connection_of,
    direct_progress_requested,
    error_data_of,
    handshake_pending,
    on_connection_close,
)

pytestmark = pytest.mark.anyio

REPO = Path(__file__).parent.parent.parent


def probe_server(on_call) -> Server:
    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name="probe", input_schema={"type": "object"})])

    async def call_tool(ctx, params):
        await on_call(ctx)
        return types.CallToolResult(content=[types.TextContent(text="ok")])

    return Server("contract", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_handshake_connection_reports_its_close():
    closed = anyio.Event()
    hooked: list[bool] = []

    async def on_call(ctx):
        hooked.append(on_connection_close(ctx.session, closed.set))

    async with Client(probe_server(on_call), mode="legacy") as client:
        await client.call_tool("probe", {})
        assert not closed.is_set()
    assert hooked == [True], (
        f"{SDK_SERIES} contract broken: ServerSession no longer has `_connection.exit_stack`, so closed 2025 "
        "connections stay in the tools/list_changed set until a send fails (update _sdk.on_connection_close)."
    )
    with anyio.fail_after(5):
        await closed.wait()


async def test_every_message_of_one_connection_names_the_same_connection():
    seen: list[object] = []

    async def on_call(ctx):
        seen.append((connection_of(ctx.session), ctx.session))

    async with Client(probe_server(on_call), mode="legacy") as client:
        await client.call_tool("probe", {})
        await client.call_tool("probe", {})
    async with Client(probe_server(on_call), mode="legacy") as client:
        await client.call_tool("probe", {})
    (first, s1), (second, s2), (other, _) = seen
    assert s1 is not s2, "the SDK now reuses one ServerSession per connection (connection_of may become the session)"
    assert first is second and first is not other, (
        f"{SDK_SERIES} contract broken: ServerSession no longer keeps its connection as `_connection`, so a "
        "repeated notifications/initialized registers the connection again (update _sdk.connection_of)."
    )


@pytest.mark.parametrize("era", ["2026-direct", "2025-memory", "2026-stream"])
async def test_the_direct_path_reveals_whether_a_progress_callback_was_given(era):
    decisions: list[bool] = []

    async def on_call(ctx):
        decisions.append(direct_progress_requested(ctx.session))

    async def on_progress(value, total, message):
        pass

    async with client_for(probe_server(on_call), era) as client:
        await client.call_tool("probe", {})
        await client.call_tool("probe", {}, progress_callback=on_progress)
    expected = [False, True] if era == "2026-direct" else [False, False]
    assert decisions == expected, (
        f"{SDK_SERIES} contract broken on {era}: the request's dispatch context no longer exposes "
        "`transport.kind` / `_on_progress` as before, so fusion-nb cannot tell whether an in-process 2026 caller "
        "asked for progress (update _sdk.direct_progress_requested)."
    )


async def test_the_request_state_boundary_refuses_with_its_documented_shape():
    """``FusionRequestStateBoundary`` recognises the boundary's refusal by this exact error."""
    boundary = RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience="contract")
    refusals: list[MCPError] = []

    async def on_call(ctx):
        pass

    server = probe_server(on_call)

    async def record(ctx, call_next):
        try:
            return await call_next(ctx)
        except MCPError as exc:
            refusals.append(exc)
            raise

    server.middleware = [record, boundary]
    async with Client(server) as client:
        with pytest.raises(MCPError):
            await client.session.call_tool("probe", {}, request_state="v1.forged", allow_input_required=True)
    (refusal,) = refusals
    assert (refusal.code, refusal.data) == (types.INVALID_PARAMS, {"reason": "invalid_request_state"}), (
        f"{SDK_SERIES} contract broken: RequestStateBoundary now refuses a forged state with "
        f"{refusal.code} {refusal.data!r}, so fusion-nb's one-sentence INVALID_INPUT no longer replaces it "
        "(update elicitation.FusionRequestStateBoundary)."
    )


def test_the_kernels_error_mapping_keeps_protocol_codes_and_hides_the_rest():
    """``exchange.ResponseOutlet.run`` answers a handler's exception with ``error_data_of`` (the SDK's mapping)."""
    protocol = error_data_of(MCPError(code=types.INVALID_PARAMS, message="bad arguments"))
    hidden = error_data_of(ValueError("disk on fire"))
    assert (protocol.code, protocol.message) == (types.INVALID_PARAMS, "bad arguments"), (
        f"{SDK_SERIES} contract broken: runner.modern_error_data no longer passes an MCPError's code and message "
        f"through (got {protocol!r}); update _sdk.error_data_of."
    )
    assert hidden.code == types.INTERNAL_ERROR and "disk on fire" not in hidden.message, (
        f"{SDK_SERIES} contract broken: runner.modern_error_data now shows an unexpected exception's text "
        f"({hidden!r}), or maps it to another code; update _sdk.error_data_of."
    )


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json, text/event-stream", (True, True)),
        ("application/json", (True, False)),
        ("text/event-stream", (False, True)),
        ("text/event-stream;q=0.9", (False, True)),
        ("*/*", (True, True)),
        ("application/*, text/*", (True, True)),
        ("text/plain", (False, False)),
        ("", (False, False)),
    ],
)
def test_the_transports_accept_reading_is_the_one_the_endpoint_refuses_by(accept, expected):
    """``streamable`` answers 406 exactly when ``accepted_media`` (the SDK transport's reading) says so."""
    from starlette.requests import Request

    request = Request({"type": "http", "method": "POST", "headers": [(b"accept", accept.encode())], "path": "/"})
    assert accepted_media(request) == expected, (
        f"{SDK_SERIES} contract broken: streamable_http.check_accept_headers reads Accept {accept!r} as "
        f"{accepted_media(request)!r}, not {expected!r}; update _sdk.accepted_media."
    )


PRIVATE_ATTRIBUTES = {"_connection", "_request_outbound", "_inner", "_on_progress", "_unseal", "_seal_result"}


def _sources() -> list[tuple[str, str]]:
    """Every piece of Python the project ships or runs: the package (the engine never imports
    the SDK, and its own privates share some of these names), tests, benchmarks, scripts and
    the teaching notebooks' code cells."""
    paths = [path for path in (REPO / "fusion_nb").rglob("*.py") if "engine" not in path.parts]
    for folder in ("widgets", "tests", "benchmarks", "scripts"):
        paths += [path for path in (REPO / folder).rglob("*.py") if "node_modules" not in path.parts]
    sources = [(str(path.relative_to(REPO)), path.read_text()) for path in paths if path.name != "_sdk.py"]
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        for number, cell in enumerate(cells, 1):
            if cell["cell_type"] == "code":
                code = "".join(cell["source"])
                lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
                sources.append((f"{notebook.relative_to(REPO)} cell {number}", "\n".join(lines)))
    return sources


@pytest.mark.parametrize("era", ["2026-direct", "2025-memory", "2026-stream"])
async def test_a_connection_past_its_handshake_says_so(era):
    pending: list[bool] = []

    async def on_call(ctx):
        pending.append(handshake_pending(ctx.session))

    async with client_for(probe_server(on_call), era) as client:
        await client.call_tool("probe", {})
    assert pending == [False], (
        f"{SDK_SERIES} contract broken on {era}: ServerSession no longer exposes "
        "`_connection.initialize_accepted`, so every list page takes the SDK's slow path "
        "(update _sdk.handshake_pending)."
    )


def test_no_sdk_private_is_reached_outside_the_compat_module():
    offenders = []
    for where, code in _sources():
        if where.endswith(Path(__file__).name):
            continue
        try:
            tree = ast.parse(code)
        except SyntaxError:  # a %%fusion_tool cell body (top-level return/await): not plain Python
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("mcp", "mcp_types"):
                names = [*node.module.split("."), *(alias.name for alias in node.names)]
                if any(part.startswith("_") and not part.startswith("__") for part in names):
                    offenders.append(f"{where}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
                offenders.append(f"{where}:{node.lineno} reads .{node.attr}")
            elif isinstance(node, ast.Constant) and node.value in PRIVATE_ATTRIBUTES:
                offenders.append(f"{where}:{node.lineno} names {node.value!r}")
    assert offenders == [], "SDK privates outside fusion_nb/mcp/_sdk.py: " + "; ".join(offenders)


async def test_a_middleware_answer_to_tools_call_and_a_tasks_handler_reach_the_client_unsieved():
    """Tasks (``fusion_nb/mcp/tasks.py``) rest on two seams: a server middleware may answer ``tools/call``
    with a ``CreateTaskResult`` (not a ``CallToolResult``), and ``add_request_handler`` serves ``tasks/*``."""
    from raw_peer import raw_peer

    async def answer_with_a_task(ctx, call_next):
        if ctx.method == "tools/call":
            return {"task": {"taskId": "t1", "status": "working"}}
        return await call_next(ctx)

    async def get_task(ctx, params):
        return {"taskId": "t1", "status": "completed"}

    server = probe_server(lambda ctx: None)
    server.middleware.append(answer_with_a_task)
    server.add_request_handler("tasks/get", types.RequestParams, get_task)
    async with raw_peer(server) as peer:
        created = await peer.request("tools/call", {"name": "probe", "arguments": {}, "task": {}})
        got = await peer.request("tasks/get", {"taskId": "t1"})
    assert created == {"task": {"taskId": "t1", "status": "working"}} and got["status"] == "completed", (
        f"{SDK_SERIES} contract broken: a middleware's tools/call answer or a tasks/* handler's result is now "
        "reshaped by the SDK, so 2025-11-25 tasks cannot be served from fusion_nb/mcp/tasks.py as they are."
    )


def test_the_names_resources_and_prompts_use_keep_their_shape():
    """fusion_nb.mcp.catalog publishes these events and sends resources/updated through the session."""
    import inspect

    from mcp.server.session import ServerSession
    from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated

    assert ResourceUpdated(uri="nb://vars/df").uri == "nb://vars/df"
    assert PromptsListChanged() == PromptsListChanged() and ResourcesListChanged() == ResourcesListChanged()
    assert list(inspect.signature(ServerSession.send_resource_updated).parameters)[:2] == ["self", "uri"]


def test_the_protected_resource_document_and_the_principal_keep_their_shape():
    from mcp.server.auth.provider import AccessToken
    from starlette.testclient import TestClient

    from fusion_nb.mcp._sdk import principal_of, protected_resource_routes

    routes, url = protected_resource_routes("https://nb.example.com/mcp", "https://as.example.com", ["a"], "nb")
    from starlette.applications import Starlette

    with TestClient(Starlette(routes=routes)) as http:
        documents = [
            http.get(path).json()
            for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource")
        ]
    assert url == "https://nb.example.com/.well-known/oauth-protected-resource/mcp", (
        f"{SDK_SERIES} contract broken: build_resource_metadata_url changed its RFC 9728 URL (update _sdk)."
    )
    for document in documents:
        assert document["resource"] == "https://nb.example.com/mcp" and document["scopes_supported"] == ["a"], (
            f"{SDK_SERIES} contract broken: create_protected_resource_routes serves another document (update _sdk)."
        )
    token = AccessToken(token="t", client_id="ide", scopes=[], subject="alice", claims={"iss": "https://as"})
    assert principal_of(token) == ("ide", "https://as", "alice"), (
        f"{SDK_SERIES} contract broken: principal_components no longer gives (client, issuer, subject)."
    )
