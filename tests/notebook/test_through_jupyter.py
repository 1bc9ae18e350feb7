"""The MCP endpoint through a real ``jupyter server`` (fusion_nb.jupyter_server_extension), under a base URL.

The server (tests/jupyter_serving.py) has a token and ``/user/alice/`` as base URL; the kernel is
started through its sessions API, as JupyterLab starts one. The Python SDK client here; the
TypeScript SDK's is tests/interop/test_through_jupyter_interop.py.
"""

from __future__ import annotations

import anyio
import httpx
import pytest
from desktop_host import host_client
from jupyter_serving import BASE, NOTEBOOK, TOKEN, AttachedKernel, jupyter_server, notebook_kernel
from kernel_harness import Kernel, serve_shout

from fusion_nb import wiring
from fusion_nb.jupyter_server_extension import NOT_SERVING
from fusion_nb.mcp import connect
from fusion_nb.mcp.client_config import printed_configs

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]


async def test_a_served_notebook_answers_through_the_jupyter_server(tmp_path):
    with jupyter_server(tmp_path) as server:
        url, runtime, endpoint = server.url, server.runtime, server.endpoint()
        auth = {"Authorization": f"token {TOKEN}"}
        async with httpx.AsyncClient(headers=auth, timeout=60) as http:
            # before any kernel serves: one sentence, 503, at once
            before = await http.post(endpoint, json={})
            assert before.status_code == 503 and before.text.strip() == NOT_SERVING
            async with notebook_kernel(http, server) as (kernel_id, kernel):
                printed, _, _ = await serve_shout(kernel)
                # %fusion serve prints the Jupyter URL, its credential and the hosts' configs for it
                assert "Through the Jupyter server (reachable from any machine" in printed.stdout, printed.stdout
                assert f": {endpoint}\n" in printed.stdout and f"server's token: {TOKEN}" in printed.stdout
                assert (
                    f'claude mcp add --transport http fusion-nb {endpoint} --header "Authorization: token {TOKEN}"'
                    in printed.stdout
                )
                configs = printed_configs(printed.stdout)
                desktop = configs["Claude Desktop (claude_desktop_config.json) through Jupyter"]["mcpServers"]
                vscode = configs["VS Code (.vscode/mcp.json) through Jupyter"]["servers"]
                for entry in (desktop["fusion-nb"], vscode["fusion-nb"]):  # as pasted into each host
                    async with host_client(entry) as client:
                        assert (await client.call_tool("shout", {"text": "desk"})).content[0].text == "DESK"
                for mode in ("legacy", "auto"):
                    progress: list[float] = []

                    async def on_progress(value, total, message, progress=progress):  # type: ignore[no-untyped-def]
                        progress.append(value)

                    async with connect(endpoint, TOKEN, mode=mode) as client:
                        result = await client.call_tool("shout", {"text": "via"}, progress_callback=on_progress)
                        assert result.content[0].text == "VIA" and not result.is_error
                    assert progress == [50], (mode, progress)
                # the Jupyter server's own auth: no token 401, a wrong one 401/403, never the kernel's token
                async with httpx.AsyncClient() as stranger:
                    for headers in ({}, {"Authorization": "token wrong"}):
                        refused = await stranger.post(endpoint, json={}, headers=headers)
                        assert refused.status_code in (401, 403), (headers, refused.status_code)
                    ok = await stranger.post(
                        f"{endpoint}?token={TOKEN}",
                        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"Accept": "application/json, text/event-stream"},
                    )
                    assert ok.status_code != 401 and ok.status_code < 500, ok.status_code
                # kernel restart: the same URL says one sentence in the gap, and serves again after %fusion serve
                (await http.post(f"{url}api/kernels/{kernel_id}/restart")).raise_for_status()
            with anyio.fail_after(30):
                gap = await http.post(endpoint, json={})
            assert gap.status_code == 503 and gap.text.strip() == NOT_SERVING
            # the session's kernel, restarted (same id and connection file)
            kernel = await AttachedKernel(runtime / f"kernel-{kernel_id}.json").start()
            try:
                await serve_shout(kernel)
                async with connect(endpoint, TOKEN) as client:
                    assert (await client.call_tool("shout", {"text": "back"})).content[0].text == "BACK"
                await kernel.run("%fusion stop")
                stopped = await http.post(endpoint, json={})
                assert stopped.status_code == 503 and stopped.text.strip() == NOT_SERVING
            finally:
                await kernel.stop()


async def test_a_connected_client_rides_a_kernel_restart(tmp_path, monkeypatch):
    """Clients connected through the Jupyter URL while the kernel restarts: each call in the gap fails
    at once with the one sentence (as the SDK's error message, not "Server returned an error
    response"), and after ``%fusion serve`` in the new kernel the same URL serves: the 2026-07-28
    client (stateless) goes on as it was; a 2025-11-25 session belonged to the old kernel, so that
    client is told its session is gone and a new connection serves."""
    from mcp.shared.exceptions import MCPError

    with jupyter_server(tmp_path) as server:
        endpoint = server.endpoint()
        http = httpx.AsyncClient(headers={"Authorization": f"token {TOKEN}"}, timeout=60)
        async with http, notebook_kernel(http, server) as (kernel_id, kernel):
            await serve_shout(kernel)
            # another user's server path (their base URL) is not this server's: refused, no kernel reached
            other = await http.post(endpoint.replace(BASE, "/user/bob/"), json={"jsonrpc": "2.0", "id": 1})
            assert other.status_code == 404, other.status_code
            async with connect(endpoint, TOKEN, mode="legacy") as legacy, connect(endpoint, TOKEN) as modern:
                for client in (legacy, modern):
                    assert (await client.call_tool("shout", {"text": "a"})).content[0].text == "A"
                (await http.post(f"{server.url}api/kernels/{kernel_id}/restart")).raise_for_status()
                # the ending kernel marked its notebook not serving: nothing goes to its old port and token
                monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(server.runtime))
                kept = wiring.load(str(server.root / NOTEBOOK))
                assert kept is not None and not kept.serving, kept
                for client in (legacy, modern):
                    with anyio.fail_after(30), pytest.raises(MCPError) as gap:
                        await client.call_tool("shout", {"text": "gap"})
                    assert gap.value.error.message == NOT_SERVING
                restarted = await AttachedKernel(server.runtime / f"kernel-{kernel_id}.json").start()
                try:
                    await serve_shout(restarted)
                    with anyio.fail_after(30):
                        assert (await modern.call_tool("shout", {"text": "again"})).content[0].text == "AGAIN"
                        with pytest.raises(MCPError, match="Session not found"):
                            await legacy.call_tool("shout", {"text": "again"})
                    async with connect(endpoint, TOKEN, mode="legacy") as fresh:
                        assert (await fresh.call_tool("shout", {"text": "new"})).content[0].text == "NEW"
                finally:
                    await restarted.stop()


async def test_a_kernel_killed_outright_is_not_serving(tmp_path, monkeypatch):
    """SIGKILL (the OOM killer) leaves the record saying "serving": the extension checks the kernel's
    process and answers the sentence, never forwarding the old token to whatever binds that port."""
    import os
    import signal

    with jupyter_server(tmp_path) as server:
        endpoint = server.endpoint()
        http = httpx.AsyncClient(headers={"Authorization": f"token {TOKEN}"}, timeout=60)
        async with http, notebook_kernel(http, server) as (_, kernel):
            await serve_shout(kernel)
            pid = int((await kernel.run("import os\nprint(os.getpid())")).stdout)
            os.kill(pid, signal.SIGKILL)
            monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(server.runtime))
            with anyio.fail_after(30):
                while True:  # (gone once the kernel's process is reaped)
                    kept = wiring.load(str(server.root / NOTEBOOK))
                    assert kept is not None and kept.serving and kept.pid == pid, kept
                    if not kept.live:
                        break
                    await anyio.sleep(0.05)
            import socket

            with socket.socket() as squatter:  # a local process that took the dead kernel's port
                squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                squatter.bind(("127.0.0.1", kept.port))
                squatter.listen()
                squatter.setblocking(False)
                ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
                refused = await http.post(endpoint, json=ping)
                assert refused.status_code == 503 and refused.json()["error"]["message"] == NOT_SERVING
                with pytest.raises(BlockingIOError):
                    squatter.accept()  # nothing was forwarded to it (nor the kernel's old token)


async def test_a_notebook_outside_the_servers_root_is_not_reached(tmp_path):
    """The URL names a notebook under this Jupyter server's root. An encoded ``..`` (no client
    normalizes it away) must not reach a kernel that serves a notebook elsewhere, here one whose
    kernel another Jupyter server of the same user would have started: the runtime directory, and
    so fusion-nb's serving records, are per user, not per server."""
    outside = tmp_path / "elsewhere" / "secret.ipynb"
    outside.parent.mkdir()
    with jupyter_server(tmp_path) as server:
        env = {"JPY_SESSION_NAME": str(outside), "JUPYTER_RUNTIME_DIR": str(server.runtime)}
        kernel = await Kernel(env=env).start()
        http = httpx.AsyncClient(headers={"Authorization": f"token {TOKEN}"}, timeout=60)
        try:
            _, direct, token = await serve_shout(kernel)
            async with connect(direct, token) as client:  # it serves, on its own loopback URL
                assert (await client.call_tool("shout", {"text": "here"})).content[0].text == "HERE"
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            for path in ("..%2Felsewhere%2Fsecret.ipynb", "work%2F..%2F..%2Felsewhere%2Fsecret.ipynb"):
                refused = await http.post(f"{server.url}fusion/mcp/{path}", json=ping)
                assert refused.status_code == 404, (path, refused.status_code, refused.text[:200])
        finally:
            await http.aclose()
            await kernel.stop()


TOOLS = [
    '''%%fusion_tool f.mutation("billing.refund").with_string("id", "Invoice ID").interactive()
"""Refund an invoice after a person approves it."""
approved = read_input("confirm")
if approved is None:
    return require_input.elicit(f"Refund {input.id}?", {"confirm": ask.boolean("Approve")}, state={"id": input.id})
return f"refunded {read_request_state()['id']}" if approved else "declined"''',
    '''%%fusion_tool f.query("stall")
"""Wait until cancelled."""
probe["state"] = "entered"
try:
    await anyio.sleep(3600)
finally:
    probe["state"] = "cleaned"''',
    '''%%fusion_tool f.action("report").with_number("seconds").task(poll_interval=0.2)
"""A job run as a task."""
await anyio.sleep(input.seconds)
return f"report after {input.seconds} s"''',
    '''%%fusion_prompt review
"""Review a function."""
Review {function}.''',
]


async def wait_for_state(kernel: Kernel, state: str) -> None:
    with anyio.fail_after(30):
        while (await kernel.run("print(probe.get('state'))")).stdout.strip() != state:
            await anyio.sleep(0.05)


async def test_elicitation_cancel_tasks_resources_and_prompts_through_the_jupyter_server(tmp_path):
    from mcp import types

    from fusion_nb.mcp.tasks_client import TasksExtension

    async def approve(context, params):  # type: ignore[no-untyped-def]
        return types.ElicitResult(action="accept", content={"confirm": True})

    with jupyter_server(tmp_path) as server:
        endpoint = server.endpoint()
        http = httpx.AsyncClient(headers={"Authorization": f"token {TOKEN}"}, timeout=60)
        async with http, notebook_kernel(http, server) as (_, kernel):
            await kernel.run("%load_ext fusion_nb\nimport anyio\nprobe = {}\nscores = [1, 2, 3]")
            for cell in TOOLS:
                await kernel.run(cell)
            await kernel.run("%fusion share scores")
            await kernel.run("%fusion serve")
            for mode in ("legacy", "auto"):
                async with connect(endpoint, TOKEN, mode=mode, elicitation_callback=approve) as client:
                    refund = await client.call_tool("billing.refund", {"id": "inv-7"})
                    assert refund.content[0].text == "refunded inv-7", (mode, refund)
                    (read,) = (await client.read_resource("nb://vars/scores")).contents
                    assert "1" in read.text and "3" in read.text, read
                    got = await client.get_prompt("review", {"function": "f"})
                    assert got.messages[0].content.text == "Review f."
                    await kernel.run("probe.clear()")
                    async with anyio.create_task_group() as group:
                        group.start_soon(lambda: client.call_tool("stall", {}))
                        await wait_for_state(kernel, "entered")
                        group.cancel_scope.cancel()
                    await wait_for_state(kernel, "cleaned")
            tasks = TasksExtension()
            async with connect(endpoint, TOKEN, mode="auto", extensions=[tasks], read_timeout_seconds=2) as client:
                answer = await client.call_tool("report", {"seconds": 3})
            assert answer.content[0].text == "report after 3.0 s"
            assert "working" in tasks.seen and tasks.seen[-1] == "completed", tasks.seen
            await kernel.run("%fusion stop")
