"""stdio faults: a real server subprocess fed garbage, giant and broken lines, and peers that vanish.

The process must stay up while it can (a normal call works after every fault) and
exit 0 once its peer is gone, with the handler's cleanup run. Cleanup is observed
through the file the test app's bodies append to (``FUSION_RELIABILITY_LOG``), which
outlives the process.

The client side runs on asyncio only: the thing under test is the subprocess, whose
event loop is chosen by the server entry point, not by this test.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from reliability_cases import CLIENT_META, LEGACY, MODERN, body_cases
from reliability_support import FIGURES, internal_text

pytestmark = [pytest.mark.reliability, pytest.mark.anyio, pytest.mark.asyncio_only]

HERE = Path(__file__).parent
REPO = HERE.parent.parent
#: A reply line on stdio is bounded like an HTTP reply (hostile input gets one short sentence).
MAX_LINE_REPLY = 16 * 1024
#: Every read and every wait for the process has a deadline.
DEADLINE = 20.0
#: The classes whose lines are not requests: they cannot fix the protocol era before the handshake.
NOT_REQUESTS = ("malformed JSON", "not JSON-RPC", "batch")


def stdio_server_command(target: str = "reliability_stdio_app:app") -> list[str]:
    """How the suite starts a stdio server: the one line to change when ``fusion-nb serve`` lands."""
    return [sys.executable, "-u", "-m", "fusion_nb.mcp.stdio", target]


class StdioPeer:
    """The client end of one server process: write lines, read replies, watch its cleanup log."""

    def __init__(self, process: Process, log: Path, stderr: Path, era: str) -> None:
        self.process, self.log, self.stderr, self.era = process, log, stderr, era
        assert process.stdin is not None and process.stdout is not None
        self.reader = BufferedByteReceiveStream(process.stdout)
        self._ids = 0

    async def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        with anyio.fail_after(DEADLINE):
            await self.process.stdin.send(data)

    async def send(self, message: Any) -> None:
        await self.write(json.dumps(message).encode() + b"\n")

    async def read_message(self) -> tuple[dict[str, Any] | None, bytes]:
        with anyio.fail_after(DEADLINE):
            line = await self.reader.receive_until(b"\n", 64 * 1024 * 1024)
        try:
            return json.loads(line), line
        except ValueError:
            return None, line

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._ids += 1
        params = dict(params or {})
        if self.era == MODERN:
            params["_meta"] = CLIENT_META
        return {"jsonrpc": "2.0", "id": f"t{self._ids}", "method": method, "params": params}

    async def call(self, message: dict[str, Any], seen: list[bytes] | None = None) -> dict[str, Any]:
        """Send a request and read lines until its response; other lines go to ``seen``."""
        await self.send(message)
        while True:
            reply, line = await self.read_message()
            if isinstance(reply, dict) and reply.get("id") == message["id"] and "method" not in reply:
                return reply
            if seen is not None:
                seen.append(line)

    async def handshake(self) -> None:
        if self.era == LEGACY:
            init = {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "reliability", "version": "0"},
                },
            }
            reply = await self.call(init)
            assert "result" in reply, reply
            await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert await self.healthy(), "the first call after the handshake failed"

    async def healthy(self, seen: list[bytes] | None = None) -> bool:
        reply = await self.call(self.request("tools/call", {"name": "echo", "arguments": {"text": "still here"}}), seen)
        result = reply.get("result") or {}
        return result.get("content", [{}])[0].get("text") == "still here"

    def stderr_problems(self) -> list[str]:
        """What the server printed to stderr that a host app would have to show: warnings and tracebacks."""
        text = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        found = [kind for kind in ("Traceback", "RuntimeWarning") if kind in text]
        return [f"stderr has a {kind}: {text[:400]!r}" for kind in found]

    def cleanups(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    async def exit_code(self) -> int | None:
        """The exit code once the process ends (bounded wait), or ``None`` if it is still running."""
        with anyio.move_on_after(DEADLINE):
            return await self.process.wait()
        return None


@pytest.fixture
def stdio_server(tmp_path: Path) -> Callable[[str], Any]:
    """Start the stdio server (``async with stdio_server(era) as peer``); it is always stopped afterwards."""
    import contextlib

    @contextlib.asynccontextmanager
    async def start(era: str) -> AsyncIterator[StdioPeer]:
        log = tmp_path / f"cleanups-{era}.log"
        stderr = tmp_path / f"stderr-{era}.txt"
        env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{REPO}", "FUSION_RELIABILITY_LOG": str(log)}
        with stderr.open("wb") as err:
            process = await anyio.open_process(stdio_server_command(), env=env, cwd=str(REPO), stderr=err)
        try:
            yield StdioPeer(process, log, stderr, era)
        finally:
            if process.returncode is None:
                process.kill()
                with anyio.move_on_after(DEADLINE):
                    await process.wait()
            await process.aclose()

    return start


def judge_lines(klass: str, label: str, lines: list[bytes], problems: list[str]) -> None:
    """Replies to a garbage line: no internal text, bounded; counted under ``klass``."""
    tally = FIGURES.case(f"stdio {klass}")
    tally.tried += 1
    for line in lines:
        text = line.decode("utf-8", "replace")
        leaked = internal_text(text)
        if leaked:
            tally.leaked += 1
            FIGURES.leaks.append(f"stdio {klass}/{label}: {', '.join(leaked)}")
            problems.append(f"{label}: internal text ({', '.join(leaked)}): {text[:300]!r}")
        if len(line) > MAX_LINE_REPLY:
            tally.oversized += 1
            problems.append(f"{label}: reply line of {len(line)} bytes")
        if '"code":-32603' in text.replace(" ", ""):
            tally.server_errors += 1
            problems.append(f"{label}: internal error {text[:200]!r}")


def _request_like(body: Any) -> bool:
    """Would the server take this line as a request? (The first request fixes a stdio stream's era.)"""
    if isinstance(body, bytes):  # parseable once decoded leniently: a request with a broken method name
        return b'"method"' in body
    return isinstance(body, list) or (isinstance(body, dict) and "method" in body)


def garbage(era: str, *, before_handshake: bool) -> list[tuple[str, str, bytes]]:
    """(class, label, line) for every hostile body, plus stdio-only ones; newlines inside are escaped by JSON."""
    lines: list[tuple[str, str, bytes]] = [
        ("blank", "empty line", b"\n"),
        ("blank", "spaces", b"   \t  \n"),
        ("bytes", "invalid UTF-8", b"\xff\xfe\xfd\n"),
        ("bytes", "NUL bytes", b"\x00\x00\n"),
        ("bytes", "CR only", b"\r\n"),
        ("huge line", "5 MB of garbage", b"x" * 5_000_000 + b"\n"),
    ]
    for klass, label, body, raw, _ in body_cases(era):
        if before_handshake and (klass not in NOT_REQUESTS or _request_like(body)):
            continue
        data = body if isinstance(body, bytes) else (body if raw else json.dumps(body)).encode()
        lines.append((klass, label, data.replace(b"\n", b" ") + b"\n"))
    if not before_handshake:
        bad_utf8 = (
            b'{"jsonrpc":"2.0","id":"u","method":"tools/call","params":{"name":"echo","arguments":{"text":"\xff"}}}'
        )
        lines.append(("bytes", "invalid UTF-8 inside a request", bad_utf8 + b"\n"))
        big: dict[str, Any] = {"jsonrpc": "2.0", "id": "big", "method": "tools/call", "params": {"name": "measure"}}
        big["params"]["arguments"] = {"text": "y" * 5_000_000}
        if era == MODERN:
            big["params"]["_meta"] = CLIENT_META
        lines.append(("huge line", "5 MB request", json.dumps(big).encode() + b"\n"))
    return lines


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_garbage_before_and_after_the_handshake_then_idle_close(stdio_server: Any, era: str) -> None:
    problems: list[str] = []
    async with stdio_server(era) as peer:
        for klass, label, line in garbage(era, before_handshake=True):
            await peer.write(line)
            if peer.process.returncode is not None:
                problems.append(f"before the handshake, {label}: the process exited ({peer.process.returncode})")
                break
            FIGURES.case(f"stdio {klass}").tried += 1
        await peer.handshake()
        for klass, label, line in garbage(era, before_handshake=False):
            seen: list[bytes] = []
            await peer.write(line)
            if not await peer.healthy(seen):
                problems.append(f"after the handshake, {label}: a normal call failed afterwards")
            judge_lines(klass, label, seen, problems)
        assert peer.process.stdin is not None
        await peer.process.stdin.aclose()  # the idle peer goes away
        code = await peer.exit_code()
        FIGURES.notes.append(f"stdio {era}: exit code after an idle close: {code}")
        if code != 0:
            problems.append(f"closing stdin while idle: exit code {code} (expected 0)")
        problems += peer.stderr_problems()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_closing_stdin_mid_call_runs_cleanup_and_exits_0(stdio_server: Any, era: str) -> None:
    async with stdio_server(era) as peer:
        await peer.handshake()
        call = peer.request("tools/call", {"name": "hang", "arguments": {}, "_meta": {"progressToken": "p"}})
        if era == MODERN:
            call["params"]["_meta"] = {**CLIENT_META, "progressToken": "p"}
        await peer.send(call)
        while True:  # the body has started once its first progress arrives
            message, _ = await peer.read_message()
            if isinstance(message, dict) and message.get("method") == "notifications/progress":
                break
        assert peer.process.stdin is not None
        await peer.process.stdin.aclose()
        code = await peer.exit_code()
        cleanups = peer.cleanups()
        noise = peer.stderr_problems()
    assert "cleaned hang" in cleanups, f"the handler's cleanup did not run: {cleanups}"
    assert code == 0, f"closing stdin mid-call: exit code {code} (expected 0)"
    assert not noise, noise


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_a_client_that_stops_reading_then_vanishes(tmp_path: Path, era: str) -> None:
    """The server blocks writing while the client does not read; once the client is gone it exits 0.

    Synchronous, on raw pipe descriptors: the client must really close its end of
    stdout (an async stream wrapper only stops reading), so the server's next write fails.
    """
    log, stderr = tmp_path / "cleanups.log", tmp_path / "stderr.txt"
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{REPO}", "FUSION_RELIABILITY_LOG": str(log)}
    out_read, out_write = os.pipe()
    in_read, in_write = os.pipe()
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            stdio_server_command(), stdin=in_read, stdout=out_write, stderr=err, env=env, cwd=str(REPO)
        )
    os.close(in_read)
    os.close(out_write)
    peer = RawPeer(in_write, out_read, era)
    writer: threading.Thread | None = None
    try:
        peer.handshake()
        call = peer.request("tools/call", {"name": "hang", "arguments": {}})
        call["params"].setdefault("_meta", {})["progressToken"] = "p"
        peer.send(call)
        peer.read_until(lambda m: m.get("method") == "notifications/progress")
        listing = b"".join(json.dumps(peer.request("tools/list")).encode() + b"\n" for _ in range(400))
        # ~1 MB of replies nobody reads: the pipe fills and the server waits (our write may block too)
        writer = threading.Thread(target=peer.write_quietly, args=(listing,), daemon=True)
        writer.start()
        writer.join(2.0)  # bounded: long enough for the pipe to fill on a loaded machine
        assert process.poll() is None, "the process died while its client was merely slow"
        os.close(out_read)  # the client vanishes: its end of stdout first...
        peer.out = -1
        try:
            code: int | None = process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE)
        for fd in (peer.out, peer.inp):
            if fd >= 0:
                os.close(fd)
        if writer is not None:
            writer.join(DEADLINE)
    cleanups = log.read_text().splitlines() if log.exists() else []
    text = stderr.read_text(errors="replace")
    FIGURES.notes.append(
        f"stdio {era}: client stopped reading then left: exit {code}, {len(text.splitlines())} stderr lines"
    )
    assert "cleaned hang" in cleanups, f"the handler's cleanup did not run: {cleanups}"
    assert code == 0, f"a client that stopped reading and left: exit code {code} (expected 0)"
    assert "Traceback" not in text, f"stderr has a traceback: {text[:600]!r}"


class RawPeer:
    """A blocking stdio client on raw descriptors (for closing one end for real)."""

    def __init__(self, inp: int, out: int, era: str) -> None:
        self.inp, self.out, self.era = inp, out, era
        self.buffer = b""
        self._ids = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._ids += 1
        params = dict(params or {})
        if self.era == MODERN:
            params["_meta"] = dict(CLIENT_META)
        return {"jsonrpc": "2.0", "id": f"r{self._ids}", "method": method, "params": params}

    def send(self, message: Any) -> None:
        os.write(self.inp, json.dumps(message).encode() + b"\n")

    def write_quietly(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.inp, view) :]
        except OSError:
            pass  # the server is gone: that is what the test waits for

    def read_until(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict) and match(message):
                    return message
            ready, _, _ = select.select([self.out], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("no matching message from the server")
            chunk = os.read(self.out, 1 << 16)
            if not chunk:
                raise EOFError("the server closed stdout")
            self.buffer += chunk

    def handshake(self) -> None:
        if self.era == LEGACY:
            init = {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "r", "version": "0"}},
            }
            self.send(init)
            self.read_until(lambda m: m.get("id") == "init")
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = self.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        self.send(call)
        self.read_until(lambda m: m.get("id") == call["id"])
