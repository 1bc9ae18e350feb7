"""What fusion-nb's own Streamable HTTP endpoint (``StreamableEndpoint``) decides itself.

Session limits and idle ends on the 2025-11-25 wire, the per-POST choice between a
JSON answer and an event stream, and id matching between calls and the client's
answers. Real loopback HTTP (asyncio: uvicorn).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import anyio
import httpx
import pytest
from fusion_mcp_testapp import make_app
from http_serving import INIT, open_session, serve, server_errors

from fusion_nb.mcp import mcp_server, streamable
from fusion_nb.mcp.exchange_core import Move
from fusion_nb.mcp.streamable import ResponseOutlet, Session, _lookup

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

LEGACY = {"MCP-Protocol-Version": "2025-11-25"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def listing(number: int = 2) -> dict:
    return {"jsonrpc": "2.0", "id": number, "method": "tools/list"}


async def test_sessions_beyond_the_limit_get_503_until_one_ends():
    async with serve(max_sessions=2) as served, httpx.AsyncClient() as http:
        first = await open_session(http, served)
        await open_session(http, served)
        refused = await http.post(served.url, json=INIT, headers=served.headers())
        assert refused.status_code == 503 and refused.headers["retry-after"] == "10"
        assert refused.json()["error"]["message"] == "Too many open sessions (2); retry later."
        assert "mcp-session-id" not in refused.headers
        ended = await http.delete(served.url, headers=served.headers(**first))
        assert ended.status_code == 200
        gone = await http.post(served.url, json=listing(), headers=served.headers(**first))
        assert gone.status_code == 404
        third = await open_session(http, served)
        assert (await http.post(served.url, json=listing(), headers=served.headers(**third))).status_code == 200


async def test_an_idle_session_ends_but_one_with_a_call_in_flight_does_not():
    async with serve(session_idle_timeout=0.2) as served, httpx.AsyncClient(timeout=30) as http:
        idle = await open_session(http, served)
        busy = await open_session(http, served)
        stall = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "stall", "arguments": {}}}
        async with anyio.create_task_group() as group:

            async def call_stall() -> None:
                async with http.stream("POST", served.url, json=stall, headers=served.headers(**busy)) as response:
                    assert response.status_code == 200
                    body = await response.aread()
                assert b'"id":5,"error":{"code":-32800,"message":"Request cancelled"}' in body  # the 2025 answer

            group.start_soon(call_stall)
            await served.probe["entered"].wait()
            sessions = served.asgi.endpoint.sessions  # (a request would make the session busy again)
            with anyio.fail_after(10):  # the sweep runs every idle_timeout / 4
                while sessions.get(idle["Mcp-Session-Id"]) is not None:
                    await anyio.sleep(0.05)
            gone = await http.post(served.url, json=listing(), headers=served.headers(**idle))
            assert gone.status_code == 404
            await anyio.sleep(0.6)  # three idle timeouts with the stall call in flight
            alive = await http.post(served.url, json=listing(3), headers=served.headers(**busy))
            assert alive.status_code == 200
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
            assert (await http.post(served.url, json=cancel, headers=served.headers(**busy))).status_code == 202
        with anyio.fail_after(10):
            await served.probe["cleaned"].wait()
    assert served.app.active_calls == []


async def test_a_call_that_emits_nothing_is_answered_in_json_and_one_with_progress_streams():
    async with serve() as served, httpx.AsyncClient() as http:
        session = await open_session(http, served)
        params = {"name": "echo", "arguments": {"text": "x"}}
        echo = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        plain = await http.post(served.url, json=echo, headers=served.headers(**session))
        assert plain.headers["content-type"] == "application/json"
        assert plain.headers["mcp-session-id"] == session["Mcp-Session-Id"]
        assert plain.json()["id"] == 7 and plain.json()["result"]["structuredContent"] == {"result": "x"}
        flood = {
            "jsonrpc": "2.0",
            "id": "f",
            "method": "tools/call",
            "params": {"name": "noisy", "arguments": {}, "_meta": {"progressToken": "t"}},
        }
        streamed = await http.post(served.url, json=flood, headers=served.headers(**session))
        assert streamed.headers["content-type"] == "text/event-stream"
        assert streamed.text.count("notifications/progress") >= 1
        assert '"id":"f"' in streamed.text.rsplit("event: message", 1)[1]  # the answer is the last event
        modern = {**echo, "params": {**echo["params"], "_meta": MODERN_META}}
        routing = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
        headers = served.headers(**routing)
        answered = await http.post(served.url, json=modern, headers=headers)
        assert answered.headers["content-type"] == "application/json"
        assert answered.json()["result"]["resultType"] == "complete"
        assert "mcp-session-id" not in answered.headers


def test_call_and_answer_ids_match_whether_echoed_as_numbers_or_strings():
    table = {7: "seven", "x": "ex", "12": "twelve"}
    assert _lookup(table, 7) == "seven"
    assert _lookup(table, "7") == "seven"
    assert _lookup(table, 12) == "twelve"
    assert _lookup(table, "x") == "ex"
    assert _lookup(table, "y") is None
    assert _lookup(table, None) is None


async def test_a_2025_call_runs_on_after_its_client_disconnects():
    """MCP 2025-11-25: a disconnect is not a cancellation (the client sends notifications/cancelled for that)."""
    async with serve() as served, httpx.AsyncClient() as http:
        session = await open_session(http, served)
        waiting = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "cleaned", "arguments": {}}}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: http.post(served.url, json=waiting, headers=served.headers(**session)))
            with anyio.fail_after(10):
                while not served.app.active_calls:
                    await anyio.sleep(0.01)
            (call,) = served.app.active_calls
            group.cancel_scope.cancel()  # the client gives up: its connection closes
        await anyio.sleep(0.2)  # time for a (wrong) cancellation to land
        assert not call.settled
        served.probe["cleaned"].set()
        with anyio.fail_after(10):
            result = await call.wait()
        assert not result.is_error and result.value == "cleaned"
        assert (await http.post(served.url, json=listing(), headers=served.headers(**session))).status_code == 200
    assert served.app.active_calls == []


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_silent_call_streams_keepalives_until_its_answer(monkeypatch, era):
    """A proxy's idle-read timeout must not cut a long quiet call: it gets comment lines, then its answer."""
    monkeypatch.setattr(streamable, "KEEPALIVE_SECONDS", 0.05)
    async with serve() as served, httpx.AsyncClient(timeout=30) as http:
        params = {"name": "cleaned", "arguments": {}}
        if era == "2025-11-25":
            headers = served.headers(**await open_session(http, served))
        else:
            params["_meta"] = MODERN_META
            headers = served.headers(**{"MCP-Protocol-Version": era, "Mcp-Method": "tools/call", "Mcp-Name": "cleaned"})
        call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params}
        async with http.stream("POST", served.url, json=call, headers=headers) as response:
            assert response.headers["content-type"] == "text/event-stream"
            chunks = response.aiter_text()
            seen = ""
            while seen.count(": ping") < 2:
                seen += await chunks.__anext__()
            served.probe["cleaned"].set()
            async for chunk in chunks:
                seen += chunk
        *_, answer = seen.split("event: message")
        assert '"id":4' in answer and '"text":"cleaned"' in answer
    assert served.app.active_calls == []


async def test_the_standalone_stream_sends_keepalives(monkeypatch):
    monkeypatch.setattr(streamable, "KEEPALIVE_SECONDS", 0.05)
    async with serve() as served, httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, served)
        headers = {**served.headers(**session), "Accept": "text/event-stream"}
        async with http.stream("GET", served.url, headers=headers) as stream:
            assert stream.headers["content-type"] == "text/event-stream"
            seen = ""
            async for chunk in stream.aiter_text():
                seen += chunk
                if seen.count(": ping") >= 2:
                    break
        assert (await http.delete(served.url, headers=served.headers(**session))).status_code == 200


async def test_a_stopping_server_ends_get_streams_at_once_instead_of_draining_them():
    """An idle GET stream has nothing to finish: stopping ends it cleanly first (no drain, no error).

    Without that, uvicorn waits out its drain and then cancels the stream: the client gets a
    cut chunked body and the server logs "Exception in ASGI application".
    """
    async with httpx.AsyncClient(timeout=30) as http, serve() as served:
        session = await open_session(http, served)
        headers = {**served.headers(**session), "Accept": "text/event-stream"}
        ended = anyio.Event()

        async def listen() -> None:
            async with http.stream("GET", served.url, headers=headers) as stream:
                assert stream.status_code == 200
                async for _ in stream.aiter_bytes():  # a cut body raises httpx.RemoteProtocolError here
                    pass
            ended.set()

        with server_errors() as errors:
            async with anyio.create_task_group() as group:
                group.start_soon(listen)
                with anyio.fail_after(10):
                    while not served.asgi.endpoint.sessions.get(session["Mcp-Session-Id"]).has_standalone_stream:
                        await anyio.sleep(0.01)
                await served.stop()
                with anyio.fail_after(10):
                    await ended.wait()
        assert errors == []


async def test_a_failed_initialize_names_no_session_and_a_late_cancel_undoes_no_result():
    async with serve() as served, httpx.AsyncClient() as http:
        broken = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        refused = await http.post(served.url, json=broken, headers=served.headers())
        assert "error" in refused.json() and "mcp-session-id" not in refused.headers
        assert len(served.asgi.endpoint.sessions) == 0
    app, _ = make_app()
    session = Session(mcp_server(app), {}, None)
    exchange = ResponseOutlet(_no_send, _request(), 3, None, session=session, modern=False).exchange
    scope = anyio.CancelScope()
    session.calls[3] = (scope, exchange)
    exchange.state.apply(Move.SETTLE)  # its handler has returned: the answer is being written
    session.cancel({"requestId": 3})
    assert not scope.cancel_called
    exchange = ResponseOutlet(_no_send, _request(), 3, None, session=session, modern=False).exchange
    session.calls[3] = (scope, exchange)  # the same id, still running
    session.cancel({"requestId": "3"})
    assert scope.cancel_called and exchange.cancel_requested.is_set()
    await app.aclose()


async def _no_send(message) -> None:
    pass


def _request():
    from starlette.requests import Request

    return Request({"type": "http", "method": "POST", "headers": [], "path": "/mcp", "query_string": b""})


async def test_a_call_that_completes_at_once_starts_no_supervisor():
    """The fast path's promise: a quick tool's POST runs in its own task and nothing else (no task, no loop turn)."""
    tasks: list[asyncio.Task] = []
    loop = asyncio.get_running_loop()
    factory = loop.get_task_factory()

    def counting(loop, coro, **kwargs):  # every task the loop starts (named after the factory returns)
        task = factory(loop, coro, **kwargs) if factory else asyncio.Task(coro, loop=loop, **kwargs)
        tasks.append(task)
        return task

    def started() -> list[str]:
        return [task.get_name() for task in tasks if task.get_name() == "fusion-nb call supervisor"]

    loop.set_task_factory(counting)
    try:
        await _quick_calls_then_a_waiting_one(started)
    finally:
        loop.set_task_factory(factory)


async def _quick_calls_then_a_waiting_one(started: Callable[[], list[str]]) -> None:
    async with serve() as served, httpx.AsyncClient() as http:
        session = await open_session(http, served)
        params = {"name": "echo", "arguments": {"text": "x"}}
        routing = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
        for number in range(20):
            legacy = {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params}
            modern = {**legacy, "params": {**params, "_meta": MODERN_META}}
            assert (await http.post(served.url, json=legacy, headers=served.headers(**session))).status_code == 200
            assert (await http.post(served.url, json=modern, headers=served.headers(**routing))).status_code == 200
        assert started() == []
        stall = {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "stall", "arguments": {}}}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: http.post(served.url, json=stall, headers=served.headers(**session)))
            await served.probe["entered"].wait()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}
            await http.post(served.url, json=cancel, headers=served.headers(**session))
        assert started() == ["fusion-nb call supervisor"]  # a call that waits is supervised


async def test_a_repeated_initialized_adds_no_second_listener_for_its_connection():
    """20,000 repeats once grew the server by 174 MB and sent every tool change 20,000 times."""
    async with serve() as served, httpx.AsyncClient() as http:
        notifier = served.asgi.server.notifier
        session = await open_session(http, served)
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        for _ in range(50):
            assert (await http.post(served.url, json=ready, headers=served.headers(**session))).status_code == 202
        other = await open_session(http, served)
        assert len(notifier) == 2
        assert (await http.delete(served.url, headers=served.headers(**session))).status_code == 200
        assert (await http.delete(served.url, headers=served.headers(**other))).status_code == 200
        assert len(notifier) == 0


async def test_a_2025_request_with_an_object_id_is_an_invalid_request_not_a_notification():
    """2026 answers such a request 400; 2025 took it for a notification (202, never answered)."""
    async with serve() as served, httpx.AsyncClient() as http:
        session = await open_session(http, served)
        for odd in ({"a": 1}, [1], None):
            bad = {"jsonrpc": "2.0", "id": odd, "method": "tools/list"}
            refused = await http.post(served.url, json=bad, headers=served.headers(**session))
            assert refused.status_code == 400, odd
            assert refused.json()["error"] == {
                "code": -32600,
                "message": "Invalid Request: a request id must be a string or a number.",
            }


async def test_malformed_notifications_are_one_warning_per_interval(caplog):
    async with serve() as served, httpx.AsyncClient() as http:
        session = await open_session(http, served)
        bad = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"no": "id"}}}
        with caplog.at_level(logging.WARNING, logger="mcp.server.runner"):
            for _ in range(30):
                assert (await http.post(served.url, json=bad, headers=served.headers(**session))).status_code == 202
    dropped = [r for r in caplog.records if r.name == "mcp.server.runner" and "malformed" in r.getMessage()]
    assert len(dropped) == 1, [r.getMessage() for r in dropped]


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("cancelled", 'its client cancelled it ("stop").'),
        ("session ended", "its client's session ended."),
        ("disconnected", "its client disconnected."),
    ],
)
async def test_a_call_its_client_ended_says_how_in_its_sentence(how, why):
    """Issue 43: a served call's view read "cancelled before it finished", however its client ended it."""
    async with serve() as served, httpx.AsyncClient(timeout=30) as http:
        params: dict = {"name": "cleaned", "arguments": {}}
        if how == "disconnected":  # 2026: a disconnect cancels the call
            params["_meta"] = MODERN_META
            modern = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "cleaned"}
            headers = served.headers(**modern)
        else:
            session = await open_session(http, served)
            headers = served.headers(**session)
        waiting = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: http.post(served.url, json=waiting, headers=headers))
            with anyio.fail_after(10):
                while not served.app.active_calls:
                    await anyio.sleep(0.01)
            (call,) = served.app.active_calls
            if how == "cancelled":
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 9, "reason": "stop"},
                }
                await http.post(served.url, json=cancel, headers=headers)
            elif how == "session ended":
                await http.delete(served.url, headers=headers)
            group.cancel_scope.cancel()  # (disconnected: the client goes, its connection closes)
        with anyio.fail_after(10):
            result = await call.wait()
    assert result.error.message == f'The call to tool "cleaned" was cancelled before it finished: {why}'
