"""``%fusion serve --register``: the notebook's endpoint in the MCP settings file jupyter-ai 3 reads.

jupyter-ai 3 gives the agents it runs in JupyterLab (Claude Code and others over ACP) the servers
listed in ``.jupyter/mcp_settings.json`` (``jupyter_ai_persona_manager``'s
``PersonaManager.get_mcp_settings``): the nearest ``.jupyter`` directory found walking up from the
chat file's directory, stopping at the Jupyter server's root. Its shape (``McpSettings``)::

    {"mcp_servers": [{"type": "http", "name": "...", "url": "...",
                      "headers": [{"name": "...", "value": "..."}]},
                     {"name": "...", "command": "...", "args": [...], "env": [...]}]}

We add one ``http`` entry to the nearest ``.jupyter`` above the notebook (else a new one at the
server's root, which every chat below the root finds), and remove exactly that entry (by its URL)
on ``%fusion stop`` or when the kernel's process ends. Other entries and keys are kept as they
are; the file keeps its permission bits (a new one is ``0600``: it holds a credential). An edit
holds an exclusive lock on the directory and replaces the file by rename, so two kernels
registering at once both land and a reader never sees half a file.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["SettingsError", "entry_name", "register", "settings_file", "unregister"]

FILE = "mcp_settings.json"


class SettingsError(Exception):
    """The settings file cannot be edited safely (one sentence saying why)."""


def settings_file(start: str, root: str | None) -> Path:
    """``.jupyter/mcp_settings.json`` in the nearest ``.jupyter`` from ``start`` up to ``root``
    (as jupyter-ai looks for it), else in ``root`` (or ``start``) itself."""
    here, top = Path(start).resolve(), Path(root).resolve() if root else None
    while here != here.parent:
        if (here / ".jupyter").is_dir():
            return here / ".jupyter" / FILE
        if here == top:
            break
        here = here.parent
    return (top or Path(start).resolve()) / ".jupyter" / FILE


def entry_name(notebook: str) -> str:
    """``fusion-nb-<notebook's stem>``: agents prefix tool names with it, so only ``[A-Za-z0-9_-]``."""
    return "fusion-nb-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", Path(notebook).stem).strip("-") or "notebook")


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on ``directory`` (other kernels editing the same file wait)."""
    try:
        import fcntl
    except ImportError:  # Windows: the rename still keeps readers whole
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _edit(path: Path, change: Any) -> bool:
    """Apply ``change(servers) -> bool`` to the file's ``mcp_servers`` under the lock; write if it changed."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _locked(path.parent):
        try:
            mode = path.stat().st_mode & 0o777
            settings = json.loads(path.read_text() or "{}")
        except FileNotFoundError:
            mode, settings = 0o600, {}
        except (OSError, ValueError) as failed:
            raise SettingsError(f"cannot read {path} ({failed}); fix or remove it") from None
        servers = settings.setdefault("mcp_servers", []) if isinstance(settings, dict) else None
        if not isinstance(servers, list):
            raise SettingsError(f"{path} is not a JSON object with an mcp_servers list; fix or remove it")
        if not change(servers):
            return False
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            os.fchmod(fd, mode)  # exactly the old bits, whatever the umask
            with os.fdopen(fd, "w") as out:
                json.dump(settings, out, indent=2)
                out.write("\n")
            os.replace(partial, path)
        except BaseException:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        return True


#: (file, url) this process registered, removed by ``unregister()`` or at exit
_registered: tuple[Path, str] | None = None
_exit_hook = False


def register(path: Path, name: str, url: str, headers: dict[str, str]) -> str:
    """Add (or refresh) the ``http`` entry for ``url``; returns the name it got (unique in the file)."""
    global _registered, _exit_hook

    def add(servers: list[Any]) -> bool:
        nonlocal name
        servers[:] = [s for s in servers if not (isinstance(s, dict) and s.get("url") == url)]
        if any(isinstance(s, dict) and s.get("name") == name for s in servers):
            name = f"{name}-{hashlib.sha256(url.encode()).hexdigest()[:6]}"  # another notebook of that name
        entry = {"type": "http", "name": name, "url": url}
        servers.append({**entry, "headers": [{"name": k, "value": v} for k, v in headers.items()]})
        return True

    _edit(path, add)
    if not _exit_hook:
        atexit.register(_at_exit)  # the kernel's end (shutdown, restart) removes it too
        _exit_hook = True
    _registered = (path, url)
    return name


def unregister() -> Path | None:
    """Remove this process's entry (others untouched); the file it was in, or None if none was."""
    global _registered
    if _registered is None:
        return None
    path, url = _registered
    _registered = None

    def remove(servers: list[Any]) -> bool:
        kept = [s for s in servers if not (isinstance(s, dict) and s.get("url") == url)]
        changed = len(kept) != len(servers)
        servers[:] = kept
        return changed

    with contextlib.suppress(FileNotFoundError):
        _edit(path, remove)
    return path


def _at_exit() -> None:
    with contextlib.suppress(SettingsError, OSError):
        unregister()
