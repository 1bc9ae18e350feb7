"""Attacks a stranger without a token can make on the connection level of ``fusion-nb serve`` (issue 29, 1-2).

A real ``fusion-nb serve --transport http`` process on 127.0.0.1 (httptools, the default
parser). Each attack records its figures (``FIGURES.attack``), printed every run:

* header flood: connections sending endless header lines; the worker's RSS must stay
  flat (before the limits: 68 -> 823 MB for 50 MiB on one connection);
* idle and trickling sockets: more than the connection cap, silent or one byte at a
  time; each is refused at once (503) or closed at the header deadline, and the
  service answers again (before: held forever, the service down at 1,024 descriptors).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import time
from pathlib import Path

import anyio
import pytest
from reliability_support import FIGURES

sys.path.insert(0, str(Path(__file__).parent.parent / "cli"))

from served import served  # tests/cli/served.py: the one way tests start ``fusion-nb serve``

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

SOURCE = "tests/cli/data/service_app.py"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def port_of(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


async def flood(port: int, mib: int) -> int:
    """Send ``mib`` MiB of header lines on one connection, until the server stops reading; bytes it took."""
    loop = asyncio.get_running_loop()
    line = b"X-Flood: " + b"a" * 1014 + b"\r\n"  # 1 KiB per header line
    chunk = line * 64
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setblocking(False)
        try:
            await loop.sock_sendall(sock, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            while sent < mib * 1024 * 1024:
                await asyncio.wait_for(loop.sock_sendall(sock, chunk), 10)
                sent += len(chunk)
        except (ConnectionError, TimeoutError):
            pass
    return sent


async def test_a_header_flood_leaves_the_worker_rss_flat():
    async with served(SOURCE) as server:
        pid, port = server.process.pid, port_of(server.url)
        before = rss_mb(pid)
        peak = before
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, rss_mb(pid))
                await anyio.sleep(0.05)

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(sample)
            taken = await asyncio.gather(*(flood(port, 50) for _ in range(4)))
            sampling = False
        seconds = time.monotonic() - started
        async with server.client() as client:
            assert (await client.call_tool("echo", {"text": "after"})).structured_content["text"] == "after"
    FIGURES.attack(
        "header flood (4 x 50 MiB)",
        accepted_kib=round(max(taken) / 1024),
        rss_before_mb=round(before, 1),
        rss_peak_mb=round(peak, 1),
        seconds=round(seconds, 2),
    )
    assert max(taken) < 8 * 1024 * 1024, f"a connection could send {max(taken)} bytes of headers"
    assert peak - before < 50, f"RSS grew {peak - before:.0f} MB under a header flood"


async def test_idle_and_trickling_sockets_beyond_the_cap_are_refused_or_reaped():
    cap, timeout = 100, 1.0
    async with served(SOURCE, "--header-timeout", str(timeout), "--max-connections", str(cap)) as server:
        port = port_of(server.url)
        loop = asyncio.get_running_loop()
        socks = []
        for _ in range(cap + 50):
            sock = socket.socket()
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", port))
            socks.append(sock)
        trickling = socks[: cap // 2]
        for sock in trickling:
            await loop.sock_sendall(sock, b"GET /healthz HTTP/1.1\r\n")

        refused = reaped = timed_out = 0

        async def outcome(sock: socket.socket) -> None:
            nonlocal refused, reaped, timed_out
            data = b""
            with anyio.move_on_after(timeout * 10):
                while True:
                    try:
                        got = await asyncio.wait_for(loop.sock_recv(sock, 4096), 0.2)
                    except TimeoutError:
                        if sock in trickling:
                            await loop.sock_sendall(sock, b"X")  # a trickle: one byte per 200 ms
                        continue
                    except ConnectionError:
                        got = b""
                    if not got:
                        break
                    data += got
                if data.startswith(b"HTTP/1.1 503 "):
                    refused += 1
                elif data.startswith(b"HTTP/1.1 408 ") or data == b"":
                    reaped += 1
                return
            timed_out += 1

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for sock in socks:
                group.start_soon(outcome, sock)
        seconds = time.monotonic() - started
        for sock in socks:
            sock.close()
        async with server.client() as client:
            assert (await client.call_tool("echo", {"text": "after"})).structured_content["text"] == "after"
    FIGURES.attack(
        "idle + trickling sockets",
        opened=len(socks),
        cap=cap,
        refused_503=refused,
        reaped_at_deadline=reaped,
        still_held=timed_out,
        seconds=round(seconds, 2),
    )
    assert timed_out == 0, f"{timed_out} idle connections were still held after {timeout * 10:g} s"
    assert refused >= 50 - 1 and refused + reaped == len(socks)


async def test_a_strangers_silent_sockets_do_not_keep_fresh_clients_out():
    """Issue 44, 1: one address re-opening 1,000 silent sockets while fresh clients connect from another.

    The cap is what a 1,024-descriptor limit gives (896). Before: the stranger's silent
    connections held every slot for the whole header timeout, and nearly every fresh
    connection got 503 (1 of 45 served in 30 s). Now a full server evicts the silent
    connections of the address holding the most, and that address gets no more than its
    share: the fresh clients are served.
    """
    cap, sockets, requests = 896, 1_000, 60
    async with served(SOURCE, "--max-connections", str(cap)) as server:
        port = port_of(server.url)
        loop = asyncio.get_running_loop()
        stop = anyio.Event()
        opened = held = 0
        all_opened = anyio.Event()

        async def stranger_slot() -> None:
            """Keep one silent socket open from 127.0.0.2: re-open it whenever the server closes it."""
            nonlocal opened, held
            first = True
            while not stop.is_set():
                sock = socket.socket()
                sock.setblocking(False)
                try:
                    sock.bind(("127.0.0.2", 0))
                    await loop.sock_connect(sock, ("127.0.0.1", port))
                    opened += 1
                    held += 1
                    if first:
                        first = False
                        if opened >= sockets:
                            all_opened.set()
                    with anyio.move_on_after(30):
                        with contextlib.suppress(ConnectionError):
                            while await loop.sock_recv(sock, 4096):
                                pass
                    held -= 1
                except OSError:
                    pass
                finally:
                    sock.close()
                with anyio.move_on_after(0.1):  # re-open at once, as the attacker did (bounded churn)
                    await stop.wait()

        async def fresh_request() -> bool:
            """One request on a new connection from 127.0.0.1; whether it was answered 200."""
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return False
            try:
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                with anyio.move_on_after(15):
                    return (await reader.read()).startswith(b"HTTP/1.1 200 ")
                return False
            except OSError:
                return False
            finally:
                writer.close()

        served_count = 0
        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for _ in range(sockets):
                group.start_soon(stranger_slot)
            with anyio.fail_after(60):
                await all_opened.wait()
            holding = held
            for _ in range(requests):
                served_count += await fresh_request()
                await anyio.sleep(0.05)
            stop.set()
            group.cancel_scope.cancel()
        seconds = time.monotonic() - started
        async with server.client() as client:
            assert (await client.call_tool("echo", {"text": "after"})).structured_content["text"] == "after"
    FIGURES.attack(
        "stranger's 1,000 silent sockets",
        cap=cap,
        stranger_open_at_start=holding,
        stranger_connects=opened,
        fresh_requests=requests,
        fresh_served=served_count,
        served_pct=round(100 * served_count / requests, 1),
        seconds=round(seconds, 2),
    )
    assert served_count >= 0.95 * requests, f"{served_count} of {requests} fresh clients served"
