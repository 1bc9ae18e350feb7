"""The configs ``fusion-nb`` prints work as pasted into a desktop host: launched with an empty
environment from ``/`` (stdio entries), or connected with exactly the printed URL and headers."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from desktop_host import VSCODE, entry_of, host_client
from served import DATA, REPO, cli_env, run_cli, served

from fusion_nb.cli.check import STDIO_HEADING

pytestmark = pytest.mark.anyio

PRINTED = r"inspector@\S+ --cli .* --method tools/list"  # the last line of the printed configs
QUICKSTART = REPO / "notebooks" / "01-quickstart.ipynb"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_stdio_config_check_prints_runs_in_an_empty_environment_from_root(mode):
    done = await anyio.to_thread.run_sync(lambda: run_cli("check", str(QUICKSTART.relative_to(REPO))))
    assert done.returncode == 0, done.stderr
    entry = entry_of(done.stdout, STDIO_HEADING)
    assert entry["args"][-1] == str(QUICKSTART), "the source is absolute: the host starts elsewhere"
    async with host_client(entry, mode) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"greet", "math.add"}
        assert (await client.call_tool("math.add", {"a": 40})).structured_content == {"result": 42}
    as_json = json.loads((await anyio.to_thread.run_sync(lambda: run_cli("check", "--json", str(QUICKSTART)))).stdout)
    assert as_json["client_config"] == {"mcpServers": {"fusion-nb": entry}}


async def test_a_module_source_in_the_working_folder_gets_it_on_pythonpath():
    """``fusion-nb check mymodule`` in mymodule's folder: the host, started in ``/``, must find it too."""
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            [sys.executable, "-m", "fusion_nb", "check", "service_app"],
            cwd=DATA,
            env=cli_env(PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=120,
        )
    )
    assert done.returncode == 0, done.stderr
    entry = entry_of(done.stdout, STDIO_HEADING)
    assert entry["env"] == {"PYTHONPATH": str(DATA)} and entry["args"][-1] == "service_app"
    async with host_client(entry) as client:
        assert (await client.call_tool("echo", {"text": "found"})).structured_content["text"] == "found"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK's HTTP client on trio: see test_cli_serve
async def test_http_serving_prints_configs_that_work_as_pasted():
    async with served("service_app", ready=PRINTED) as server:
        printed = "\n".join(server.lines)
        assert "A restart (or serving again) changes the port and the token" in printed
        claude = entry_of(printed)
        assert claude["env"] == {"FUSION_NB_TOKEN": server.token}, "the token is not on the command line"
        for entry in (claude, entry_of(printed, VSCODE)):
            async with host_client(entry) as client:
                assert (await client.call_tool("echo", {"text": "pasted"})).structured_content["text"] == "pasted"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_chosen_token_stays_out_of_the_log_and_a_fixed_port_and_token_survive_a_restart():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chosen = "fixed-token-0123456789"
    async with served("service_app", "--port", str(port), "--token", chosen, ready=PRINTED) as server:
        printed = "\n".join(server.lines)
        assert chosen not in printed, "an operator's token never reaches a service log"
        assert "Port and token are fixed" in printed and "Bearer token: TOKEN (hidden;" in printed
        claude = entry_of(printed)
        assert claude["env"] == {"FUSION_NB_TOKEN": "TOKEN"}
        claude["env"] = {"FUSION_NB_TOKEN": chosen}  # what the operator puts in
        async with host_client(claude) as client:
            assert (await client.call_tool("echo", {"text": "x"})).structured_content["text"] == "x"


def test_a_generated_token_never_begins_with_a_dash(monkeypatch):
    """``--token -x...`` reads as a missing value: a fresh token must be safe to pass on a command line."""
    import secrets

    from fusion_nb.mcp.client_config import new_token

    draws = iter(["-starts-with-a-dash", "_fine-token"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda size: next(draws))
    assert new_token() == "_fine-token"
    monkeypatch.undo()
    assert all(not new_token().startswith("-") for _ in range(2000))
