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
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from nbval_run import run_nbval
from packaging.specifiers import SpecifierSet
from venvs import clean_copy, find_python, install_kernel, run_in_kernel

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"


def runtime_python() -> str:
    """The ``X.Y`` that binder/runtime.txt names (``python-X.Y``, repo2docker's format)."""
    text = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(3\.\d+)", text)
    assert match, f"binder/runtime.txt must read python-3.Y (repo2docker's format), not {text!r}"
    return match.group(1)


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


@pytest.mark.kernel
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("install", ["editable", "installed"])
def test_binder_build_loads_the_extension_and_runs_notebook_01(install, tmp_path, capsys):
    """As Binder builds (editable), and once with the checkout installed as a user's pip would.

    The installed run keeps the kernel out of the repository root (there the checkout's own
    ``fusion_nb/`` shadows any installed copy), so it proves the built package itself works.
    """
    version = runtime_python()
    python = find_python(version)
    repo = clean_copy(tmp_path / "repo")
    venv = tmp_path / "venv"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
    venv_python = venv / "bin" / "python"
    requirements = repo / "binder" / "requirements.txt"
    if install == "installed":
        lines = requirements.read_text().splitlines()
        requirements.write_text("\n".join("." if line.strip() == "-e ." else line for line in lines) + "\n")

    started = time.monotonic()
    done = subprocess.run(
        [str(venv_python), "-m", "pip", "install", "--quiet", "-r", "binder/requirements.txt"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    install_seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    post_build = subprocess.run([str(repo / "binder" / "postBuild")], cwd=repo, capture_output=True, text=True)
    assert post_build.returncode == 0, post_build.stderr
    assert not [p.name for p in repo.iterdir() if p.name == "build" or p.name.endswith(".egg-info")]

    kernels = install_kernel(venv_python, tmp_path, "binder")
    cwd = repo if install == "editable" else repo / "notebooks"
    version_and_widgets, loaded, _card, called = run_in_kernel(
        kernels,
        "binder",
        cwd,
        [
            "import sys, fusion_nb.widgets\nprint(sys.version_info[:2], fusion_nb.widgets.__file__)",
            "%load_ext fusion_nb",
            '%%fusion_tool greet\n"""Say hello."""\nreturn "Hello from Binder"',
            "await greet()",
        ],
    )
    shown_version, widgets_file = version_and_widgets.rsplit(" ", 1)
    assert shown_version == f"({version.replace('.', ', ')})"
    if install == "editable":
        assert Path(widgets_file.strip()) == repo / "widgets" / "__init__.py"
    else:
        assert Path(widgets_file.strip()).is_relative_to(venv), f"not the installed copy: {widgets_file}"
    assert loaded == ""
    assert called == "'Hello from Binder'"

    started = time.monotonic()
    nbval = run_nbval(
        repo / "notebooks" / "01-quickstart.ipynb",
        kernel="binder",
        env={**os.environ, "JUPYTER_PATH": str(kernels)},
        sanitize=repo / "tests" / "notebooks_support" / "sanitize.cfg",
    )
    nbval_seconds = time.monotonic() - started
    summary = (nbval.stdout.strip().splitlines() or ["no output"])[-1]
    with capsys.disabled():
        print(
            f"\nBinder simulation ({install}): Python {version} ({python}), pip install -r "
            f"binder/requirements.txt {install_seconds:.0f} s, notebook 01 under nbval {nbval_seconds:.0f} s: {summary}"
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
