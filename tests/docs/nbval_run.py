"""One way to run a notebook under nbval in a subprocess, for the notebook and Binder tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

SANITIZE = Path(__file__).resolve().parents[1] / "notebooks_support" / "sanitize.cfg"


def run_nbval(
    notebook: Path,
    *,
    kernel: str | None = None,
    env: Mapping[str, str] | None = None,
    sanitize: Path = SANITIZE,
) -> subprocess.CompletedProcess[str]:
    """``pytest --nbval`` on ``notebook``: in this environment's kernel, or the kernelspec named ``kernel``.

    ``sanitize`` is the nbval sanitize file (this checkout's, unless a test runs another copy).
    """
    chosen = ["--nbval-kernel-name", kernel] if kernel is not None else ["--nbval-current-env"]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "--rootdir",
            str(notebook.parent),
            "--nbval",
            *chosen,
            "--nbval-sanitize-with",
            str(sanitize),
            str(notebook),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=notebook.parent,
        env=dict(env) if env is not None else None,
    )
