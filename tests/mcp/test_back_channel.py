"""The 2025-11-25 back channel (server-to-client requests and their answers), the same on both transports.

Each test runs over stdio (one ``PipeConnection`` on real OS pipes, in process) and
over Streamable HTTP (loopback uvicorn, raw ``httpx``): the server asks
``elicitation/create`` while a call runs, and the peer answers as a careless client
might. asyncio only (uvicorn); the pipe's own tests (``test_stdio_pipe``) run on trio.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from http_serving import open_session, serve
from stdio_serving import INITIALIZE
from test_http_wire import stream_messages
from test_stdio_pipe import call, serving

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

TRANSPORTS = ["stdio", "http"]
WAIT = 10  # seconds: a bound catching a hang, not a slowdown
ANSWER_TIMEOUT = 8.0  # a question left unanswered fails the call within the test's bound


class Asking:
    """A 2025 client that declared elicitation, one call at a time: the server's question, then the call's answer."""

    def __init__(self) -> None:
        self.incoming: Any = None  # the call's messages (questions, then its response), in order

    async def start(self, request_id: int, name: str, arguments: dict[str, Any]) -> None:
        raise NotImplementedError

    async def answer(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    async def next(self) -> dict[str, Any]:
        with anyio.fail_after(WAIT):
            return await self.incoming()


@contextlib.asynccontextmanager
async def asking(transport: str, app: Any) -> AsyncIterator[Asking]:
    """A peer on ``transport`` whose session declared form elicitation (questions wait ``ANSWER_TIMEOUT``)."""
    peer = Asking()
    if transport == "stdio":
        async with serving(app, answer_timeout=ANSWER_TIMEOUT) as (pipe, _):
            handshake = json.loads(json.dumps(INITIALIZE))
            handshake["params"]["capabilities"] = {"elicitation": {"form": {}}}
            await pipe.send(handshake)
            assert (await pipe.receive())["id"] == 1
            await pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

            async def start(request_id: int, name: str, arguments: dict[str, Any]) -> None:
                await pipe.send(call(request_id, name, arguments))

            peer.start = start  # type: ignore[method-assign]
            peer.answer = pipe.send  # type: ignore[method-assign]
            peer.incoming = pipe.receive
            yield peer
        return
    async with (
        serve(app, answer_timeout=ANSWER_TIMEOUT) as served,
        httpx.AsyncClient(timeout=httpx.Timeout(WAIT)) as http,
        anyio.create_task_group() as group,
    ):
        headers = served.headers(**await open_session(http, served, elicitation={"form": {}}))
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](16)

        async def post(request: dict[str, Any]) -> None:
            async with http.stream("POST", served.url, json=request, headers=headers) as response:
                if response.headers["content-type"].startswith("application/json"):
                    await send.send(json.loads(await response.aread()))
                    return
                async for message in stream_messages(response):
                    await send.send(message)

        async def start(request_id: int, name: str, arguments: dict[str, Any]) -> None:
            group.start_soon(post, call(request_id, name, arguments))

        async def answer(message: dict[str, Any]) -> None:
            await http.post(served.url, json=message, headers=headers)

        peer.start = start  # type: ignore[method-assign]
        peer.answer = answer  # type: ignore[method-assign]
        peer.incoming = receive.receive
        with send, receive:
            yield peer


@pytest.fixture
def decimal_question_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP questions get random string ids; here they are decimal strings, so their other JSON type exists."""
    numbers, random = iter(range(70, 10_000)), secrets.token_urlsafe
    monkeypatch.setattr(secrets, "token_urlsafe", lambda size=None: str(next(numbers)) if size == 12 else random(size))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_answer_naming_its_question_in_the_other_json_type_is_matched(
    transport, app_probe, decimal_question_ids
):
    """``7`` and ``"7"`` are one id for an answer on both transports (HTTP looked up strings only, stdio coerced)."""
    app, _ = app_probe
    async with asking(transport, app) as peer:
        await peer.start(2, "billing.refund", {"id": "inv-7"})
        question = await peer.next()
        assert question["method"] == "elicitation/create"
        asked = question["id"]
        other = str(asked) if isinstance(asked, int) else int(asked)
        await peer.answer({"jsonrpc": "2.0", "id": other, "result": {"action": "accept", "content": {"confirm": True}}})
        done = await peer.next()
        assert done["id"] == 2
        assert done["result"]["content"][0]["text"] == "refunded inv-7", done


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"result": None}, "its result is null, not an object"),
        ({"result": ["accept"]}, "its result is a JSON list, not an object"),
        ({"result": "accept"}, "its result is a JSON str, not an object"),
        ({"error": "denied"}, "the client sent a malformed error"),
        ({"result": {"action": "bogus"}}, 'answer is malformed: field "action" expected'),
    ],
)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_malformed_answer_ends_the_call_asking_in_one_sentence(transport, app_probe, answer, said):
    """An answer of any shape settles its question: the call fails with ELICITATION_FAILED, never waits for ever.

    Over HTTP a malformed answer's POST is refused (400, as the SDK's transport does)
    and, before, left the call asking until ``answer_timeout``.
    """
    app, _ = app_probe
    async with asking(transport, app) as peer:
        await peer.start(2, "billing.refund", {"id": "inv-7"})
        question = await peer.next()
        await peer.answer({"jsonrpc": "2.0", "id": question["id"], **answer})
        done = await peer.next()
        assert done["id"] == 2
        text = done["result"]["content"][0]["text"]
        assert text.startswith('[ELICITATION_FAILED] Tool "billing.refund" asked for input and the client'), text
        assert said in text and "Traceback" not in text and len(text) < 1200
