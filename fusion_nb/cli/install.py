"""``fusion-nb install HOST SOURCE``: register a server with an agent host in one command.

Each host keeps its MCP servers in a file of its own, in a shape of its own (``HOSTS``). The
entry is what ``fusion-nb check`` prints (absolute commands: hosts activate no venv and
start in an unrelated folder), merged under its name: the file's other servers and keys are
never touched, running it twice leaves one entry, the previous file is kept as
``FILE.fusion-nb-backup`` and the new one replaces it atomically. A file that does not parse
is refused and left as it was. ``--url`` registers a running HTTP endpoint; its bearer token
comes from ``$FUSION_NB_TOKEN``, never from the command line (every user's ``ps`` shows it).
The source is not loaded (``fusion-nb check SOURCE`` does that), so this takes a fraction
of a second.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..mcp.client_config import TOKEN_ENV, launch, stdio_config
from .errors import CliError

HELP = "register a server with an agent host (Claude Code, Claude Desktop, VS Code, Cursor, ...)"

EPILOG = f"""\
hosts and the file each one reads:
  claude-code      ~/.claude.json (user scope; --config .mcp.json for a project)
  claude-desktop   claude_desktop_config.json in Claude's configuration folder
  vscode           mcp.json in VS Code's user folder (--config .vscode/mcp.json for a workspace)
  cursor           ~/.cursor/mcp.json
  gemini-cli       ~/.gemini/settings.json
  goose            ~/.config/goose/config.yaml
  json             writes nothing: prints the entry for any other host

examples:
  fusion-nb install claude-desktop notebooks/01-quickstart.ipynb
  fusion-nb install vscode tools.py:app --name my-tools
  FUSION_NB_TOKEN=... fusion-nb install claude-code --url http://127.0.0.1:8765/mcp
  fusion-nb install cursor mypackage.tools --dry-run

Restart the host (or reload its MCP servers) to load the entry. A token for --url is read
from ${TOKEN_ENV}.
"""

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Server:
    """What to register: a stdio launch (``command``, ``args``, ``env``) or an HTTP ``url``."""

    name: str
    stdio: dict[str, Any] | None = None
    url: str | None = None
    token: str | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def bridged(self) -> dict[str, Any]:
        """A stdio launch for hosts that start servers only: ``fusion-nb connect URL``, token in ``env``."""
        if self.stdio is not None:
            return self.stdio
        assert self.url is not None
        return launch(["connect", self.url], {TOKEN_ENV: self.token} if self.token else None)


def _with_env(entry: dict[str, Any], launch_: dict[str, Any]) -> dict[str, Any]:
    return {**entry, "env": launch_.get("env", {})}


def _claude_code(server: Server) -> dict[str, Any]:
    if server.url:
        return {"type": "http", "url": server.url, "headers": server.headers()}
    stdio = server.bridged()
    return _with_env({"type": "stdio", "command": stdio["command"], "args": stdio["args"]}, stdio)


def _claude_desktop(server: Server) -> dict[str, Any]:
    stdio = server.bridged()  # Claude Desktop starts config-file servers over stdio only
    return _with_env({"command": stdio["command"], "args": stdio["args"]}, stdio)


def _vscode(server: Server) -> dict[str, Any]:
    if server.url:
        return {"type": "http", "url": server.url, "headers": server.headers()}
    stdio = server.bridged()
    return _with_env({"type": "stdio", "command": stdio["command"], "args": stdio["args"]}, stdio)


def _cursor(server: Server) -> dict[str, Any]:
    if server.url:
        return {"url": server.url, "headers": server.headers()}
    return _claude_desktop(server)


def _gemini(server: Server) -> dict[str, Any]:
    if server.url:
        return {"httpUrl": server.url, "headers": server.headers()}
    return _claude_desktop(server)


def _goose(server: Server) -> dict[str, Any]:
    common = {"name": server.name, "enabled": True, "timeout": 300, "envs": {}, "env_keys": []}
    if server.url:
        return {**common, "type": "streamable_http", "uri": server.url, "headers": server.headers()}
    stdio = server.bridged()
    return {**common, "type": "stdio", "cmd": stdio["command"], "args": stdio["args"], "envs": stdio.get("env", {})}


def _config_home() -> Path:
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", Path.home() / "AppData" / "Roaming"))
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support"
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _xdg_home() -> Path:
    """Goose reads ``~/.config`` on macOS too (its docs), unlike Claude and VS Code."""
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", Path.home() / "AppData" / "Roaming")) / "Block"
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


@dataclass(frozen=True)
class Host:
    title: str
    path: Callable[[], Path]
    key: str  # the mapping of servers in the file
    entry: Callable[[Server], dict[str, Any]]
    yaml: bool = False


HOSTS: dict[str, Host] = {
    "claude-code": Host("Claude Code", lambda: Path.home() / ".claude.json", "mcpServers", _claude_code),
    "claude-desktop": Host(
        "Claude Desktop",
        lambda: _config_home() / "Claude" / "claude_desktop_config.json",
        "mcpServers",
        _claude_desktop,
    ),
    "vscode": Host("VS Code", lambda: _config_home() / "Code" / "User" / "mcp.json", "servers", _vscode),
    "cursor": Host("Cursor", lambda: Path.home() / ".cursor" / "mcp.json", "mcpServers", _cursor),
    "gemini-cli": Host("Gemini CLI", lambda: Path.home() / ".gemini" / "settings.json", "mcpServers", _gemini),
    "goose": Host(
        "Goose",
        lambda: _xdg_home() / ("goose/config/config.yaml" if sys.platform == "win32" else "goose/config.yaml"),
        "extensions",
        _goose,
        yaml=True,
    ),
}


def add_parser(commands: Any) -> None:
    """Register ``install`` and its options."""
    parser = commands.add_parser(
        "install",
        help=HELP,
        description="Register a fusion-nb server with an agent host, in the host's own configuration file.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("host", metavar="HOST", choices=[*HOSTS, "json"], help=f"one of: {', '.join([*HOSTS, 'json'])}")
    parser.add_argument(
        "source",
        metavar="SOURCE",
        nargs="?",
        help="a notebook (.ipynb), a .py file or a module (package.module[:app]), served over stdio",
    )
    parser.add_argument("--url", help=f"register a running Streamable HTTP endpoint instead (token: ${TOKEN_ENV})")
    parser.add_argument("--name", help="the server's name in the host (default: the source's file or module name)")
    parser.add_argument("--config", type=Path, metavar="FILE", help="write this file instead of the host's own")
    parser.add_argument("--dry-run", action="store_true", help="print the entry and the file; write nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    server = _server(args)
    if args.host == "json":  # the common shape: command/args/env, or type/url/headers
        entry = _vscode(server) if server.url else _claude_desktop(server)
        print(json.dumps({"mcpServers": {server.name: entry}}, indent=2))
        return 0
    host = HOSTS[args.host]
    path = Path(os.path.abspath(args.config or host.path()))
    entry = host.entry(server)
    if args.dry_run:
        print(f"{host.title}: would write {path}", file=sys.stderr)
        print(json.dumps({host.key: {server.name: entry}}, indent=2))
        return 0
    outcome = register(path, host, server.name, entry)
    print(f"{host.title}: {outcome} {server.name!r} in {path}; restart {host.title} to load it.", file=sys.stderr)
    return 0


def _server(args: argparse.Namespace) -> Server:
    if (args.source is None) == (args.url is None):
        raise CliError("give a SOURCE to serve over stdio or --url for a running HTTP endpoint (one of the two)")
    name = args.name
    if args.url is not None:
        if not args.url.startswith(("http://", "https://")):
            raise CliError(f"--url must start with http:// or https://, got {args.url[:200]!r}")
        return Server(_valid_name(name or "fusion-nb"), url=args.url, token=os.environ.get(TOKEN_ENV) or None)
    location = _checked_source(args.source)
    stem = Path(location).stem if location.endswith((".ipynb", ".py")) else location
    default = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem)
    (entry,) = stdio_config(args.source).get("mcpServers", {}).values()
    return Server(_valid_name(name or default.strip("-.") or "fusion-nb"), stdio=entry)


def _checked_source(source: str) -> str:
    """The source's file or module part, refused in one sentence when it names nothing."""
    from .source import split_source

    location, _ = split_source(source)
    if location.endswith((".ipynb", ".py")):
        if not Path(location).is_file():
            raise CliError(f"{location}: no such file (SOURCE is a .ipynb or .py file, or a module name)")
    elif not all(part.isidentifier() for part in location.split(".")):
        raise CliError(f"{source!r} is neither a .ipynb or .py path nor a module name like package.module[:app]")
    return location


def _valid_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise CliError(
            "--name takes letters, digits, '-', '_' and '.' (at most 64, starting with a letter or digit), "
            f"got {name[:80]!r}"
        )
    return name


def register(path: Path, host: Host, name: str, entry: dict[str, Any]) -> str:
    """Merge ``entry`` under ``host.key`` in ``path``: 'registered', 'updated' or 'kept (unchanged)'."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    config = _parse(text, path, host) if text.strip() else {}
    servers = config.setdefault(host.key, {})
    if not isinstance(servers, dict):
        raise CliError(f"{path}: its {host.key!r} is not a mapping of servers; fix it by hand (nothing was written)")
    if servers.get(name) == entry:
        return "kept (unchanged)"
    outcome = "updated" if name in servers else "registered"
    servers[name] = entry
    if text:
        backup = path.with_name(path.name + ".fusion-nb-backup")
        backup.write_text(text, encoding="utf-8")
        os.chmod(backup, path.stat().st_mode & 0o777)
    _write_atomically(path, _dump(config, host), text)
    return outcome


def _parse(text: str, path: Path, host: Host) -> dict[str, Any]:
    try:
        if host.yaml:
            import yaml

            config = yaml.safe_load(text)
        else:
            config = json.loads(text)
    except Exception as error:  # json.JSONDecodeError, yaml.YAMLError
        kind = "YAML" if host.yaml else "JSON"
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CliError(f"{path}: is not valid {kind} ({first[:200]}); fix or move it, nothing was written") from None
    if not isinstance(config, dict):
        raise CliError(f"{path}: holds no mapping at its top; fix or move it, nothing was written")
    return config


def _dump(config: dict[str, Any], host: Host) -> str:
    if host.yaml:
        import yaml

        return str(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def _write_atomically(path: Path, text: str, before: str) -> None:
    """Replace ``path`` in one step (a crash leaves the old file or the new one), keeping its mode.

    A new file is owner-only: an HTTP entry carries a bearer token.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if before and path.exists() else 0o600
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
