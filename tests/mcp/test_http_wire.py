"""What a client sees on the Streamable HTTP wire, both protocol eras: characterization tests.

These pin today's answers (the ``mcp`` 2.3 SDK's own session manager behind
``http_app``) so that a replacement transport can be checked against them: the
HTTP status, the JSON-RPC ``error.code`` (with a non-empty message, never SDK
wording), the headers clients read, and the shapes of results and streams. Where
the spec lets a server pick between ``application/json`` and ``text/event-stream``
the tests accept either; where a client needs a stream (progress, a server-to-client
request) they insist on SSE. ``test_http.py`` and ``test_http_bounds.py`` cover auth,
Host/Origin, body limits and SDK-client flows; this file is the raw wire.

Raw ``httpx`` against a real loopback uvicorn (``serve()``), so asyncio only.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
import httpx
import pytest
from http_serving import INIT, JSON_HEADERS, Served, open_session, serve

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # the server under test is uvicorn

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}
ELICITING_META = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
TOKENS = {"alice": "alice-" + "a" * 32, "ci": "ci-" + "c" * 32}
WAIT = 10  # seconds: a generous bound on anything awaited, catching a hang, not a slowdown


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    """The test app on loopback; every test must leave no call running.

    A call left running fails the test, and is then cancelled: otherwise the server's
    shutdown would wait on its open request and a transport that broke cancellation
    would stall the run instead of failing it.
    """
    async with serve() as s:
        yield s
        try:
            await no_calls_left(s)
        finally:
            for call in list(s.app.active_calls):
                call.cancel()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A raw HTTP client; reads get a bound so a missing answer fails instead of hanging."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(WAIT)) as client:
        yield client


async def no_calls_left(served: Served) -> None:
    """Wait (bounded) until the app runs no call: a cancelled call leaves ``active_calls`` a moment after cleanup."""
    with anyio.fail_after(WAIT):
        while served.app.active_calls:
            await anyio.sleep(0.01)


# --- reading answers: plain JSON or SSE, whichever the server chose --------------------------------------------------


def sse_messages(body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a complete SSE body (``event: message`` / ``data: {...}`` frames)."""
    messages = []
    for frame in body.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip() for line in frame.split("\n") if line.startswith("data:")]
        events = [line[6:].strip() for line in frame.split("\n") if line.startswith("event:")]
        if data:
            assert events in ([], ["message"]), f"unexpected SSE event type in {frame!r}"
            messages.append(json.loads("\n".join(data)))
    return messages


async def stream_messages(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE response as they arrive (for streams the test must answer mid-way)."""
    assert response.headers["content-type"].startswith("text/event-stream")
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and data:
            yield json.loads("\n".join(data))
            data = []


def messages(response: httpx.Response) -> list[dict[str, Any]]:
    """Every JSON-RPC message of a finished response, accepting a JSON body or an SSE stream."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        return [response.json()]
    assert kind.startswith("text/event-stream"), f"neither JSON nor SSE: {kind!r}"
    return sse_messages(response.text)


def answer(response: httpx.Response) -> dict[str, Any]:
    """The one JSON-RPC response (result or error) in a finished response, which must come last."""
    found = messages(response)
    responses = [m for m in found if "result" in m or "error" in m]
    assert len(responses) == 1 and found[-1] is responses[0], found
    return responses[0]


def assert_error(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
    """The response is HTTP ``status`` carrying a JSON-RPC error ``code`` with some message; returns the error."""
    assert response.status_code == status, (response.status_code, response.text)
    error = answer(response)["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    return error


def progress_values(found: list[dict[str, Any]], token: str | int) -> list[float]:
    """The progress values of ``notifications/progress`` frames for ``token``, in order (others are refused)."""
    progress = [m for m in found if m.get("method") == "notifications/progress"]
    assert all(m["params"]["progressToken"] == token for m in progress)
    return [m["params"]["progress"] for m in progress]


# --- the 2025-11-25 wire: sessions -----------------------------------------------------------------------------------


def request(method: str, id: str | int = 2, **params: Any) -> dict[str, Any]:
    """A JSON-RPC request; ``params`` omitted when none are given."""
    return {"jsonrpc": "2.0", "id": id, "method": method, **({"params": params} if params else {})}


def initialize(version: str = LEGACY, **capabilities: Any) -> dict[str, Any]:
    """``INIT`` asking for ``version`` and declaring ``capabilities``."""
    params = {**cast(dict[str, Any], INIT["params"]), "protocolVersion": version, "capabilities": capabilities}
    return {**INIT, "params": params}


async def session_headers(served: Served, http: httpx.AsyncClient, **capabilities: Any) -> dict[str, str]:
    """Open a 2025-11-25 session (declaring ``capabilities``); every header a request on it carries."""
    return served.headers(**await open_session(http, served, **capabilities))


def without(headers: dict[str, str], *names: str) -> dict[str, str]:
    """``headers`` minus ``names`` (compared case-insensitively)."""
    drop = {name.lower() for name in names}
    return {key: value for key, value in headers.items() if key.lower() not in drop}


async def test_initialize_opens_a_session_and_initialized_is_accepted(served, http):
    """The handshake every 2025 client starts with: the session id header and the capabilities it reads."""
    opened = await http.post(served.url, json=INIT, headers=served.headers())
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    assert session and session.isascii() and session.isprintable()
    reply = answer(opened)
    assert reply["id"] == 1
    result = reply["result"]
    assert result["protocolVersion"] == LEGACY
    assert result["capabilities"]["tools"]["listChanged"] is True
    assert result["serverInfo"]["name"] == "mcp-http-test" and isinstance(result["serverInfo"]["version"], str)
    initialized = await http.post(
        served.url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=served.headers(**{"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}),
    )
    assert initialized.status_code == 202
    assert initialized.content == b""


async def test_initialize_negotiates_versions_the_server_knows(served, http):
    """An older version is kept (and its header then accepted); an unknown one is answered with the newest."""
    older = await http.post(
        served.url,
        json=initialize("2025-06-18"),
        headers=served.headers(),
    )
    unknown = await http.post(
        served.url,
        json=initialize("1999-01-01"),
        headers=served.headers(),
    )
    assert answer(older)["result"]["protocolVersion"] == "2025-06-18"
    assert answer(unknown)["result"]["protocolVersion"] == LEGACY
    on_older = served.headers(
        **{"Mcp-Session-Id": older.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    )
    pinged = await http.post(served.url, json=request("ping"), headers=on_older)
    assert pinged.status_code == 200 and answer(pinged) == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_a_session_request_is_answered_with_or_without_the_version_header(served, http):
    """Clients that omit ``MCP-Protocol-Version`` (older ones do) are served as the negotiated version."""
    session = await session_headers(served, http)
    listed = await http.post(served.url, json=request("tools/list"), headers=session)
    assumed = await http.post(
        served.url, json=request("tools/list", 3), headers=without(session, "MCP-Protocol-Version")
    )
    assert listed.status_code == 200 and assumed.status_code == 200
    assert listed.headers["mcp-session-id"] == session["Mcp-Session-Id"]
    tools = {tool["name"]: tool for tool in answer(listed)["result"]["tools"]}
    assert tools["echo"]["inputSchema"]["required"] == ["text"]
    assert tools["echo"]["annotations"]["readOnlyHint"] is True
    assert answer(assumed)["id"] == 3 and answer(assumed)["result"]["tools"] == answer(listed)["result"]["tools"]


async def test_an_unsupported_version_header_on_a_session_is_400(served, http):
    """Today a version header the server does not know sends the request down the 2026 path, whose envelope check
    refuses it (-32602); either way the client learns its request was not taken."""
    session = await session_headers(served, http)
    refused = await http.post(
        served.url, json=request("tools/list"), headers={**session, "MCP-Protocol-Version": "1999-01-01"}
    )
    assert_error(refused, 400, -32602)
    assert answer(refused)["id"] == 2


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_no_session_id_is_400_and_an_unknown_one_is_404(served, http, method):
    """404 is what tells a client its session is gone and it must initialize again; 400 is its own bug."""
    await session_headers(served, http)  # a live session exists; these requests simply do not name it
    accept = {"Accept": "text/event-stream"} if method == "GET" else {}
    body = {"json": request("tools/list")} if method == "POST" else {}
    base = served.headers(**{"MCP-Protocol-Version": LEGACY}, **accept)
    missing = await http.request(method, served.url, headers=base, **body)
    unknown = await http.request(method, served.url, headers={**base, "Mcp-Session-Id": "no-such-session"}, **body)
    assert_error(missing, 400, -32600)
    assert_error(unknown, 404, -32600)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_a_session_refuses_another_tokens_stream_and_delete(http, method):
    """``test_http`` pins POST; a GET or DELETE under another token must not reach (or end) the session either."""
    async with serve(tokens=TOKENS) as served:
        alice = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alice']}"}
        opened = await http.post(served.url, json=INIT, headers=alice)
        session = {**alice, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        accept = {"Accept": "text/event-stream"} if method == "GET" else {}
        as_ci = await http.request(
            method, served.url, headers={**session, **accept, "Authorization": f"Bearer {TOKENS['ci']}"}
        )
        still = await http.post(served.url, json=request("ping"), headers=session)
    assert_error(as_ci, 404, -32600)
    assert still.status_code == 200 and answer(still)["result"] == {}


async def test_delete_ends_the_session(served, http):
    """A client ending its session gets 200, and the id is then unknown (404), to DELETE as well."""
    session = await session_headers(served, http)
    ended = await http.delete(served.url, headers=session)
    after = await http.post(served.url, json=request("ping"), headers=session)
    again = await http.delete(served.url, headers=session)
    assert ended.status_code == 200
    assert_error(after, 404, -32600)
    assert_error(again, 404, -32600)


async def test_the_standalone_stream_carries_tool_list_changes(served, http):
    """The GET stream is the only route for spontaneous notifications; one per session, the newest.

    A second GET replaces the first, whose response ends cleanly (the SDK's transport answers it
    409 instead, so a client whose old stream is half-open is locked out: issue 23, item 4).
    """
    session = await session_headers(served, http)
    get = {**session, "Accept": "text/event-stream"}
    async with http.stream("GET", served.url, headers=get) as first:
        assert first.status_code == 200
        assert first.headers["content-type"].startswith("text/event-stream")
        async with http.stream("GET", served.url, headers=get) as stream:
            assert stream.status_code == 200 and stream.headers["mcp-session-id"] == session["Mcp-Session-Id"]
            with anyio.fail_after(WAIT):
                assert [message async for message in stream_messages(first)] == []  # ended, without an error

            async def late(input, ctx):
                return "late"

            served.app.f.action("late").describe("Added after the stream opened.").handle(late)
            with anyio.fail_after(WAIT):
                async for message in stream_messages(stream):
                    if message.get("method") == "notifications/tools/list_changed":
                        break
    assert "id" not in message
    listed = await http.post(served.url, json=request("tools/list"), headers=session)
    assert "late" in {tool["name"] for tool in answer(listed)["result"]["tools"]}


async def test_a_replaced_stream_hands_its_unsent_messages_to_the_new_one(served, http):
    """What was queued for the old stream and not yet sent goes out on the replacing one; the old one is ended."""
    session = await session_headers(served, http)
    live = served.asgi.endpoint.sessions.get(session["Mcp-Session-Id"])
    old_end, new_end = anyio.CancelScope(), anyio.CancelScope()
    with live.standalone_stream(old_end):
        await live.notify("notifications/tools/list_changed", None)  # queued: no response loop reads it here
        with live.standalone_stream(new_end) as reader:
            assert old_end.cancel_called and not new_end.cancel_called
            assert json.loads(reader.receive_nowait())["method"] == "notifications/tools/list_changed"
            assert live.has_standalone_stream
        assert live.has_standalone_stream is False


async def test_get_without_sse_in_accept_is_406(served, http):
    """The standalone stream is SSE only; a client that cannot read SSE is told so."""
    session = await session_headers(served, http)
    refused = await http.get(served.url, headers={**session, "Accept": "application/json"})
    assert_error(refused, 406, -32600)


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_a_post_must_accept_both_json_and_sse(served, http, era, accept):
    """406 on both eras; the 2025 answer carries a JSON-RPC error, the 2026 one (today) an empty body."""
    if era == LEGACY:
        headers = {**await session_headers(served, http), "Accept": accept}
        refused = await http.post(served.url, json=request("ping"), headers=headers)
        assert_error(refused, 406, -32600)
    else:
        headers = modern_headers(served, "tools/list", Accept=accept)
        refused = await http.post(served.url, json=modern_request("tools/list"), headers=headers)
        assert refused.status_code == 406


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_a_body_that_is_not_json_content_is_refused(served, http, era):
    """Content-Type not JSON is 400 today (not 415), before any JSON-RPC: a plain-text body; unparsable JSON -32700."""
    headers = await session_headers(served, http) if era == LEGACY else modern_headers(served, "tools/list")
    wrong_type = await http.post(
        served.url, content=json.dumps(request("ping")), headers={**headers, "Content-Type": "text/plain"}
    )
    unparsable = await http.post(served.url, content=b"{not json", headers=headers)
    assert wrong_type.status_code == 400
    assert_error(unparsable, 400, -32700)
    assert answer(unparsable)["id"] is None


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/json", 200),
        ("application/json; charset=utf-8", 200),
        ("Application/JSON ; charset=UTF-8", 200),  # a media type is case-insensitive (RFC 9110)
        ("application/json-rpc", 415),  # passes the SDK's prefix check; its transport answers 415 (issue 23)
        ("application/jsonx", 415),
        ("application/json, text/plain", 415),  # one media type per Content-Type
    ],
)
async def test_a_2025_post_needs_application_json_with_any_parameters(served, http, content_type, status):
    """What the spec allows is served; another JSON-looking type gets the SDK transport's 415 with a JSON-RPC error."""
    headers = {**await session_headers(served, http), "Content-Type": content_type}
    response = await http.post(served.url, content=json.dumps(request("ping")), headers=headers)
    if status == 200:
        assert response.status_code == 200 and answer(response)["result"] == {}
    else:
        assert_error(response, 415, -32600)


@pytest.mark.parametrize(
    ("era", "code"),
    [(LEGACY, -32602), (MODERN, -32600)],  # 2025: the SDK reports a failed message validation as invalid params
)
async def test_a_body_that_is_not_one_jsonrpc_message_is_400(served, http, era, code):
    """Batches are not accepted and a stranger object is not a message; the id stays null (nothing to echo)."""
    headers = await session_headers(served, http) if era == LEGACY else modern_headers(served, "tools/list")
    batch = await http.post(served.url, json=[request("tools/list")], headers=headers)
    stranger = await http.post(served.url, json={"hello": "world"}, headers=headers)
    for refused in (batch, stranger):
        assert_error(refused, 400, code)
        assert answer(refused)["id"] is None


async def test_client_responses_and_notifications_are_accepted_with_202(served, http):
    """Anything without an id to answer gets 202 and no body, even responses nobody asked for."""
    session = await session_headers(served, http)
    posted = [
        {"jsonrpc": "2.0", "id": 999, "result": {}},
        {"jsonrpc": "2.0", "id": 998, "error": {"code": -1, "message": "no"}},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}},
    ]
    for message in posted:
        accepted = await http.post(served.url, json=message, headers=session)
        assert accepted.status_code == 202, message
        assert accepted.content == b""
    pinged = await http.post(served.url, json=request("ping"), headers=session)
    assert answer(pinged)["result"] == {}


async def test_ping_answers_an_empty_result_and_ids_come_back_verbatim(served, http):
    """Clients match answers by id: a string stays a string (even '77'), an int an int, 0 included."""
    session = await session_headers(served, http)
    for id in ("p-1", 77, 0, "77"):
        pinged = await http.post(served.url, json=request("ping", id), headers=session)
        assert pinged.status_code == 200
        assert answer(pinged) == {"jsonrpc": "2.0", "id": id, "result": {}}
        assert type(answer(pinged)["id"]) is type(id)


async def test_a_call_with_a_progress_token_streams_progress_then_its_result(served, http):
    """Progress needs SSE; values only grow, the last one precedes the result; no token, no progress."""
    session = await session_headers(served, http)
    call = request("tools/call", "call-1", name="noisy", arguments={}, _meta={"progressToken": "tok"})
    streamed = await http.post(served.url, json=call, headers=session)
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    found = sse_messages(streamed.text)
    values = progress_values(found, "tok")
    assert values and values[-1] == 100
    assert all(a < b for a, b in itertools.pairwise(values))
    assert found[-1] == {
        "jsonrpc": "2.0",
        "id": "call-1",
        "result": {"content": [{"type": "text", "text": "done"}], "isError": False},
    }
    assert found[-2]["method"] == "notifications/progress"
    plain = await http.post(served.url, json=request("tools/call", 4, name="noisy", arguments={}), headers=session)
    assert progress_values(messages(plain), "none") == []
    assert answer(plain)["result"]["content"][0]["text"] == "done"


@pytest.mark.parametrize(("action", "expected"), [("accept", "refunded inv-9"), ("decline", "refund declined")])
async def test_a_tool_elicits_on_the_calls_stream_and_the_answer_is_posted_back(served, http, action, expected):
    """Live 2025 elicitation: the request rides the call's stream, the answer is a separate POST (202)."""
    session = await session_headers(served, http, elicitation={"form": {}})
    call = request("tools/call", 5, name="billing.refund", arguments={"id": "inv-9"})
    seen: list[dict[str, Any]] = []
    async with http.stream("POST", served.url, json=call, headers=session) as stream:
        assert stream.status_code == 200
        with anyio.fail_after(WAIT):
            async for message in stream_messages(stream):
                seen.append(message)
                if message.get("method") == "elicitation/create":
                    reply = {"action": action, **({"content": {"confirm": True}} if action == "accept" else {})}
                    posted = await http.post(
                        served.url, json={"jsonrpc": "2.0", "id": message["id"], "result": reply}, headers=session
                    )
                    assert posted.status_code == 202 and posted.content == b""
    asked = [m for m in seen if m.get("method") == "elicitation/create"]
    assert len(asked) == 1
    assert isinstance(asked[0]["id"], (int, str))
    assert asked[0]["params"]["message"] == "Refund invoice inv-9?"
    assert asked[0]["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    assert seen[-1]["id"] == 5
    assert seen[-1]["result"]["content"][0]["text"] == expected
    assert seen[-1]["result"]["isError"] is False


async def test_cancelled_notification_stops_the_call_and_the_session_keeps_serving(served, http):
    """``notifications/cancelled`` runs the handler's cleanup, ends the call's response and nothing else.

    The call's POST runs in its own task: a server may hold a quiet call's response
    headers until the call ends, so nothing here waits for them before cancelling.
    """
    session = await session_headers(served, http)
    ended: list[httpx.Response] = []

    async def call_stall() -> None:
        ended.append(await http.post(served.url, json=request("tools/call", 7, name="stall"), headers=session))

    async with anyio.create_task_group() as group:  # the POST is bounded by the client's read timeout
        group.start_soon(call_stall)
        with anyio.fail_after(WAIT):
            await served.probe["entered"].wait()
        assert [call.tool.name for call in served.app.active_calls] == ["stall"]
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "user"}}
        cancelled = await http.post(served.url, json=cancel, headers=session)
        assert cancelled.status_code == 202
        with anyio.fail_after(WAIT):
            await served.probe["cleaned"].wait()
    (response,) = ended
    assert response.status_code == 200
    # No result; the SDK transport still answers -32800 on the stream (the spec says SHOULD NOT respond).
    found = messages(response)
    assert all("result" not in message for message in found)
    assert all(message["error"]["code"] == -32800 for message in found if message.get("id") == 7)
    await no_calls_left(served)
    after = await http.post(
        served.url, json=request("tools/call", 8, name="echo", arguments={"text": "on"}), headers=session
    )
    assert answer(after)["result"]["structuredContent"] == {"result": "on"}


# --- the 2026-07-28 wire: one stateless POST per request -------------------------------------------------------------


def modern_headers(served: Served, method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    """The headers of a 2026 request: version, ``Mcp-Method`` and, for ``tools/call``, ``Mcp-Name``."""
    routing = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method, **({"Mcp-Name": name} if name else {})}
    return served.headers(**{**routing, **extra})


def modern_request(method: str, id: str | int = 1, meta: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    """A 2026 request whose ``params._meta`` carries the envelope (``meta`` replaces it)."""
    return request(method, id, **params, _meta=MODERN_META if meta is None else meta)


def modern_call(tool: str, arguments: dict[str, Any], id: str | int = 1, **meta: Any) -> dict[str, Any]:
    """A 2026 ``tools/call`` request; ``meta`` adds ``_meta`` keys (``progressToken``...)."""
    return modern_request("tools/call", id, {**MODERN_META, **meta}, name=tool, arguments=arguments)


async def test_modern_list_and_call_answer_complete_results_with_server_info(served, http):
    """The 2026 shapes a client reads: ``resultType`` and serverInfo in ``_meta``; no session id."""
    listed = await http.post(
        served.url, json=modern_request("tools/list", "l-1"), headers=modern_headers(served, "tools/list")
    )
    called = await http.post(
        served.url, json=modern_call("echo", {"text": "hi"}, 2), headers=modern_headers(served, "tools/call", "echo")
    )
    for response in (listed, called):
        assert response.status_code == 200
        assert "mcp-session-id" not in response.headers
    listing = answer(listed)
    assert listing["id"] == "l-1" and listing["result"]["resultType"] == "complete"
    assert "echo" in {tool["name"] for tool in listing["result"]["tools"]}
    result = answer(called)
    assert result["id"] == 2
    assert result["result"]["resultType"] == "complete"
    assert result["result"]["isError"] is False
    assert result["result"]["structuredContent"] == {"result": "hi"}
    assert result["result"]["_meta"][SERVER_INFO]["name"] == "mcp-http-test"


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"Mcp-Method": "tools/list"}, id="method-differs"),
        pytest.param({"Mcp-Name": "boom"}, id="name-differs"),
        pytest.param({"Mcp-Method": None}, id="method-missing"),
        pytest.param({"Mcp-Name": None}, id="name-missing"),
        pytest.param({"MCP-Protocol-Version": "2027-01-01"}, id="version-differs-from-envelope"),
    ],
)
async def test_modern_headers_must_match_the_body(served, http, headers):
    """Routing headers that disagree with the body (or are absent) are refused before anything runs."""
    sent = modern_headers(served, "tools/call", "echo")
    sent = {**without(sent, *headers), **{k: v for k, v in headers.items() if v is not None}}
    refused = await http.post(served.url, json=modern_call("echo", {"text": "hi"}, 3), headers=sent)
    assert_error(refused, 400, -32020)
    assert answer(refused)["id"] == 3
    assert served.app.active_calls == []


def routed_tool(served: Served) -> None:
    """A tool whose ``region`` is mirrored into ``Mcp-Param-Region`` (SEP-2243, ``header=``)."""

    @served.app.f.query("routed").with_string("region", header="Region").with_string("query", default="").handle
    async def routed(input: Any, ctx: Any) -> str:
        return f"routed to {input.region}"


@pytest.mark.parametrize(
    ("region", "header"),
    [
        pytest.param("eu-west", "eu-west", id="plain"),
        pytest.param("Hello", "=?base64?SGVsbG8=?=", id="base64"),
        pytest.param("  Zürich ", "=?base64?ICBaw7xyaWNoIA==?=", id="base64-non-ascii"),
        pytest.param("=?base64?SGVsbG8=", "=?base64?SGVsbG8=", id="literal-without-suffix"),
    ],
)
async def test_a_mirrored_parameter_matching_its_header_is_served(served, http, region, header):
    routed_tool(served)
    sent = modern_headers(served, "tools/call", "routed", **{"Mcp-Param-Region": header})
    called = await http.post(served.url, json=modern_call("routed", {"region": region}), headers=sent)
    assert called.status_code == 200, called.text
    assert answer(called)["result"]["content"][0]["text"] == f"routed to {region}"


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("us-east", id="mismatch"),
        pytest.param(None, id="missing"),
        pytest.param("=?base64?SGVsbG8?=", id="bad-padding"),
        pytest.param("=?base64?SGVs!!!bG8=?=", id="bad-chars"),
    ],
)
async def test_a_mirrored_parameter_disagreeing_with_its_header_is_refused(served, http, header):
    """Mismatched, absent or malformed ``Mcp-Param-*``: 400 with -32020, the handler never runs."""
    routed_tool(served)
    extra = {"Mcp-Param-Region": header} if header is not None else {}
    sent = modern_headers(served, "tools/call", "routed", **extra)
    refused = await http.post(served.url, json=modern_call("routed", {"region": "Hello"}), headers=sent)
    error = assert_error(refused, 400, -32020)
    assert "Mcp-Param-Region" in error["message"] and len(error["message"]) < 200
    assert served.app.active_calls == []


@pytest.mark.parametrize("second", ["tools/call", "tools/list"])
async def test_a_duplicated_mcp_method_header_is_refused(served, http, second):
    """Two ``Mcp-Method`` headers are ambiguous to any intermediary, so refused even when they agree."""
    sent = [*modern_headers(served, "tools/call", "echo").items(), ("Mcp-Method", second)]
    refused = await http.post(served.url, json=modern_call("echo", {"text": "hi"}), headers=sent)
    assert_error(refused, 400, -32020)


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param(None, id="no-meta"),
        pytest.param({"io.modelcontextprotocol/protocolVersion": MODERN}, id="no-capabilities"),
        pytest.param({"io.modelcontextprotocol/clientCapabilities": {}}, id="no-version"),
    ],
)
async def test_a_modern_request_without_its_envelope_is_400_invalid_params(served, http, meta):
    """The 2026 ``_meta`` envelope (version and client capabilities) is required on every request."""
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
    if meta is not None:
        params["_meta"] = meta
    refused = await http.post(
        served.url, json=request("tools/call", 4, **params), headers=modern_headers(served, "tools/call", "echo")
    )
    assert_error(refused, 400, -32602)
    assert answer(refused)["id"] == 4


async def test_malformed_params_are_refused_in_one_sentence_naming_the_field_on_both_eras(served, http):
    """-32602 says which field, what was expected and what came (the SDK alone says "Invalid request parameters")."""
    session = await session_headers(served, http)
    legacy = await http.post(served.url, json=request("tools/list", 7, cursor=7), headers=session)
    modern = await http.post(
        served.url,
        json=modern_request("tools/call", 8, name="echo", arguments=[1]),
        headers=modern_headers(served, "tools/call", "echo"),
    )
    assert assert_error(legacy, 200, -32602)["message"] == (
        'Invalid params for tools/list: field "params.cursor" expected a string, got 7 (int).'
    )
    assert assert_error(modern, 400, -32602)["message"] == (
        'Invalid params for tools/call: field "params.arguments" expected an object, got [1] (list).'
    )


async def test_an_unsupported_modern_version_is_32022_naming_the_supported_ones(served, http):
    """-32022 with ``data.supported`` lets a client pick a version; a header/envelope mismatch is -32020."""
    meta = {**MODERN_META, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}
    sent = modern_headers(served, "tools/list", **{"MCP-Protocol-Version": "1999-01-01"})
    refused = await http.post(served.url, json=modern_request("tools/list", 5, meta), headers=sent)
    mismatched = await http.post(
        served.url, json=modern_request("tools/list", 6, meta), headers=modern_headers(served, "tools/list")
    )
    error = assert_error(refused, 400, -32022)
    assert MODERN in error["data"]["supported"] and error["data"]["requested"] == "1999-01-01"
    assert_error(mismatched, 400, -32020)


@pytest.mark.parametrize("method", ["ping", "no/such-method"])
async def test_a_method_the_modern_wire_lacks_is_404_method_not_found(served, http, method):
    """2026 has no ``ping``; unknown methods are HTTP 404 with -32601 (not 200 as on 2025 streams)."""
    refused = await http.post(served.url, json=modern_request(method, "m"), headers=modern_headers(served, method))
    assert_error(refused, 404, -32601)
    assert answer(refused)["id"] == "m"


async def test_modern_unknown_tool_and_invalid_arguments_are_tool_errors(served, http):
    """Tool-level mistakes are results with ``isError`` (the model reads them), in fusion's own sentence."""
    unknown = await http.post(
        served.url, json=modern_call("nope", {}, 7), headers=modern_headers(served, "tools/call", "nope")
    )
    invalid = await http.post(
        served.url, json=modern_call("echo", {"text": 5}, 8), headers=modern_headers(served, "tools/call", "echo")
    )
    for response in (unknown, invalid):
        assert response.status_code == 200
        assert answer(response)["result"]["isError"] is True
        assert answer(response)["result"]["resultType"] == "complete"
    assert answer(unknown)["result"]["content"][0]["text"].startswith('[UNKNOWN_TOOL] There is no tool named "nope"')
    assert answer(invalid)["result"]["content"][0]["text"].startswith(
        '[INVALID_INPUT] Invalid input for tool "echo": field "text" expected a string, got 5 (int).'
    )


async def test_modern_ids_come_back_verbatim(served, http):
    """Ids are echoed with their JSON type on the 2026 wire too."""
    for id in ("call-x", 41, 0):
        called = await http.post(
            served.url,
            json=modern_call("echo", {"text": "id"}, id),
            headers=modern_headers(served, "tools/call", "echo"),
        )
        assert answer(called)["id"] == id and type(answer(called)["id"]) is type(id)


async def test_modern_notifications_are_202_and_get_and_delete_are_405(served, http):
    """2026 is POST only: no standalone stream, no session to delete, no server request to answer."""
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    accepted = await http.post(served.url, json=note, headers=modern_headers(served, "notifications/cancelled"))
    got = await http.get(served.url, headers={**modern_headers(served, "tools/list"), "Accept": "text/event-stream"})
    deleted = await http.delete(served.url, headers=modern_headers(served, "tools/list"))
    response = {"jsonrpc": "2.0", "id": 5, "result": {}}
    stray = await http.post(served.url, json=response, headers=modern_headers(served, "tools/list"))
    assert accepted.status_code == 202 and accepted.content == b""
    for refused in (got, deleted):
        assert refused.status_code == 405
        assert refused.headers["allow"] == "POST"
    assert_error(stray, 400, -32600)  # there is no server request a 2026 client could be answering


async def test_a_modern_call_streams_progress_only_when_asked(served, http):
    """2026 progress: SSE only when a token asks for it, result last; without a token no progress frame."""
    headers = modern_headers(served, "tools/call", "noisy")
    streamed = await http.post(served.url, json=modern_call("noisy", {}, 9, progressToken="tok"), headers=headers)
    plain = await http.post(served.url, json=modern_call("noisy", {}, 10), headers=headers)
    assert streamed.status_code == 200 and plain.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    found = sse_messages(streamed.text)
    values = progress_values(found, "tok")
    assert values and values[-1] == 100
    assert all(a < b for a, b in itertools.pairwise(values))
    assert found[-2]["method"] == "notifications/progress"
    assert found[-1]["id"] == 9 and found[-1]["result"]["content"][0]["text"] == "done"
    assert found[-1]["result"]["resultType"] == "complete"
    assert [m for m in messages(plain) if "method" in m] == []
    assert answer(plain)["result"]["content"][0]["text"] == "done"


@pytest.mark.parametrize("token", [None, "tok"], ids=["json-pending", "sse-streaming"])
async def test_a_modern_client_hanging_up_cancels_its_call(served, http, token):
    """On 2026 closing the connection is the cancel, whether or not the response had started."""
    meta = {"progressToken": token} if token else {}
    body = modern_call("stall", {}, 11, **meta)

    async def call_and_hang_up_midway() -> None:
        async with http.stream(
            "POST", served.url, json=body, headers=modern_headers(served, "tools/call", "stall")
        ) as r:
            await r.aread()  # never completes: the scope below cancels it, closing the connection

    async with anyio.create_task_group() as group:
        group.start_soon(call_and_hang_up_midway)
        with anyio.fail_after(WAIT):
            await served.probe["entered"].wait()
        assert [call.tool.name for call in served.app.active_calls] == ["stall"]
        group.cancel_scope.cancel()
    with anyio.fail_after(5):
        await served.probe["cleaned"].wait()
    await no_calls_left(served)
    after = await http.post(
        served.url, json=modern_call("echo", {"text": "on"}), headers=modern_headers(served, "tools/call", "echo")
    )
    assert answer(after)["result"]["structuredContent"] == {"result": "on"}


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"action": "accept", "content": {"confirm": True}}, "refunded inv-1"),
        ({"action": "decline"}, "refund declined"),
    ],
)
async def test_a_modern_input_round_is_answered_by_reposting_with_the_sealed_state(served, http, response, expected):
    """2026 input: ``input_required`` with opaque sealed state; the re-POST with answers finishes the call."""
    headers = modern_headers(served, "tools/call", "billing.refund")
    first_body = modern_request("tools/call", 12, ELICITING_META, name="billing.refund", arguments={"id": "inv-1"})
    first = await http.post(served.url, json=first_body, headers=headers)
    assert first.status_code == 200
    asked = answer(first)["result"]
    assert asked["resultType"] == "input_required"
    assert asked["inputRequests"]["confirm"]["method"] == "elicitation/create"
    assert asked["inputRequests"]["confirm"]["params"]["message"] == "Refund invoice inv-1?"
    state = asked["requestState"]
    assert isinstance(state, str) and state and "invoice" not in state  # sealed, not the tool's plaintext
    second_body = modern_request(
        "tools/call",
        13,
        ELICITING_META,
        name="billing.refund",
        arguments={"id": "inv-1"},
        inputResponses={"confirm": response},
        requestState=state,
    )
    second = await http.post(served.url, json=second_body, headers=headers)
    final = answer(second)
    assert final["id"] == 13
    assert final["result"]["resultType"] == "complete"
    assert final["result"]["content"][0]["text"] == expected


@pytest.mark.parametrize(
    ("tool", "elicitation", "asked_mode"),
    [
        pytest.param("connect", {"form": {}}, None, id="url-tool-form-client"),
        pytest.param("connect", {}, None, id="url-tool-bare-client-means-form"),
        pytest.param("billing.refund", {"url": {}}, None, id="form-tool-url-client"),
        pytest.param("connect", {"url": {}}, "url", id="url-tool-url-client"),
        pytest.param("billing.refund", {}, "form", id="form-tool-bare-client"),
        pytest.param("billing.refund", {"form": {}, "url": {}}, "form", id="form-tool-both"),
    ],
)
async def test_a_modern_input_request_is_only_in_a_mode_the_client_declared(
    served, http, tool, elicitation, asked_mode
):
    """The spec: servers MUST NOT send elicitation in a mode the client did not declare; a bare ``{}`` is form.

    Without a fitting mode the call fails at once (issue 23: a form-only client was sent a URL-mode
    input request): ``-32021`` with HTTP 400, naming the mode it needs (SEP-2575).
    """
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": elicitation}}
    arguments = {"id": "inv-1"} if tool == "billing.refund" else {}
    body = modern_request("tools/call", 1, meta, name=tool, arguments=arguments)
    response = await http.post(served.url, json=body, headers=modern_headers(served, "tools/call", tool))
    if asked_mode is None:
        error = answer(response)["error"]
        needed = "url" if tool == "connect" else "form"
        assert response.status_code == 400 and error["code"] == -32021, error
        assert error["data"] == {"requiredCapabilities": {"elicitation": {needed: {}}}}
        assert error["message"].startswith(f'Tool "{tool}" needs input')
    else:
        result = answer(response)["result"]
        assert result["resultType"] == "input_required", result
        (asked,) = result["inputRequests"].values()
        assert asked["params"].get("mode", "form") == asked_mode
