"""A notebook's serving record: one port and token per notebook, kept across kernel restarts.

``%fusion serve`` writes it and the Jupyter server extension reads it, so it sits outside
both layers and imports only the standard library and ``jupyter_core``. It lives in Jupyter's
runtime directory (``jupyter_core.paths.jupyter_runtime_dir()``, already owner-only), in a
``0600`` file named by a hash of the notebook's absolute path: a pasted client config keeps
working when the kernel restarts and the notebook is served again.

The kernel knows its notebook through ``JPY_SESSION_NAME``, which jupyter_server sets in
every kernel's environment (``SessionManager.get_kernel_env``: the notebook's absolute OS
path when the session has a name, as JupyterLab and Notebook 7 give it; ipykernel copies it
into IPython's ``__session__``). Outside a Jupyter server it is unset and nothing is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Wiring", "forget_serving", "load", "notebook_path", "record_path", "save"]

#: the environment variable jupyter_server sets in a kernel's environment to its notebook's path
SESSION_ENV = "JPY_SESSION_NAME"


@dataclass(frozen=True)
class Wiring:
    """Where a notebook's kernel serves: ``port`` and bearer ``token``; ``serving`` while it does.

    ``pid`` is the serving kernel's process: a kernel killed outright (SIGKILL, the OOM killer)
    never says it stopped, so readers check it is alive (``live``) before trusting ``serving``.
    """

    notebook: str
    port: int
    token: str | None
    serving: bool = False
    pid: int | None = None

    @property
    def live(self) -> bool:
        """Serving, by a kernel process that still exists."""
        if not self.serving:
            return False
        if self.pid is None:
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # (another user's process: it exists)
            return True
        return True


def notebook_path() -> str | None:
    """The served notebook's absolute path (from ``JPY_SESSION_NAME``), or None outside Jupyter."""
    name = os.environ.get(SESSION_ENV)
    return os.path.abspath(name) if name else None


def runtime_dir() -> Path:
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir())


def record_path(notebook: str) -> Path:
    """The record's file for ``notebook`` (an absolute path), in Jupyter's runtime directory."""
    digest = hashlib.sha256(os.path.abspath(notebook).encode()).hexdigest()[:24]
    return runtime_dir() / f"fusion-nb-serve-{digest}.json"


def load(notebook: str) -> Wiring | None:
    """The record kept for ``notebook``, or None (none yet, unreadable, or another notebook's)."""
    try:
        data = json.loads(record_path(notebook).read_text())
        wiring = Wiring(
            notebook=str(data["notebook"]),
            port=int(data["port"]),
            token=data["token"] if isinstance(data["token"], str) else None,
            serving=bool(data.get("serving")),
            pid=data["pid"] if isinstance(data.get("pid"), int) else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return wiring if wiring.notebook == os.path.abspath(notebook) and 0 < wiring.port < 65536 else None


def save(wiring: Wiring) -> Path:
    """Write ``wiring`` atomically, owner-only (``0600`` from creation: the token is never readable to others)."""
    path = record_path(wiring.notebook)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(asdict(wiring), out)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    return path


def forget_serving(notebook: str) -> None:
    """Mark ``notebook`` as not serving (port and token stay for the next ``%fusion serve``)."""
    kept = load(notebook)
    if kept is not None and kept.serving:
        save(Wiring(kept.notebook, kept.port, kept.token, serving=False))
