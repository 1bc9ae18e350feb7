"""The request-state key workers share, so any of them can open state another one sealed.

2026-era input rounds carry their state through the client, sealed with this key
(AES-GCM; see docs/mcp.md). One process can make its own; several behind one
endpoint need the same one: ``FUSION_NB_STATE_KEY`` or a key file, created with a
random key (mode 0600) the first time it is named, then read by every worker.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .errors import CliError

STATE_KEY_ENV = "FUSION_NB_STATE_KEY"
MIN_KEY_CHARS = 32


def resolve_state_key(path: Path | None, *, create: bool) -> str | None:
    """The key from ``path`` (created when missing), else ``$FUSION_NB_STATE_KEY``, else None.

    ``create`` also generates a key when neither is given (the caller shares it).
    """
    if path is not None:
        return _read_or_create(path)
    key = os.environ.get(STATE_KEY_ENV)
    if key:
        return _checked(key.strip(), STATE_KEY_ENV)
    return secrets.token_urlsafe(48) if create else None


def _read_or_create(path: Path) -> str:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise CliError(f"cannot create the state key file {path}: {exc.strerror or exc}") from None
    else:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(48) + "\n")
    try:
        key = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CliError(f"cannot read the state key file {path}: {exc.strerror or exc}") from None
    return _checked(key, str(path))


def _checked(key: str, where: str) -> str:
    if len(key) < MIN_KEY_CHARS:
        raise CliError(f"the request-state key in {where} is {len(key)} characters; use at least {MIN_KEY_CHARS}")
    return key
