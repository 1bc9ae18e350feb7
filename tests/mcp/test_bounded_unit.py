"""``BoundedRequests`` on its own, on both backends (asyncio's timer path and the anyio path trio takes).

The loopback tests in ``test_http_bounds.py`` run it under uvicorn (asyncio only);
here fake ASGI messages drive each ending: a complete body passes through, a stalled
one gets 408, an early disconnect ends the exchange with nothing sent.
"""

from __future__ import annotations

import anyio
import pytest

from fusion_nb.mcp.bounded import BoundedRequests

pytestmark = pytest.mark.anyio

SCOPE = {"type": "http", "path": "/mcp", "method": "POST"}


async def reading_app(scope, receive, send):
    """An app that reads the whole body, then answers 200 with it."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise AssertionError("the middleware should have ended the exchange instead")
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def script(*messages, then_wait=False):
    pending = list(messages)

    async def receive():
        if pending:
            return pending.pop(0)
        if then_wait:
            await anyio.sleep_forever()
        return {"type": "http.disconnect"}

    return receive


async def run(receive, timeout=0.2):
    sent = []

    async def send(message):
        sent.append(message)

    with anyio.fail_after(10):
        await BoundedRequests(reading_app, body_timeout=timeout)(SCOPE, receive, send)
    return sent


async def test_a_complete_body_passes_through():
    sent = await run(
        script({"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"c"})
    )
    assert [m.get("status") for m in sent] == [200, None] and sent[1]["body"] == b"abc"


async def test_a_stalled_body_gets_408(caplog):
    caplog.set_level("INFO", logger="fusion_nb.http")
    sent = await run(script({"type": "http.request", "body": b"ab", "more_body": True}, then_wait=True))
    assert sent[0]["status"] == 408
    assert [r.getMessage() for r in caplog.records] == ["POST /mcp: request body not complete after 0.2s; 408"]


async def test_a_stall_is_ended_after_the_timeout_not_before():
    """The deadline is checked by a periodic sweep: never early, and at most a quarter of the timeout late."""
    timeout = 0.4
    started = anyio.current_time()
    sent = await run(script({"type": "http.request", "body": b"ab", "more_body": True}, then_wait=True), timeout)
    elapsed = anyio.current_time() - started
    assert sent[0]["status"] == 408
    assert timeout <= elapsed < timeout * 1.25 + 1.0, elapsed  # generous upper bound for a loaded machine


async def test_complete_exchanges_do_not_hold_off_a_stall_among_them():
    """Many quick exchanges on one middleware while another's body stalls: each gets its own ending."""
    middleware = BoundedRequests(reading_app, body_timeout=0.3)
    stalled: list[dict] = []

    async def stalled_send(message):
        stalled.append(message)

    async def quick(number):
        sent = []

        async def send(message):
            sent.append(message)

        await middleware(SCOPE, script({"type": "http.request", "body": str(number).encode()}), send)
        assert sent[1]["body"] == str(number).encode()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            receive = script({"type": "http.request", "body": b"a", "more_body": True}, then_wait=True)
            group.start_soon(middleware, SCOPE, receive, stalled_send)
            for number in range(200):
                await quick(number)
    assert stalled[0]["status"] == 408


async def test_an_early_disconnect_sends_nothing(caplog):
    caplog.set_level("INFO", logger="fusion_nb.http")
    sent = await run(script({"type": "http.request", "body": b"ab", "more_body": True}))
    assert sent == []
    assert [r.getMessage() for r in caplog.records] == [
        "POST /mcp: client disconnected before sending its whole request"
    ]


async def test_an_outside_cancellation_still_propagates():
    """Only the endings the middleware caused are taken back; a server shutdown cancels as before."""
    with anyio.CancelScope() as scope:
        scope.cancel()
        await run(script(then_wait=True), timeout=30)
        raise AssertionError("the cancellation was swallowed")
    assert scope.cancelled_caught
