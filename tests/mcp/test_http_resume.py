"""Resumable 2025 streams (``fusion_nb.mcp.resume``): event ids, ``Last-Event-ID`` replay, bounded logs.

A raw HTTP client reads part of a call's event stream, drops it, and reconnects with
``GET`` + ``Last-Event-ID`` the way the TypeScript SDK does; it must get exactly the
events it missed, then the rest, the result last, nothing twice.
"""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from http_serving import open_session, serve

from fusion_nb import Fusion, progress, respond
from fusion_nb.mcp.resume import EventLog, EventLogs

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn


STEPS = 6


def gated_app() -> tuple[Fusion, dict[str, anyio.Event]]:
    """A tool that reports ``STEPS`` progress steps, pausing after the second until ``go`` is set.

    fusion-nb's progress pump coalesces steps a slow stream has not taken yet, so a
    client sees an increasing subset ending with the last; what the server sent is
    numbered by the event ids, and a resumed client must see each of those once.
    """
    gates = {"two": anyio.Event(), "go": anyio.Event()}
    app = Fusion("resume-test")

    @app.f.action("steps").describe("Six progress steps, paused after the second.").handle
    async def steps(input, ctx):
        for step in range(1, STEPS + 1):
            yield progress(step * 10, f"step {step}")
            if step == 2:
                gates["two"].set()
                await gates["go"].wait()
            await anyio.lowlevel.checkpoint()
        yield respond("all steps")

    return app, gates


def frames(text: str) -> list[tuple[str | None, dict]]:
    """The (id, message) pairs of SSE text (keepalive comments skipped)."""
    found = []
    for frame in text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.split("\n") if line and not line.startswith(":"))
        if "data" in fields:
            found.append((fields.get("id"), json.loads(fields["data"])))
    return found


async def read_until_two(response: httpx.Response) -> list[tuple[str | None, dict]]:
    """Read ``response``'s events until step 2's progress (then stop reading; earlier steps may be coalesced)."""
    seen: list[tuple[str | None, dict]] = []
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk.replace("\r\n", "\n")
        complete, _, buffer = buffer.rpartition("\n\n") if "\n\n" in buffer else ("", "", buffer)
        seen += frames(complete)
        if any(message.get("params", {}).get("progress") == 20 for _, message in seen):
            return seen
    raise AssertionError(f"the stream ended before two progress steps: {seen}")


CALL = {
    "jsonrpc": "2.0",
    "id": "long",
    "method": "tools/call",
    "params": {"name": "steps", "arguments": {}, "_meta": {"progressToken": "p"}},
}


@pytest.mark.parametrize("reconnect", ["after the call ended", "while the call runs"])
async def test_a_dropped_stream_resumes_with_exactly_the_missed_events_and_the_result(reconnect):
    app, gates = gated_app()
    async with serve(app) as served, httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, served)
        live = served.asgi.endpoint.sessions.get(session["Mcp-Session-Id"])
        async with http.stream("POST", served.url, json=CALL, headers=served.headers(**session)) as first:
            assert first.headers["content-type"].startswith("text/event-stream")
            before = await read_until_two(first)
        # the client dropped its stream; the 2025 call runs on
        assert all(event_id for event_id, _ in before), before
        last_id = before[-1][0]
        if reconnect == "after the call ended":
            gates["go"].set()
            with anyio.fail_after(10):
                while live.calls:
                    await anyio.sleep(0.01)
        headers = {**served.headers(**session), "Accept": "text/event-stream", "Last-Event-ID": last_id}
        async with http.stream("GET", served.url, headers=headers) as resumed:
            assert resumed.status_code == 200
            assert resumed.headers["mcp-session-id"] == session["Mcp-Session-Id"]
            gates["go"].set()
            after = frames((await resumed.aread()).decode())
    ids = [event_id for event_id, _ in before + after]
    assert len(ids) == len(set(ids)), "an event was sent twice"
    steps = [message["params"]["progress"] for _, message in before + after if "method" in message]
    assert steps == sorted(set(steps)) and steps[-1] == STEPS * 10, steps  # the pump may coalesce, never reorder
    assert after[-1][1]["id"] == "long" and "result" in after[-1][1], "the result is the resumed stream's last event"
    assert [int(event_id.rsplit("-", 1)[1]) for event_id in ids] == list(range(1, len(ids) + 1))


async def test_an_unknown_or_another_sessions_event_id_is_refused_in_one_sentence():
    app, gates = gated_app()
    gates["go"].set()
    async with serve(app) as served, httpx.AsyncClient(timeout=10) as http:
        mine = await open_session(http, served)
        theirs = await open_session(http, served)
        streamed = await http.post(served.url, json=CALL, headers=served.headers(**theirs))
        their_id = frames(streamed.text)[0][0]
        assert their_id
        for wrong in (their_id, "0123456789abcdef-1", "not an id", "x" * 5000):
            headers = {**served.headers(**mine), "Accept": "text/event-stream", "Last-Event-ID": wrong}
            refused = await http.get(served.url, headers=headers)
            assert refused.status_code == 400, wrong
            message = refused.json()["error"]["message"]
            assert message.startswith("Bad Request: Last-Event-ID ") and "names no event" in message
            assert len(message) < 200 and message.count(".") <= 4


async def test_a_resumed_get_stream_gets_the_server_messages_it_missed():
    app, _ = gated_app()
    async with serve(app) as served, httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, served)
        live = served.asgi.endpoint.sessions.get(session["Mcp-Session-Id"])
        get_headers = {**served.headers(**session), "Accept": "text/event-stream"}
        async with http.stream("GET", served.url, headers=get_headers) as stream:
            with anyio.fail_after(10):
                while not live.has_standalone_stream:
                    await anyio.sleep(0.01)
            for _ in range(3):
                await live.notify("notifications/tools/list_changed", None)
            buffer = ""
            async for chunk in stream.aiter_text():
                buffer += chunk
                if len(frames(buffer)) == 3:
                    break
            first = frames(buffer)
        async with http.stream("GET", served.url, headers={**get_headers, "Last-Event-ID": first[0][0]}) as again:
            buffer = ""
            async for chunk in again.aiter_text():
                buffer += chunk
                if len(frames(buffer)) == 2:
                    break
            assert [event_id for event_id, _ in frames(buffer)] == [event_id for event_id, _ in first[1:]]


def test_a_log_is_bounded_in_events_and_bytes_and_an_evicted_id_replays_nothing():
    log = EventLog("0123456789abcdef", max_events=4, max_bytes=10_000)
    for number in range(1, 11):
        log.append(b'{"n":%d}' % number)
    assert len(log) == 4 and log.after(6) is not None and len(log.after(6) or []) == 4
    assert log.after(5) is None, "events 6.. are gone: no gapless replay, so none (as the SDK's store answers)"
    assert log.after(10) == [] and log.issued(10) and not log.issued(11)
    big = EventLog("0123456789abcdef", max_events=100, max_bytes=400)
    for _ in range(10):
        big.append(b"x" * 100)
    assert big.size <= 400 and len(big) == 2
    huge = EventLog("0123456789abcdef", max_bytes=10)
    huge.append(b"y" * 1000)
    assert len(huge) == 1, "the latest event is kept however large: the result must reach a resuming client"


async def test_ended_logs_are_freed_after_their_retention_and_beyond_a_count():
    logs = EventLogs(retention=0.05, max_ended=2)
    first = logs.open()
    first.append(b"{}")
    first.end()
    assert logs.find(f"{first.key}-1") is not None
    await anyio.sleep(0.06)
    assert logs.find(f"{first.key}-1") is None and len(logs) == 0
    kept = EventLogs(retention=60, max_ended=2)
    ended = [kept.open() for _ in range(3)]
    for log in ended:
        log.end()
    running = kept.open()
    assert len(kept) == 3 and kept.find(f"{ended[0].key}-0") is None
    assert kept.find(f"{running.key}-0") is not None


async def test_a_follower_gets_each_new_event_and_stops_at_the_end():
    log = EventLog("0123456789abcdef")
    log.append(b"1")
    got: list[bytes] = []

    async def follow() -> None:
        async for frame in log.follow(0, quiet=60):
            got.append(frame)

    async with anyio.create_task_group() as group:
        group.start_soon(follow)
        await anyio.wait_all_tasks_blocked()
        log.append(b"2")
        await anyio.wait_all_tasks_blocked()
        log.end()
    assert [frame.split(b"data: ")[1].strip() for frame in got] == [b"1", b"2"]
    assert got[0].startswith(b"id: 0123456789abcdef-1\r\nevent: message\r\n")
