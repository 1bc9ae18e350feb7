"""Where the browser test finds chromium, and what happens when it cannot.

The browser test drives Debian's chromium through Playwright (Playwright cannot download
its own browsers here). A developer without chromium (macOS, no root for apt) gets a skip
that says why; CI (any non-empty ``CI``) must run the test, so there a missing chromium fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable

import pytest

DEBIAN_CHROMIUM = "/usr/bin/chromium"
MISSING = (
    "Debian's chromium is not installed (apt-get install -y chromium; `make test` installs it "
    "when run as root with apt)"
)


def find_chromium(candidates: Iterable[str | None] | None = None) -> str | None:
    """The first existing chromium executable: the one on PATH, then Debian's."""
    if candidates is None:
        candidates = (shutil.which("chromium"), DEBIAN_CHROMIUM)
    return next((path for path in candidates if path and os.access(path, os.X_OK)), None)


def chromium_or_skip(candidates: Iterable[str | None] | None = None) -> str:
    """chromium's path for Playwright's ``executable_path``; skip (or, under CI, fail) without it."""
    found = find_chromium(candidates)
    if found is not None:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{MISSING}; CI is set, so the browser test must run")
    pytest.skip(MISSING)
