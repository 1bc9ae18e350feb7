"""%fusion serve from a real kernel, called from this process with the SDK client on both eras."""

import contextlib
import re

import anyio
import httpx
import pytest
from desktop_host import VSCODE, entry_of, host_client
from kernel_harness import serve_shout
from mcp import types

from fusion_nb.mcp import connect as connect_http

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]


@contextlib.asynccontextmanager
async def connect(url, token, mode, **options):
    async with connect_http(url, token, mode=mode, **options) as client:
        yield client


async def test_serve_prints_config_and_serves_both_eras(kernel):
    served, url, token = await serve_shout(kernel)
    assert url.startswith("http://127.0.0.1:") and len(token) >= 32
    for snippet in (
        '"mcpServers"',
        '"servers"',
        "npx -y @modelcontextprotocol/inspector@2.12.0 --cli",
        f"Authorization: Bearer {token}",
    ):
        assert snippet in served.stdout
    for mode in ("legacy", "auto"):
        progress = []

        async def on_progress(value, total, message, progress=progress):
            progress.append((value, message))

        async with connect(url, token, mode) as client:
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["shout"] and tools[0].annotations.read_only_hint is True
            result = await client.call_tool("shout", {"text": "hi"}, progress_callback=on_progress)
            assert result.content[0].text == "HI" and not result.is_error
        assert progress and progress[-1][0] == 50, (mode, progress)
    async with httpx.AsyncClient() as http:
        denied = await http.post(url, json={}, headers={"Content-Type": "application/json"})
    assert denied.status_code == 401
    seen = await kernel.run("from fusion_nb.notebook import current_host\nprint(current_host().traffic.text('shout'))")
    lines = seen.stdout.splitlines()
    # each call is named by the client that made it (the SDK's Python client declares itself "mcp <version>")
    caller = r"shout \(mcp [\w.+-]+\)"
    assert any(re.search(caller + r" → tools/call \+0 ms \{\"text\":\"hi\"\}", line) for line in lines), lines
    assert any(re.search(caller + r" ← notifications/progress .*50% half", line) for line in lines), lines
    assert any(re.search(caller + r" ← result \+\d+ ms", line) for line in lines), lines
    status = await kernel.run("%fusion status")
    assert f"serving at {url}" in status.stdout
    assert status.texts()[-1].startswith("fusion-nb: 2 calls in the last minute, 0 failed"), status.texts()
    listeners = await kernel.run("import fusion_nb\nprint(len(fusion_nb.default_app._call_listeners))")
    await kernel.run("%fusion stop")
    after = await kernel.run("print(len(fusion_nb.default_app._call_listeners))")
    assert int(after.stdout) == int(listeners.stdout) - 1, "stopping closes the activity panel"
    with pytest.raises(httpx.ConnectError):
        with anyio.fail_after(10):
            while True:  # uvicorn closes its socket on its next tick
                try:
                    async with httpx.AsyncClient() as http:
                        await http.post(url, json={}, headers={"Content-Type": "application/json"})
                except httpx.ReadError:
                    pass  # a connection accepted just as the server shut down: not closed yet, ask again
                await anyio.sleep(0.05)


async def test_redefining_a_tool_notifies_connected_clients(kernel):
    _, url, token = await serve_shout(kernel)
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connect(url, token, "legacy", message_handler=on_message) as client:
        await client.list_tools()
        await kernel.run(
            '%%fusion_tool f.query("shout").with_string("text").describe("Louder.")\nreturn input.text.upper() + "!"'
        )
        with anyio.fail_after(20):
            await changed.wait()
        tools = (await client.list_tools()).tools
        assert tools[0].description == "Louder."
        assert (await client.call_tool("shout", {"text": "hi"})).content[0].text == "HI!"
    async with connect(url, token, "auto") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            await kernel.run('%%fusion_tool f.query("whisper")\nreturn "psst"')
            with anyio.fail_after(20):
                event = await subscription.__anext__()
        assert type(event).__name__ == "ToolsListChanged"
    await kernel.run("%fusion stop")


async def test_the_interrupt_button_still_works_while_serving(kernel):
    """uvicorn runs with its signal capture off: SIGINT still reaches the kernel, and
    neither an idle interrupt nor a cell's interrupt stops the server."""
    _, url, token = await serve_shout(kernel)
    await kernel.interrupt()  # idle: nothing to cancel, and the server must not exit
    cell = kernel.submit("import asyncio\nprint('waiting', flush=True)\nawait asyncio.sleep(3600)")
    await kernel.wait_until(lambda: "waiting" in cell.stdout, what="the cell to start")
    await kernel.interrupt()
    await kernel.finished(cell, timeout=20)
    assert cell.error["ename"] in ("CancelledError", "KeyboardInterrupt")
    await kernel.run("await asyncio.sleep(0.5)")  # a server told to exit would be gone by now
    async with connect(url, token, "legacy") as client:
        assert (await client.call_tool("shout", {"text": "still here"})).content[0].text == "STILL HERE"
    await kernel.run("%fusion stop")


WAIT_FOR_PORT = """
import asyncio, socket
for _ in range(400):
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", {port}))
            break
        except OSError:
            pass
    await asyncio.sleep(0.05)
"""


async def test_the_printed_configs_work_as_pasted_into_a_desktop_host(kernel):
    """Claude Desktop's entry launched as a host does (empty environment, cwd /), VS Code's by its URL and headers."""
    served, url, token = await serve_shout(kernel)
    assert "A restart (or serving again) changes the port and the token" in served.stdout
    assert "%fusion serve --port" in served.stdout and "FUSION_NB_TOKEN" in served.stdout
    claude = entry_of(served.stdout)
    assert claude["args"] == ["connect", url] and claude["env"] == {"FUSION_NB_TOKEN": token}
    vscode = entry_of(served.stdout, VSCODE)
    assert vscode == {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}
    for entry in (claude, vscode):
        for mode in ("legacy", "auto"):
            async with host_client(entry, mode) as client:
                assert (await client.call_tool("shout", {"text": "pasted"})).content[0].text == "PASTED"
    await kernel.run("%fusion stop")


async def test_a_fixed_port_and_token_and_a_hidden_token(kernel):
    """``--port`` with ``--token`` (or ``FUSION_NB_TOKEN``) survive a restart; ``--hide-token`` prints TOKEN."""
    await serve_shout(kernel)
    await kernel.run("%fusion stop")
    port = await kernel.run("import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0))\nprint(s.getsockname()[1])")
    port = int(port.stdout)
    await kernel.run("s.close()\nimport os\nos.environ['FUSION_NB_TOKEN'] = 'chosen-token-0123456789'")
    fixed = await kernel.run(f"%fusion serve --port {port} --hide-token")
    assert "Port and token are fixed" in fixed.stdout and "chosen-token" not in fixed.stdout
    assert "Bearer token: TOKEN (hidden" in fixed.stdout
    claude = entry_of(fixed.stdout)
    assert claude["env"] == {"FUSION_NB_TOKEN": "TOKEN"} and claude["args"] == [
        "connect",
        f"http://127.0.0.1:{port}/mcp",
    ]
    claude["env"] = {"FUSION_NB_TOKEN": "chosen-token-0123456789"}  # what the person pastes in
    async with host_client(claude) as client:
        assert (await client.call_tool("shout", {"text": "fixed"})).content[0].text == "FIXED"
    await kernel.run("%fusion stop")
    await kernel.run(WAIT_FOR_PORT.format(port=port))  # %fusion stop lets uvicorn close its socket on its next tick
    again = await kernel.run(f"%fusion serve --port {port} --token other-token-0123456789")
    assert "Bearer token: other-token-0123456789" in again.stdout
    await kernel.run("%fusion stop")


async def test_a_notebook_served_again_keeps_its_port_and_token(tmp_path, monkeypatch):
    """Under a Jupyter server (``JPY_SESSION_NAME``) a new kernel of the same notebook serves on the same
    port with the same token, kept owner-only in Jupyter's runtime directory; ``--new-token`` rotates it."""
    from kernel_harness import Kernel

    from fusion_nb import wiring

    notebook = tmp_path / "analysis.ipynb"
    env = {"JPY_SESSION_NAME": str(notebook), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    served = []
    for _ in range(2):  # the second kernel is the first one restarted
        kernel = await Kernel(env).start()
        try:
            printed, url, token = await serve_shout(kernel)
            assert "kept for this notebook" in printed.stdout, printed.stdout
            async with connect(url, token, "auto") as client:
                assert (await client.call_tool("shout", {"text": "again"})).content[0].text == "AGAIN"
            served.append((url, token))
            if len(served) == 2:
                await kernel.run("%fusion stop")
                await kernel.run(WAIT_FOR_PORT.format(port=int(url.rsplit(":", 1)[1].split("/")[0])))
                rotated = await kernel.run("%fusion serve --new-token")
                new_token = re.search(r"Bearer token: (\S+)", rotated.stdout).group(1)
                assert f"MCP endpoint: {url}" in rotated.stdout and new_token != token
                async with httpx.AsyncClient() as http:
                    old = await http.post(url, json={}, headers={"Authorization": f"Bearer {token}"})
                assert old.status_code == 401
        finally:
            await kernel.stop()
    assert served[0] == served[1]
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", env["JUPYTER_RUNTIME_DIR"])
    assert wiring.record_path(str(notebook)).stat().st_mode & 0o777 == 0o600
    kept = wiring.load(str(notebook))
    assert kept is not None and kept.token == new_token and kept.serving
