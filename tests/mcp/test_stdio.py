"""The app served over stdio by a real subprocess (the ``stdio_command`` fixture), both eras.

The SDK client covers the protocol; raw pipes cover how the process ends: a client
closing stdin or no longer reading stdout ends it with exit 0, at most one log
line, and the running handler's cleanup done.
"""

from __future__ import annotations

import itertools
import subprocess
import warnings
from pathlib import Path

import anyio
import pytest
from eras import refused_for_capability
from mcp import Client
from stdio_serving import ECHO, INITIALIZE, open_raw

pytestmark = pytest.mark.anyio

MODES = {"2025-stdio": "legacy", "2026-stdio": "auto"}


@pytest.fixture(params=list(MODES))
def era(request):
    return request.param


@pytest.fixture
def stdio_client(stdio_command):
    def connect(era: str, **options) -> Client:
        return Client(stdio_command.params(), mode=MODES[era], **options)

    return connect


async def test_list_call_progress_and_errors(era, stdio_client):
    seen: list[float] = []

    async def on_progress(value, total, message):
        seen.append(value)

    async with stdio_client(era) as client:
        assert client.protocol_version == ("2025-11-25" if era == "2025-stdio" else "2026-07-28")
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["echo"].annotations.read_only_hint is True
        assert listed["echo"].output_schema is not None
        result = await client.call_tool("echo", {"text": "over stdio"})
        assert result.structured_content == {"result": "over stdio"}
        noisy = await client.call_tool("noisy", {}, progress_callback=on_progress)
        assert noisy.content[0].text == "done"
        failed = await client.call_tool("boom", {})
        invalid = await client.call_tool("echo", {})
    assert seen and seen[-1] == 100 and all(a < b for a, b in itertools.pairwise(seen))
    assert failed.is_error and failed.content[0].text.startswith("[QUOTA_EXCEEDED] The daily quota is used up.")
    assert invalid.is_error and invalid.content[0].text.startswith("[INVALID_INPUT]")


async def test_log_lines_reach_the_client_at_its_level(era, stdio_client):
    heard: list[tuple[str, object]] = []

    async def on_log(params):
        heard.append((params.level, params.data))

    with warnings.catch_warnings():  # the SDK marks logging deprecated (SEP-2577); warnings are errors here
        warnings.filterwarnings("ignore", message="The logging capability is deprecated")
        async with stdio_client(era, logging_callback=on_log, log_level="error") as client:
            if era == "2025-stdio":
                await client.set_logging_level("error")
            assert (await client.call_tool("chatty", {})).content[0].text == "done"
    assert heard == [("error", "bad row")]


async def test_cancelling_the_call_runs_the_handlers_cleanup(era, stdio_client):
    entered = anyio.Event()

    async def on_progress(value, total, message):
        if message == "entered":
            entered.set()

    async with stdio_client(era) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("stall", {}, progress_callback=on_progress))
            with anyio.fail_after(20):
                await entered.wait()
            group.cancel_scope.cancel()
        with anyio.fail_after(20):
            cleaned = await client.call_tool("cleaned", {})  # answers once stall's finally has run
    assert cleaned.content[0].text == "cleaned"


async def test_refund_flow_and_unsupported_elicitation(era, stdio_client):
    from mcp import types

    async def approve(context, params):
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with stdio_client(era, elicitation_callback=approve) as client:
        result = await client.call_tool("billing.refund", {"id": "inv-7"})
    assert result.content[0].text == "refunded inv-7"
    async with stdio_client(era) as client:
        call = client.call_tool("billing.refund", {"id": "inv-7"})
        said = await refused_for_capability(call, era.startswith("2026"), {"elicitation": {"form": {}}})
    assert said.startswith('Tool "billing.refund" needs input')


@pytest.fixture
async def raw_server(stdio_command, tmp_path):
    mark = tmp_path / "cleaned"
    async with open_raw(stdio_command, FUSION_NB_TEST_CLEANUP_MARK=str(mark)) as server:
        yield server, mark


async def test_closing_stdin_at_once_exits_0_silently(raw_server):
    """No RuntimeWarning from ``python -m`` (the package imports submodules lazily), no traceback."""
    server, _ = raw_server
    await server.send(INITIALIZE)
    assert (await server.receive())["result"]["serverInfo"]["name"] == "mcp-stdio-test"
    await server.process.stdin.aclose()
    assert await server.exit() == (0, [])


async def test_closing_stdin_mid_call_runs_cleanup_and_exits_0(raw_server):
    server, mark = raw_server
    await server.start_linger()
    await server.process.stdin.aclose()
    assert await server.exit() == (0, [])
    assert mark.read_text() == "cleaned"


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
async def test_sigterm_mid_call_ends_the_connection_as_end_of_input_does(raw_server, name):
    """How a host stops a server it started (SIGTERM), or its terminal going away (SIGHUP): the running call
    is cancelled, cleaned up and answered; exit 0.

    (stdin is still open: the signal alone ends it.) Without the handler the default one
    kills the process: exit -15 (-1), no cleanup, no answer.
    """
    import signal

    server, mark = raw_server
    await server.start_linger()
    server.process.send_signal(getattr(signal, name))
    with anyio.fail_after(20):
        answer = await server.receive()
    assert answer["id"] == 2 and answer["error"]["message"] == "Connection closed", answer
    assert await server.exit() == (0, [f"fusion-nb: {name}: ending the stdio connection"])
    assert mark.read_text() == "cleaned"


async def test_a_client_that_stops_reading_ends_the_server_with_one_line(raw_server):
    server, mark = raw_server
    await server.start_linger()
    server.stop_reading()  # the next write hits a broken pipe
    await server.send(ECHO)
    code, lines = await server.exit()  # stdin is still open: the server must not wait for it
    assert (code, lines) == (0, ["fusion-nb: the MCP client stopped reading; stdio server stopped"])
    assert mark.read_text() == "cleaned"


async def test_ctrl_c_mid_call_runs_cleanup_and_exits_130_with_one_line(raw_server):
    """SIGINT (a person's Ctrl-C in the terminal that started it): the call is cancelled, cleaned up; no traceback."""
    import signal

    server, mark = raw_server
    await server.start_linger()
    server.process.send_signal(signal.SIGINT)
    assert await server.exit() == (130, ["fusion-nb: interrupted"])
    assert mark.read_text() == "cleaned"


@pytest.mark.parametrize("closed", [0, 1, 2], ids=["stdin", "stdout", "stderr"])
def test_a_standard_descriptor_closed_at_start_is_the_null_device(stdio_command, closed):
    """``serve <&-`` (or ``>&-``, ``2>&-``): a closed stdin is empty input, a closed stdout or stderr discards.

    Left closed, its number goes to the next descriptor opened (the loop's epoll, the
    null device of the diversion) and the server reads, writes or ``dup2``s over that:
    a traceback, exit 1. A process launched so exits 0 instead.
    """
    import json

    wire = b"".join(json.dumps(message).encode() + b"\n" for message in (INITIALIZE, ECHO))
    done = subprocess.run(
        ["sh", "-c", f'exec "$@" {closed}>&-', "sh", *stdio_command.argv],  # as a launcher closes it
        input=None if closed == 0 else wire,
        stdout=None if closed == 1 else subprocess.PIPE,
        stderr=None if closed == 2 else subprocess.PIPE,
        cwd=stdio_command.cwd,
        env=stdio_command.full_env(),
        timeout=60,
    )
    assert done.returncode == 0, done
    if closed != 2:
        assert b"Traceback" not in done.stderr and b"Error" not in done.stderr, done.stderr.decode()
    if closed == 0:
        assert done.stdout == b""
    if closed == 2:
        assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [1, 3]


def test_stdin_the_null_device_ends_the_server_at_once_with_exit_0(stdio_command):
    """``< /dev/null`` (what a service manager or a CI step hands over): end of input, not a traceback.

    The loop cannot wait for ``/dev/null`` (epoll refuses it): it is read as it is, as a regular file is.
    """
    done = subprocess.run(
        stdio_command.argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=stdio_command.cwd,
        env=stdio_command.full_env(),
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, b""), done
    assert b"Traceback" not in done.stderr and b"Error" not in done.stderr, done.stderr.decode()


def test_a_file_of_requests_on_stdin_is_answered_whole_into_a_file_on_stdout(stdio_command, tmp_path):
    """``serve < requests.jsonl > answers.jsonl``: neither file is watched by the loop; every request is answered."""
    import json

    calls = [{**ECHO, "id": 10 + n, "params": {"name": "echo", "arguments": {"text": f"n{n}"}}} for n in range(200)]
    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *calls]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines) + "not json\n")
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            stdio_command.argv,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            cwd=stdio_command.cwd,
            env=stdio_command.full_env(),
            timeout=60,
        )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode()
    replies = [json.loads(line) for line in answers.read_text().splitlines()]
    by_id = {reply["id"]: reply for reply in replies}
    assert len(replies) == len(by_id) == 1 + len(calls) + 1  # initialize, each call once, the refused line
    assert all(
        by_id[call["id"]]["result"]["structuredContent"] == {"result": call["params"]["arguments"]["text"]}
        for call in calls
    )
    assert by_id[None]["error"]["code"] == -32700


def test_the_stdio_module_keeps_working_as_documented():
    """``python -m fusion_nb.mcp.stdio`` without a target prints its usage and exits non-zero."""
    done = subprocess.run(
        [__import__("sys").executable, "-m", "fusion_nb.mcp.stdio"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent.parent.parent,
    )
    assert done.returncode != 0 and "usage: python -u -m fusion_nb.mcp.stdio module:app" in done.stderr
    assert "RuntimeWarning" not in done.stderr


async def test_a_result_with_a_lone_surrogate_is_answered_with_a_replacement_character(raw_server):
    """A tool's text may hold a lone surrogate (a file name read with ``surrogateescape``); UTF-8 cannot carry
    it, so the SDK's writer failed and the call was never answered (HTTP escapes it). Now U+FFFD replaces it."""
    server, _ = raw_server
    await server.send(INITIALIZE)
    assert (await server.receive())["id"] == 1
    await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await server.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "lone.surrogate"}})
    with anyio.fail_after(20):
        answer = await server.receive()
    assert answer["id"] == 3
    assert answer["result"]["content"][0]["text"] == "a\ufffdb", answer
    await server.send(ECHO)  # the server still serves
    with anyio.fail_after(20):
        assert (await server.receive())["result"]["structuredContent"] == {"result": "x"}


async def test_a_request_with_a_lone_surrogate_is_answered(raw_server):
    """JSON may escape a lone surrogate (``"\\ud800"``); the SDK's strict parser refused the whole line
    and the request was never answered. It is read with U+FFFD in the surrogate's place, as on the way out."""
    server, _ = raw_server
    await server.send(INITIALIZE)
    assert (await server.receive())["id"] == 1
    await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    lone = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "a\ud800b"}},
    }
    await server.send(lone)  # json.dumps writes the surrogate as the escape \ud800
    with anyio.fail_after(20):
        answer = await server.receive()
    assert answer["id"] == 3 and answer["result"]["structuredContent"] == {"result": "a\ufffdb"}, answer


def test_a_person_typing_at_a_terminal_is_answered_line_by_line_and_ctrl_d_ends_it(stdio_command):
    """stdin a terminal (``fusion-nb serve`` run by hand): each typed line is answered as Enter sends it, ^D ends."""
    import json
    import os
    import pty
    import select
    import termios
    import time

    terminal, typed_into = pty.openpty()
    modes = termios.tcgetattr(typed_into)
    modes[3] &= ~termios.ECHO  # (the terminal would echo what is typed back to the person, not to the server)
    termios.tcsetattr(typed_into, termios.TCSANOW, modes)
    server = subprocess.Popen(
        stdio_command.argv,
        stdin=typed_into,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=stdio_command.cwd,
        env=stdio_command.full_env(),
    )
    os.close(typed_into)
    assert server.stdout is not None
    answers = server.stdout

    def type_line(message: dict) -> None:
        text = json.dumps(message).encode()
        for start in range(0, len(text), 16):  # a few keys at a time, with pauses, then Enter
            os.write(terminal, text[start : start + 16])
            time.sleep(0.005)
        os.write(terminal, b"\n")

    def answer() -> dict:
        ready, _, _ = select.select([answers], [], [], 20)
        assert ready, "no answer to a typed line within 20 s"
        return json.loads(answers.readline())

    try:
        type_line(INITIALIZE)
        assert answer()["id"] == 1
        type_line({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for request_id in (2, 3):
            type_line({**ECHO, "id": request_id})
            assert answer()["id"] == request_id
        os.write(terminal, b"\x04")  # ^D at the start of a line: end of input
        assert server.wait(timeout=20) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        answers.close()
        os.close(terminal)
