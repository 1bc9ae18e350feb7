"""The stdio connection (``fusion_nb.mcp.pipe``) in process, over real OS pipes, on asyncio and trio.

The subprocess tests (``test_stdio.py``, ``tests/reliability``) pin how the process
ends; these pin what one connection does with hostile or careless peers: each bad
line gets one clear error line, nothing hangs, memory stays bounded, cleanup runs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from stdio_serving import INITIALIZE

from fusion_nb import progress
from fusion_nb.mcp import mcp_server
from fusion_nb.mcp.pipe import LineReader, PipeConnection, PipeWriter, without_surrogates

pytestmark = pytest.mark.anyio


class Peer:
    """The client end: raw lines in, lines out, over the pipes the connection serves."""

    def __init__(self, to_server: int, from_server: int) -> None:
        self.to_server = to_server
        self.from_server = from_server
        os.set_blocking(from_server, False)
        self.lines = LineReader(from_server, limit=1 << 26)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.to_server, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.to_server)

    def close_input(self) -> None:
        """End the server's input (once)."""
        if self.to_server >= 0:
            os.close(self.to_server)
            self.to_server = -1

    async def send(self, message: dict[str, Any]) -> None:
        await self.write(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(10):
            line = await self.lines.next()
        assert isinstance(line, bytes), line
        return json.loads(line)

    async def handshake(self) -> None:
        await self.send(INITIALIZE)
        assert (await self.receive())["id"] == 1
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def echo(self, request_id: Any, text: str = "x") -> dict[str, Any]:
        await self.send(call(request_id, "echo", {"text": text}))
        return await self.receive()


def call(request_id: Any, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@pytest.fixture
def app(app_probe):
    app, _ = app_probe
    cleanups: list[str] = []

    @app.f.action("linger").describe("Report progress, then wait until cancelled.").handle
    async def linger(input, ctx):
        yield progress(1, "entered")
        try:
            await anyio.sleep_forever()
        finally:
            cleanups.append("linger")

    app.cleanups = cleanups
    return app


@asynccontextmanager
async def serving(app: Any, **options: Any) -> AsyncIterator[tuple[Peer, PipeConnection]]:
    """A connection serving ``app`` on two fresh pipes; the peer closes its input on exit (if it has not left)."""
    server_in, peer_out = os.pipe()
    peer_in, server_out = os.pipe()
    for fd in (server_in, server_out, peer_out):
        os.set_blocking(fd, False)
    connection = PipeConnection(mcp_server(app), server_in, server_out, **options)
    peer = Peer(peer_out, peer_in)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(connection.run)
            yield peer, connection
            peer.close_input()
            with anyio.fail_after(15):  # end of input ends the connection: nothing hangs
                await connection.finished.wait()
    finally:
        for fd in (server_in, server_out, peer.to_server, peer.from_server):
            if fd >= 0:
                os.close(fd)


async def test_garbage_lines_get_one_error_line_each_and_the_connection_serves_on(app):
    async with serving(app) as (peer, _):
        await peer.handshake()
        garbage = [
            (b"not json at all", -32700, None),
            (b"\xff\xfe", -32700, None),
            (b"[1, 2]", -32600, None),
            (b'"tools/call"', -32600, None),
            (b'{"jsonrpc": "1.0", "id": 5, "method": "tools/list"}', -32600, 5),
            (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', -32600, None),
            (b'{"jsonrpc": "2.0", "id": 6, "method": 5}', -32600, 6),
            (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": [1]}', -32600, 7),
            (b'{"jsonrpc": "2.0"}', -32600, None),
        ]
        for line, code, request_id in garbage:
            await peer.write(line + b"\n")
            reply = await peer.receive()
            assert reply["id"] == request_id and reply["error"]["code"] == code, (line, reply)
            message = reply["error"]["message"]
            assert len(message) < 200 and "Traceback" not in message, message
        await peer.write(b"\n   \n")  # blank lines are skipped silently
        assert (await peer.echo("after"))["result"]["structuredContent"] == {"result": "x"}


async def test_lines_only_the_lenient_parser_reads_are_served_as_json_loads_reads_them(app):
    """pydantic-core parses first and refuses some lines json.loads reads; those are served all the same."""
    async with serving(app) as (peer, _):
        await peer.handshake()
        deep: Any = "d"
        for _ in range(300):  # pydantic-core stops at 200 levels
            deep = [deep]
        lines = {
            "bom": b"\xef\xbb\xbf" + json.dumps(call("bom", "echo", {"text": "b"})).encode(),
            "latin-1": json.dumps(call("latin-1", "echo", {"text": "caf_"})).encode().replace(b"caf_", b"caf\xe9"),
            "deep": json.dumps({**call("deep", "echo", {"text": "d"}), "extra": deep}).encode(),
        }
        for request_id, line in lines.items():
            await peer.write(line + b"\n")
            reply = await peer.receive()
            assert reply["id"] == request_id and "result" in reply, reply
        assert reply["result"]["structuredContent"] == {"result": "d"}


async def test_escaped_surrogates_in_a_deeply_nested_line_are_read_without_recursion(app):
    """``"\\ud800"`` or an escaped emoji (what ``json.dumps`` writes) 500 levels down: answered, not a crash.

    Replacing lone surrogates walked the message recursively: a 1 KB line raised
    RecursionError out of the reader, and the server died with a traceback.
    """
    async with serving(app) as (peer, _):
        await peer.handshake()
        for request_id, text in (("lone", "\ud800"), ("pair", "\U0001f600")):
            deep: Any = text
            for _ in range(500):
                deep = [deep]
            await peer.send({**call(request_id, "echo", {"text": "d"}), "extra": deep})
            reply = await peer.receive()
            assert reply["id"] == request_id and reply["result"]["structuredContent"] == {"result": "d"}, reply
    deep = "\ud800"
    for _ in range(5000):
        deep = {"k\udc00": [deep]}
    walked = without_surrogates(deep)  # (the answers' way out takes the same walk)
    for _ in range(5000):
        assert list(walked) == ["k\ufffd"]
        walked = walked["k\ufffd"][0]
    assert walked == "\ufffd"


async def test_a_request_reusing_the_id_of_a_running_call_is_refused_and_every_call_ends(app):
    """A second request 2 while call 2 runs: one -32600 for it; the first runs on, is cancelled and cleaned up.

    It used to replace the first in the table of calls: a cancel reached only the
    second, the end of input never stopped the first, and the 4,096-call bound
    counted ids, not calls. (The SDK's dispatchers hold "2" and 2 for one id.)
    """
    async with serving(app, max_in_flight=3) as (peer, connection):
        await peer.handshake()
        await peer.send(call(2, "linger", progressToken="p"))
        assert (await peer.receive())["method"] == "notifications/progress"
        for again in (2, "2", 2, 2):  # (more than the bound: refused for its id, not as "busy")
            await peer.send(call(again, "linger", progressToken="q"))
            reply = await peer.receive()
            assert reply["id"] == again and reply["error"]["code"] == -32600, reply
            assert reply["error"]["message"] == (
                f"Invalid Request: id {json.dumps(again)} is in use by a call still running; "
                "send each request with an id of its own."
            )
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        with anyio.fail_after(10):
            while app.cleanups != ["linger"]:
                await anyio.sleep(0.01)
        await peer.send(call(2, "linger", progressToken="r"))  # a cancelled call's id may be used again
        assert (await peer.receive())["params"]["progressToken"] == "r"
        peer.close_input()
        with anyio.fail_after(10):
            await connection.finished.wait()
    assert app.cleanups == ["linger", "linger"]


async def test_a_response_is_never_answered_even_a_malformed_one(app):
    """JSON-RPC answers requests only: a response the server cannot use is dropped, not answered.

    Answering one makes two peers that each answer the other's error loop forever, and an
    answer carrying a client's id reads, to the client, as a second answer to its own request.
    """
    async with serving(app) as (peer, _):
        await peer.handshake()
        responses = [
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
            {"jsonrpc": "2.0", "id": 5, "result": None},
            {"jsonrpc": "2.0", "id": 5, "result": "ok"},
            {"jsonrpc": "2.0", "id": 5, "error": "bad"},
            {"jsonrpc": "2.0", "id": 77, "result": {}},  # (no request 77 was sent to the client)
            {"jsonrpc": "1.0", "id": [1], "error": {"code": 1, "message": "no"}},
        ]
        for response in responses:
            await peer.send(response)
        assert (await peer.echo("after"))["id"] == "after"  # the first line out is the echo's answer


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"result": None}, "its result is null, not an object"),
        ({"result": ["accept"]}, "its result is a JSON list, not an object"),
        ({"result": "accept"}, "its result is a JSON str, not an object"),
        ({"error": "denied"}, "the client sent a malformed error"),
        ({"result": {"action": "bogus"}}, 'answer is malformed: field "action" expected'),
        ({"result": {}}, 'answer is malformed: field "action" is required but was not sent'),
    ],
)
async def test_a_malformed_answer_to_the_servers_question_ends_the_call_in_one_sentence(app, answer, said):
    """The client's answer to ``elicitation/create`` settles the question whatever its shape: the call asking
    fails with ELICITATION_FAILED (the client's fault, not the tool's) instead of waiting for ever (a result
    that is no object was dropped) or ending INTERNAL_ERROR with a traceback (one its model refuses)."""
    async with serving(app) as (peer, _):
        handshake = json.loads(json.dumps(INITIALIZE))
        handshake["params"]["capabilities"] = {"elicitation": {"form": {}}}
        await peer.send(handshake)
        assert (await peer.receive())["id"] == 1
        await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await peer.send(call(2, "billing.refund", {"id": "inv-7"}))
        question = await peer.receive()
        assert question["method"] == "elicitation/create"
        await peer.send({"jsonrpc": "2.0", "id": question["id"], **answer})
        done = await peer.receive()
        assert done["id"] == 2
        text = done["result"]["content"][0]["text"]
        assert text.startswith('[ELICITATION_FAILED] Tool "billing.refund" asked for input and the client'), text
        assert said in text and "Traceback" not in text and len(text) < 1200
        assert (await peer.echo("after"))["id"] == "after"


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_an_unknown_method_of_any_length_is_named_back_in_at_most_200_characters(app, era):
    """The SDK's -32601 echoes the method it did not find; a client sending a name of 100,000 characters
    gets 200 of them back, not the whole name (at any length, the answer stays bounded)."""
    modern = era == "2026-07-28"
    meta = {
        "io.modelcontextprotocol/protocolVersion": era,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    async with serving(app) as (peer, _):
        if not modern:
            await peer.handshake()
        for method, shown in (("tools/frobnicate", "tools/frobnicate"), ("x" * 100_000, "x" * 199 + "…")):
            request: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
            if modern:
                request["params"] = {"_meta": meta}
            await peer.send(request)
            answer = await peer.receive()
            assert answer["id"] == 7 and answer["error"]["code"] == -32601, str(answer)[:300]
            assert answer["error"].get("data") == shown


async def test_an_integer_longer_than_python_reads_is_refused_in_one_sentence(app):
    async with serving(app) as (peer, _):
        await peer.handshake()
        await peer.write(
            b'{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"n": ' + b"7" * 5000 + b"}}\n"
        )
        reply = await peer.receive()
        assert reply["id"] is None and reply["error"]["code"] == -32700
        limit = sys.get_int_max_str_digits()
        assert reply["error"]["message"] == (
            f"Parse error: the line holds an integer of more than {limit} digits, longer than this server reads."
        )
        assert (await peer.echo("after"))["result"]["structuredContent"] == {"result": "x"}


async def test_malformed_params_are_refused_in_one_bounded_sentence_naming_the_field(app):
    """-32602 names the field, what was expected and what came, never the SDK's bare "Invalid request parameters"."""
    many = {f"k{index}": index for index in range(500)}  # 500 bad fields, each value sent
    async with serving(app) as (peer, _):
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})  # before the handshake
        assert (await peer.receive())["error"] == {
            "code": -32602,
            "message": "tools/list came before initialize: send initialize, then notifications/initialized.",
        }
        await peer.handshake()
        for params, message in [
            ({"name": 5}, 'field "params.name" expected a string, got 5 (int)'),
            ({}, 'field "params.name" is required but was not sent'),
            ({"name": "echo", "arguments": "x" * 100_000}, 'field "params.arguments" expected an object, got \'xxx'),
            (
                {"name": "echo", "_meta": {"progressToken": [1]}},
                'field "params._meta.progressToken" expected a string or an integer, got [1] (list)',
            ),
        ]:
            await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
            error = (await peer.receive())["error"]
            assert error["code"] == -32602 and error["message"].startswith(f"Invalid params for tools/call: {message}")
            assert len(error["message"]) < 200, error
        await peer.send(
            {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "p", "arguments": many}}
        )
        error = (await peer.receive())["error"]
        assert error["message"].startswith(
            'Invalid params for prompts/get: field "params.arguments.k0" expected a string'
        )
        assert error["message"].endswith("more fields.") and len(error["message"]) <= 1024, error
        assert (await peer.echo("after"))["result"]["structuredContent"] == {"result": "x"}


async def test_a_validation_error_not_about_the_params_keeps_the_sdks_generic_answer():
    """Only the validation of what the client sent is reworded: a handler's own model error tells a client nothing."""
    import pydantic
    from mcp.shared.exceptions import MCPError

    from fusion_nb.mcp.params_errors import ParamsInOneSentence

    class CallToolResult(pydantic.BaseModel):
        content: list[str]

    async def internal(ctx):
        CallToolResult.model_validate({"content": "secret internals"})

    async def sent(ctx):
        pydantic.TypeAdapter(int).validate_python("five")  # titled "int": not a request model

    for defect in (internal, sent):
        with pytest.raises(pydantic.ValidationError):
            await ParamsInOneSentence()(SimpleNamespace(method="tools/call"), defect)

    async def refused(ctx):
        raise MCPError(-32602, "Invalid request parameters")  # after the handshake: some handler's own refusal

    ctx = SimpleNamespace(method="tools/call", session=SimpleNamespace(client_params=object()))
    with pytest.raises(MCPError, match=r"^Invalid request parameters$"):
        await ParamsInOneSentence()(ctx, refused)


async def test_a_huge_line_is_skipped_with_one_error_line_for_its_id(app):
    async with serving(app, max_line_bytes=64 * 1024) as (peer, connection):
        await peer.handshake()
        await peer.send(call("big", "echo", {"text": "y" * 1_000_000}))
        reply = await peer.receive()
        assert reply["id"] == "big" and reply["error"]["code"] == -32600
        assert "Request too large" in reply["error"]["message"] and "65,536" in reply["error"]["message"]
        # the id at the end, as the TypeScript SDK writes it
        tail_id = {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "z" * 200_000}}}
        await peer.write(json.dumps({**tail_id, "jsonrpc": "2.0", "id": 41}).encode() + b"\n")
        assert (await peer.receive())["id"] == 41
        assert connection.reader.buffered < 64 * 1024 + 65536
        assert (await peer.echo("after"))["result"]["structuredContent"] == {"result": "x"}


async def test_end_of_input_mid_call_runs_the_cleanup_and_ends_the_connection(app):
    async with serving(app) as (peer, connection):
        await peer.handshake()
        await peer.send(call(2, "linger", progressToken="p"))
        assert (await peer.receive())["method"] == "notifications/progress"
    assert app.cleanups == ["linger"]
    assert connection.finished.is_set() and not connection.client_gone


async def test_the_task_serving_cancelled_from_outside_still_ends_every_call_before_run_returns(app):
    """Ctrl-C under ``asyncio.run`` cancels the main task, which serves the connection: the calls are ended
    (cleanup run, answered ``Connection closed``) before ``run`` returns, not left running to write later to
    descriptors the caller has taken back (``fusion-nb connect`` printed an EBADF traceback so)."""
    server_in, peer_out = os.pipe()
    peer_in, server_out = os.pipe()
    for fd in (server_in, server_out, peer_out):
        os.set_blocking(fd, False)
    connection = PipeConnection(mcp_server(app), server_in, server_out)
    peer = Peer(peer_out, peer_in)
    try:
        async with anyio.create_task_group() as group:
            outside = anyio.CancelScope()

            async def serve() -> None:
                with outside:
                    await connection.run()

            group.start_soon(serve)
            await peer.handshake()
            await peer.send(call(2, "linger", progressToken="p"))
            assert (await peer.receive())["method"] == "notifications/progress"
            outside.cancel()
            answer = await peer.receive()
        assert answer == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "Connection closed"}}
        assert app.cleanups == ["linger"] and connection.finished.is_set()
    finally:
        for fd in (server_in, server_out, peer_out, peer_in):
            os.close(fd)


async def test_a_cancel_and_an_answer_interleaved_each_settle_once(app):
    async with serving(app) as (peer, _):
        await peer.handshake()
        await peer.send(call(2, "linger", progressToken="p"))
        assert (await peer.receive())["method"] == "notifications/progress"
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        late = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
        # cancel the lingering call, pipeline a quick one, then cancel the quick one after it was sent
        await peer.write(b"".join(json.dumps(m).encode() + b"\n" for m in (cancel, call(3, "echo", {"text": "q"}))))
        await peer.send(late)
        await peer.send(call(4, "echo", {"text": "last"}))
        replies = [await peer.receive()]
        while replies[-1].get("id") != 4:
            replies.append(await peer.receive())
        with anyio.fail_after(10):
            while app.cleanups != ["linger"]:
                await anyio.sleep(0.01)
        ids = [reply["id"] for reply in replies]
        assert 2 not in ids  # a cancelled call is never answered
        assert ids[-1] == 4 and ids.count(3) <= 1  # the quick call: answered once, or (cancelled in time) never


async def test_a_peer_that_stops_reading_holds_the_server_bounded_until_it_leaves(app):
    async with serving(app) as (peer, connection):
        await peer.handshake()
        listing = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}).encode() + b"\n"
        sent = 0
        with anyio.move_on_after(3):  # the server stops reading once its replies back up: our writes block
            while sent < 20_000:
                await peer.write(listing)
                sent += 1
        assert sent < 20_000, "the server kept reading for a peer that reads nothing"
        assert connection.writer.waiting < 4 * 1024 * 1024
        os.close(peer.from_server)  # the peer goes away: the next write breaks the pipe
        peer.from_server = -1
        with anyio.fail_after(10):
            await connection.finished.wait()
        assert connection.client_gone


#: asyncio on 3.12+ takes a call's first step as it is read (``Backend.spawn_eager``); elsewhere on the next turn
EAGER = sys.version_info >= (3, 12)


async def test_a_peer_behind_that_closes_the_servers_input_has_left_and_the_connection_ends(app):
    """MCP's stdio shutdown with answers unread: close the server's input, keep stdout open, read nothing.

    The server, not reading while the peer is behind, still sees its input hang up; once the
    peer has taken nothing for a while, the running call is cancelled (its cleanup runs) and
    the connection ends, instead of waiting for room forever.
    """
    async with serving(app) as (peer, connection):
        await peer.handshake()
        await peer.send(call(2, "linger", progressToken="p"))
        assert (await peer.receive())["method"] == "notifications/progress"
        listing = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}).encode() + b"\n"
        with anyio.move_on_after(3):  # until the server stops reading: our writes block
            while True:
                await peer.write(listing)
        assert connection.writer.backed_up
        peer.close_input()
        with anyio.fail_after(10):
            await connection.finished.wait()
        assert app.cleanups == ["linger"]
        assert not connection.client_gone  # (no broken pipe: our end of its output is still open)


async def test_a_peer_behind_that_closed_the_servers_input_but_reads_slowly_gets_every_answer(app):
    """Closing the input and then reading, however slowly, is no leaving: every request written is answered."""
    # (the server takes a while to drain its backlog, longer than the grace it gives a peer that takes nothing)
    async with serving(app) as (peer, connection):
        await peer.handshake()
        calls = 1500  # answers of a few MiB: the server backs up and stops reading before the last
        listings = b"".join(
            json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode() + b"\n" for n in range(calls)
        )

        async def write_all_then_close() -> None:
            await peer.write(listings)
            peer.close_input()

        answered: set[int] = set()
        async with anyio.create_task_group() as group:
            group.start_soon(write_all_then_close)
            with anyio.fail_after(120):
                while not connection.writer.backed_up:
                    await anyio.sleep(0.01)
                while True:
                    while (line := peer.lines.take()) is not None:
                        assert isinstance(line, bytes)
                        answered.add(json.loads(line)["id"])
                    if len(answered) == calls:
                        break
                    # slow while the server is behind (its backlog takes seconds to go under the high water), then
                    # quick: the end of input gives what is still queued a bounded last drain (1 s)
                    await anyio.sleep(0.1 if connection.writer.backed_up else 0)
                    await peer.lines.fill()
        assert answered == set(range(calls))


def starts_eagerly(backend: str) -> bool:
    return backend == "asyncio" and EAGER


async def test_a_call_cancelled_in_the_chunk_that_brought_it_is_never_answered(app, anyio_backend_name):
    async with serving(app) as (peer, _):
        await peer.handshake()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        # one write, one chunk: the cancel is read right after the call
        await peer.write(b"".join(json.dumps(m).encode() + b"\n" for m in (call(2, "linger"), cancel)))
        reply = await peer.echo(3)
        assert reply["id"] == 3, reply  # no answer for 2 came before it
        if starts_eagerly(anyio_backend_name):  # linger was entered before the cancel was read: its cleanup ran
            with anyio.fail_after(10):
                while app.cleanups != ["linger"]:
                    await anyio.sleep(0.01)
        else:  # the cancel came before the call's first step: linger never ran
            assert app.cleanups == []


async def test_a_quick_call_is_answered_before_the_next_line_is_read_where_calls_start_eagerly(app, anyio_backend_name):
    async with serving(app) as (peer, _):
        await peer.handshake()
        # a call, then a line the reader refuses at once (its error line is written as it is read)
        await peer.write(json.dumps(call(2, "echo", {"text": "q"})).encode() + b"\nnot json\n")
        first, second = await peer.receive(), await peer.receive()
        order = [first["id"], second["id"]]
        assert order == ([2, None] if starts_eagerly(anyio_backend_name) else [None, 2]), (first, second)


async def test_on_asyncio_the_loops_readiness_callback_serves_the_lines_and_the_reader_task_sleeps(
    app, anyio_backend_name, monkeypatch
):
    """asyncio: the loop's readiness callback reads and starts each call (a woken reader task would run one loop
    turn later); the task takes over only for what must wait, here a notification for the server. trio: it reads."""
    server_fills: list[int] = []
    real_fill = LineReader.fill

    async def fill(reader: LineReader) -> None:
        if reader is connection.reader:
            server_fills.append(1)
        await real_fill(reader)

    monkeypatch.setattr(LineReader, "fill", fill)
    async with serving(app) as (peer, connection):
        await peer.handshake()
        for request_id in range(2, 6):
            assert (await peer.echo(request_id))["id"] == request_id
            await peer.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        assert (await peer.echo("last"))["id"] == "last"
        if anyio_backend_name == "asyncio":
            assert server_fills == []
        else:
            assert len(server_fills) >= 5


async def test_a_defect_while_serving_a_line_comes_out_of_run_never_a_hang(app, monkeypatch):
    """Whether the loop's readiness callback or the reader task meets it, the error ends the connection."""

    def broken(self: PipeConnection, message: dict[str, Any]) -> None:
        raise RuntimeError("a defect in the reader")

    with pytest.raises(BaseExceptionGroup) as raised:
        async with serving(app) as (peer, _):
            await peer.handshake()
            await peer.echo(2)
            monkeypatch.setattr(PipeConnection, "_start", broken)
            await peer.send(call(3, "echo", {"text": "x"}))
            with anyio.fail_after(10):
                await anyio.sleep_forever()
    assert raised.group_contains(RuntimeError, match="a defect in the reader", depth=None)


@contextmanager
def non_blocking_pipe() -> Iterator[tuple[int, int]]:
    """A pipe, both ends non-blocking, closed on exit."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    try:
        yield read_end, write_end
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_lines_written_in_one_loop_turn_after_the_first_go_out_together_at_its_end():
    with non_blocking_pipe() as (read_end, write_end):
        writer = PipeWriter(write_end, lambda: None)
        async with anyio.create_task_group() as group:
            group.start_soon(writer.run)
            writer.write_nowait(b"first\n")
            writer.write_nowait(b"second\n")
            writer.write_nowait(b"third\n")
            assert os.read(read_end, 1024) == b"first\n"  # straight out: a lone answer waits for nothing
            assert writer.waiting == len(b"second\nthird\n")  # the rest waits for the turn's end
            rest = b""
            with anyio.fail_after(5):
                while rest != b"second\nthird\n":
                    await anyio.lowlevel.checkpoint()
                    with suppress(BlockingIOError):
                        rest += os.read(read_end, 1024)
            assert writer.waiting == 0
            writer.write_nowait(b"next turn\n")  # a new turn: straight out again
            assert os.read(read_end, 1024) == b"next turn\n"
            group.cancel_scope.cancel()


async def test_requests_read_with_the_end_of_input_are_answered_or_cancelled_at_their_first_wait(app):
    async with serving(app) as (peer, connection):
        await peer.handshake()
        # two requests and the end of input, likely read together: the quick one is still answered
        await peer.write(
            b"".join(json.dumps(m).encode() + b"\n" for m in (call(2, "echo", {"text": "q"}), call(3, "linger")))
        )
        peer.close_input()
        replies = {}
        while len(replies) < 2:
            reply = await peer.receive()
            replies[reply["id"]] = reply
        assert replies[2]["result"]["structuredContent"] == {"result": "q"}
        assert replies[3]["error"]["message"] == "Connection closed"
        with anyio.fail_after(10):
            await connection.finished.wait()
        assert app.cleanups == ["linger"]  # entered, cancelled at its first wait, cleaned up


async def test_a_line_written_ungathered_arms_no_turn_end_so_the_next_goes_straight_out_too():
    """The answer of the only call running (``gather=False``) costs the loop no turn after it."""
    with non_blocking_pipe() as (read_end, write_end):
        writer = PipeWriter(write_end, lambda: None)
        writer.write_nowait(b"lone\n", gather=False)
        assert os.read(read_end, 1024) == b"lone\n"
        writer.write_nowait(b"then\n")  # no turn armed by the first: straight out, then gathering again
        writer.write_nowait(b"gathered\n")
        assert os.read(read_end, 1024) == b"then\n"
        assert writer.waiting == len(b"gathered\n")
        with anyio.fail_after(5):
            while writer.waiting:  # out as that turn ends
                await anyio.lowlevel.checkpoint()
        assert os.read(read_end, 1024) == b"gathered\n"


async def test_nan_and_infinity_in_a_message_go_out_as_null_never_as_bare_nan(app):
    """JSON has no NaN: a bare ``NaN`` on the line is one no client can parse (its call would never settle)."""
    async with serving(app) as (peer, connection):
        await peer.handshake()
        await connection.notify("notifications/message", {"level": "info", "data": [float("nan"), float("-inf"), 1.5]})
        with anyio.fail_after(10):
            line = await peer.lines.next()
        assert isinstance(line, bytes)
        assert json.loads(line, parse_constant=lambda name: pytest.fail(f"bare {name} on the wire"))["params"] == {
            "level": "info",
            "data": [None, None, 1.5],
        }


async def ended_sentence(app: Any, calls: list[Any]) -> str:
    """The sentence the (one) call the app saw ended with, once it has settled."""
    with anyio.fail_after(10):
        while not calls or calls[0].result is None:
            await anyio.sleep(0.01)
    return calls[0].result.error.message


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("cancel", 'its client cancelled it ("user pressed stop").'),
        ("cancel-long", 'its client cancelled it ("' + "why " * 49 + 'why…").'),
        ("cancel-no-reason", "its client cancelled it."),
        ("end of input", "the connection to its client ended."),
    ],
)
async def test_a_call_the_client_ended_says_how_in_its_sentence(app, how, why):
    """Issue 43: the notebook's view of a served call read "cancelled before it finished" whatever ended it."""
    calls: list[Any] = []
    undo = app.on_call(calls.append)
    async with serving(app) as (peer, _):
        await peer.handshake()
        await peer.send(call(2, "linger", progressToken="p"))
        assert (await peer.receive())["method"] == "notifications/progress"
        if how == "end of input":
            peer.close_input()
            assert (await peer.receive())["error"]["message"] == "Connection closed"
        else:
            params: dict[str, Any] = {"requestId": 2}
            if how == "cancel":
                params["reason"] = "user pressed\n stop" + " " * 500  # (whitespace folded)
            elif how == "cancel-long":
                params["reason"] = "why " * 5000  # (bounded to 200 characters)
            await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        sentence = await ended_sentence(app, calls)
    undo()
    assert sentence == f'The call to tool "linger" was cancelled before it finished: {why}'
