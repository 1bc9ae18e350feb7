"""Fresh environments built the way users build them: a clean copy of the repository, an
interpreter of a given version, a kernel of that environment running cells.

Shared by the packaging test (the built wheel in a fresh venv) and the Binder simulation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))


def python_of(version: str) -> Path | None:
    """An interpreter of ``X.Y`` on this machine (pyenv's newest, else one on PATH), or None."""
    candidates = sorted(PYENV_ROOT.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(Path(on_path))
    return candidates[0] if candidates else None


def find_python(version: str) -> Path:
    """``python_of(version)``, or a test failure naming what is missing."""
    found = python_of(version)
    if found is None:
        pytest.fail(
            f"this test needs Python {version}, which this machine lacks (looked in "
            f"{PYENV_ROOT}/versions and on PATH): install it (pyenv install {version})"
        )
    return found


def clean_copy(destination: Path) -> Path:
    """The repository as a clone receives it: tracked and new files, nothing git ignores."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def install_kernel(python: Path, prefix: Path, name: str) -> Path:
    """Install ``python``'s ipykernel as kernelspec ``name`` under ``prefix``; returns its JUPYTER_PATH."""
    subprocess.run(
        [str(python), "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", name],
        check=True,
        capture_output=True,
    )
    return prefix / "share" / "jupyter"


def run_in_kernel(jupyter_path: Path, name: str, cwd: Path, cells: list[str]) -> list[str]:
    """Run ``cells`` in kernelspec ``name`` (under ``jupyter_path``) started in ``cwd``.

    Returns each cell's printed text and result; a cell that fails fails the test.
    """
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    manager = KernelManager(
        kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(jupyter_path / "kernels")])
    )
    manager.start_kernel(cwd=str(cwd), env={**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"})
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        texts = []
        for cell in cells:
            outputs: list[dict] = []
            reply = client.execute_interactive(cell, timeout=60, output_hook=outputs.append)
            errors = [o["content"] for o in outputs if o["msg_type"] == "error"]
            assert reply["content"]["status"] == "ok", f"{cell!r} failed in kernel {name}: {errors}"
            texts.append(
                "".join(
                    o["content"].get("text", "") or o["content"].get("data", {}).get("text/plain", "")
                    for o in outputs
                    if o["msg_type"] in ("stream", "execute_result")
                )
            )
        return texts
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
