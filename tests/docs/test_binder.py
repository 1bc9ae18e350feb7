"""Binder builds the way repo2docker builds it, and opens on a working notebook.

repo2docker reads ``binder/`` only: the Python comes from ``binder/runtime.txt`` (its own
default otherwise, older than ``requires-python``), then it runs ``pip install -r
binder/requirements.txt`` from the repository root and ``binder/postBuild``. The simulation
below does the same with the Python that runtime.txt names (from pyenv), on a clean copy of the
repository, then runs a kernel of that environment at the repository root (where Binder's
"New notebook" starts) and notebook 01 under nbval.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from nbval_run import run_nbval
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))


def runtime_python() -> str:
    """The ``X.Y`` that binder/runtime.txt names (``python-X.Y``, repo2docker's format)."""
    text = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(3\.\d+)", text)
    assert match, f"binder/runtime.txt must read python-3.Y (repo2docker's format), not {text!r}"
    return match.group(1)


def find_python(version: str) -> Path:
    """An interpreter of ``version`` on this machine (pyenv's, or one on PATH), or a clear failure."""
    candidates = sorted(PYENV_ROOT.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(Path(on_path))
    if not candidates:
        pytest.fail(
            f"binder/runtime.txt names Python {version}, which this machine lacks (looked in "
            f"{PYENV_ROOT}/versions and on PATH): install it (pyenv install {version}) to simulate Binder"
        )
    return candidates[0]


def clean_copy(destination: Path) -> Path:
    """The repository as repo2docker receives it: tracked and new files, nothing git ignores."""
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


def test_runtime_satisfies_requires_python():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    version = runtime_python()
    assert SpecifierSet(requires).contains(f"{version}.0"), f"runtime.txt's {version} is outside {requires}"


def test_the_binder_requirements_install_the_checkout_editable():
    lines = [line.split("#", 1)[0].strip() for line in (BINDER / "requirements.txt").read_text().splitlines()]
    assert "-e ." in lines, "Binder must run the repository's own files (see binder/README.md)"


def test_a_checkout_imports_its_widgets_without_any_install_metadata():
    """``python`` at the repository root imports the checkout's fusion_nb, whatever is installed.

    ``-S`` skips site-packages' .pth files (and so an editable install's finder); the
    dependencies stay importable through PYTHONPATH.
    """
    import sysconfig

    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    code = "import fusion_nb, fusion_nb.widgets as w; print(fusion_nb.__file__); print(w.__file__)"
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    package, widgets = done.stdout.split()
    assert Path(package) == ROOT / "fusion_nb" / "__init__.py"
    assert Path(widgets) == ROOT / "widgets" / "__init__.py"


def run_in_kernel(kernels: Path, cwd: Path, cells: list[str]) -> list[str]:
    """Run ``cells`` in the ``binder`` kernel (under ``kernels``) started in ``cwd``.

    Returns each cell's printed text and result; a cell that fails fails the test.
    """
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    manager = KernelManager(
        kernel_name="binder", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels / "kernels")])
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
            assert reply["content"]["status"] == "ok", f"{cell!r} failed in the Binder kernel: {errors}"
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


@pytest.mark.kernel
@pytest.mark.timeout(1500)
def test_binder_build_loads_the_extension_at_the_root_and_runs_notebook_01(tmp_path, capsys):
    version = runtime_python()
    python = find_python(version)
    repo = clean_copy(tmp_path / "repo")
    venv = tmp_path / "venv"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
    venv_python = venv / "bin" / "python"

    started = time.monotonic()
    install = subprocess.run(
        [str(venv_python), "-m", "pip", "install", "--quiet", "-r", "binder/requirements.txt"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    install_seconds = time.monotonic() - started
    assert install.returncode == 0, install.stderr[-3000:]
    post_build = subprocess.run([str(repo / "binder" / "postBuild")], cwd=repo, capture_output=True, text=True)
    assert post_build.returncode == 0, post_build.stderr
    assert not [p.name for p in repo.iterdir() if p.name == "build" or p.name.endswith(".egg-info")]

    kernels = tmp_path / "share" / "jupyter"
    subprocess.run(
        [str(venv_python), "-m", "ipykernel", "install", "--prefix", str(tmp_path), "--name", "binder"],
        check=True,
        capture_output=True,
    )
    version_and_widgets, loaded, _card, called = run_in_kernel(
        kernels,
        repo,
        [
            "import sys, fusion_nb.widgets\nprint(sys.version_info[:2], fusion_nb.widgets.__file__)",
            "%load_ext fusion_nb",
            '%%fusion_tool greet\n"""Say hello."""\nreturn "Hello from Binder"',
            "await greet()",
        ],
    )
    assert version_and_widgets == f"({version.replace('.', ', ')}) {repo / 'widgets' / '__init__.py'}\n"
    assert loaded == ""
    assert called == "'Hello from Binder'"

    started = time.monotonic()
    nbval = run_nbval(
        repo / "notebooks" / "01-quickstart.ipynb",
        kernel="binder",
        env={**os.environ, "JUPYTER_PATH": str(kernels)},
        sanitize=repo / "notebooks" / "sanitize.cfg",
    )
    nbval_seconds = time.monotonic() - started
    summary = (nbval.stdout.strip().splitlines() or ["no output"])[-1]
    with capsys.disabled():
        print(
            f"\nBinder simulation: Python {version} ({python}), pip install -r binder/requirements.txt "
            f"{install_seconds:.0f} s, notebook 01 under nbval {nbval_seconds:.0f} s: {summary}"
        )
    assert nbval.returncode == 0, nbval.stdout[-3000:]


def test_the_readme_launches_notebook_01_in_jupyterlab_on_binder():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"https://mybinder\.org/v2/gh/[^)\s]+", readme)
    assert len(links) >= 2, "a badge and a launch link"
    for link in links:
        assert re.fullmatch(r"https://mybinder\.org/v2/gh/[\w.-]+/[\w.-]+/[\w./-]+\?urlpath=lab/tree/(.+)", link)
        opened = link.split("urlpath=lab/tree/", 1)[1]
        assert opened == "notebooks/01-quickstart.ipynb" and (ROOT / opened).is_file()
    assert "https://mybinder.org/badge_logo.svg" in readme
