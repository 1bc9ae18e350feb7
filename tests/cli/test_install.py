"""``fusion-nb install HOST SOURCE``: each host's own file, in a temporary home, launched as that host launches it.

The written entry is read back in the host's shape (``cmd``/``envs`` for Goose, ``httpUrl``
for Gemini CLI, ...) and started under ``env -i`` in ``/`` (desktop_host), or connected to
with exactly its URL and headers; it must answer MCP. Each run's time is printed (target
< 1 s per host; not asserted: the machine is shared).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from desktop_host import host_client
from served import served

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "notebooks" / "01-quickstart.ipynb"

# host -> (its file under HOME, the key holding its servers)
FILES = {
    "claude-code": (".claude.json", "mcpServers"),
    "claude-desktop": (".config/Claude/claude_desktop_config.json", "mcpServers"),
    "vscode": (".config/Code/User/mcp.json", "servers"),
    "cursor": (".cursor/mcp.json", "mcpServers"),
    "gemini-cli": (".gemini/settings.json", "mcpServers"),
    "goose": (".config/goose/config.yaml", "extensions"),
}

# the entries are launched with the SDK's client; the subject is the file written, so asyncio only
on_asyncio = pytest.mark.parametrize("anyio_backend", ["asyncio"])


def install(home: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """``fusion-nb install ARGS`` as a person runs it: the venv's script, HOME set, from the repository."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FUSION_NB_", "XDG_"))}
    env["HOME"] = str(home)
    if token is not None:
        env["FUSION_NB_TOKEN"] = token
    script = Path(sys.executable).with_name("fusion-nb")
    started = time.monotonic()
    done = subprocess.run(
        [str(script), "install", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    print(f"fusion-nb install {' '.join(args[:1])}: {time.monotonic() - started:.2f} s")
    return done


def read(path: Path) -> dict[str, Any]:
    text = path.read_text()
    return yaml.safe_load(text) if path.suffix == ".yaml" else json.loads(text)


def as_launched(host: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The host's entry as the host reads it: a stdio launch or a URL with headers."""
    if host == "goose":
        if entry["type"] == "streamable_http":
            return {"url": entry["uri"], "headers": entry["headers"]}
        return {"command": entry["cmd"], "args": entry["args"], "env": entry["envs"]}
    if "httpUrl" in entry:
        return {"url": entry["httpUrl"], "headers": entry["headers"]}
    if "url" in entry:
        return {"url": entry["url"], "headers": entry["headers"]}
    return {"command": entry["command"], "args": entry["args"], "env": entry.get("env", {})}


async def call_add(entry: dict[str, Any]) -> str:
    async with host_client(entry) as client:
        result = await client.call_tool("math.add", {"a": 20, "b": 22})
        return str(result.content[0].text)  # type: ignore[union-attr]


@pytest.mark.anyio
@on_asyncio
@pytest.mark.parametrize("host", list(FILES))
async def test_each_hosts_file_is_written_and_its_entry_answers_as_that_host_launches_it(host, tmp_path):
    relative, key = FILES[host]
    config = tmp_path / relative
    done = await anyio.to_thread.run_sync(lambda: install(tmp_path, host, str(QUICKSTART)))
    assert done.returncode == 0, done.stderr
    assert f"registered '01-quickstart' in {config}" in done.stderr
    assert config.stat().st_mode & 0o777 == 0o600, "a new config is owner-only"
    entry = read(config)[key]["01-quickstart"]
    launched = as_launched(host, entry)
    assert launched["command"].startswith("/") and launched["args"][-1] == str(QUICKSTART)
    assert await call_add(launched) == "42"


@pytest.mark.anyio
@on_asyncio
@pytest.mark.parametrize("host", list(FILES))
async def test_a_url_is_registered_with_its_token_out_of_the_command_line(host, tmp_path):
    async with served("service_app") as server:
        done = await anyio.to_thread.run_sync(
            lambda: install(tmp_path, host, "--url", server.url, "--name", "svc", token=server.token)
        )
        assert done.returncode == 0, done.stderr
        relative, key = FILES[host]
        entry = as_launched(host, read(tmp_path / relative)[key]["svc"])
        if "url" in entry:
            assert entry == {"url": server.url, "headers": {"Authorization": f"Bearer {server.token}"}}
        else:  # Claude Desktop starts stdio servers only: the bridge, its token in env
            assert entry["args"][-2:] == ["connect", server.url]
            assert entry["env"] == {"FUSION_NB_TOKEN": server.token}
        async with host_client(entry) as client:
            assert (await client.call_tool("echo", {"text": "reached"})).structured_content["text"] == "reached"


def test_twice_leaves_one_entry_and_other_servers_and_keys_untouched(tmp_path):
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    theirs = {"theme": "dark", "mcpServers": {"other": {"command": "/bin/other", "args": ["x"]}}}
    config.write_text(json.dumps(theirs))
    config.chmod(0o640)
    first = install(tmp_path, "cursor", str(QUICKSTART))
    assert first.returncode == 0, first.stderr
    after_first = config.read_text()
    assert json.loads((config.parent / "mcp.json.fusion-nb-backup").read_text()) == theirs
    second = install(tmp_path, "cursor", str(QUICKSTART))
    assert "kept (unchanged) '01-quickstart'" in second.stderr
    assert config.read_text() == after_first
    written = json.loads(after_first)
    assert written["theme"] == "dark" and written["mcpServers"]["other"] == theirs["mcpServers"]["other"]
    assert list(written["mcpServers"]) == ["other", "01-quickstart"]
    assert config.stat().st_mode & 0o777 == 0o640, "an existing file keeps its mode"

    renamed = install(tmp_path, "cursor", str(QUICKSTART), "--name", "quick")
    assert renamed.returncode == 0
    assert list(json.loads(config.read_text())["mcpServers"]) == ["other", "01-quickstart", "quick"]


@pytest.mark.parametrize(("host", "broken"), [("vscode", '{"servers": {'), ("goose", "extensions: [unclosed\n")])
def test_a_file_that_does_not_parse_is_refused_in_one_sentence_and_left_as_it_was(host, broken, tmp_path):
    config = tmp_path / FILES[host][0]
    config.parent.mkdir(parents=True)
    config.write_text(broken)
    done = install(tmp_path, host, str(QUICKSTART))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    kind = "YAML" if host == "goose" else "JSON"
    assert line.startswith(f"fusion-nb: error: {config}: is not valid {kind} (") and "nothing was written" in line
    assert config.read_text() == broken
    assert sorted(p.name for p in config.parent.iterdir()) == [config.name]


def test_dry_run_writes_nothing_and_json_prints_the_entry(tmp_path):
    dry = install(tmp_path, "claude-desktop", str(QUICKSTART), "--dry-run")
    assert dry.returncode == 0 and "would write" in dry.stderr
    assert json.loads(dry.stdout)["mcpServers"]["01-quickstart"]["args"] == ["serve", str(QUICKSTART)]
    assert not (tmp_path / ".config").exists()
    printed = install(tmp_path, "json", str(QUICKSTART), "--name", "nb")
    assert json.loads(printed.stdout)["mcpServers"]["nb"]["command"].startswith("/")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["claude-code"], "give a SOURCE to serve over stdio or --url"),
        (["claude-code", "missing.ipynb"], "missing.ipynb: no such file"),
        (["claude-code", "not a module"], "is neither a .ipynb or .py path nor a module name"),
        (["cursor", str(QUICKSTART), "--name", "a b"], "--name takes letters, digits"),
        (["vscode", "--url", "ftp://x"], "--url must start with http:// or https://"),
    ],
)
def test_mistakes_are_one_sentence(args, says, tmp_path):
    done = install(tmp_path, *args)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert says in line
    assert not any(tmp_path.iterdir())
