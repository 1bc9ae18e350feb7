"""What the package promises to its installers: the dependencies it imports are declared, its
version is written in one place, `make lab` brings what the notebooks import, and the built
wheel works when installed into a fresh venv outside the checkout.

A package that arrives only through another dependency today (starlette through mcp, say)
disappears the day that dependency drops it, so each direct import must be declared.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

import fusion_nb

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = (ROOT / "fusion_nb", ROOT / "widgets")
# Imported by the library without being a dependency, each for a reason:
UNDECLARED_ON_PURPOSE = {
    "trio": "imported only when the caller is already running trio (engine background tasks)",
    "PIL": "the optional `data` extra: imported only to downscale a raster image (else it is passed or described)",
}

# A module that needs an optional extra: its imports must be declared in that extra (and only it imports them).
EXTRA_MODULES = {
    "fusion_nb/dask.py": "dask",
    "fusion_nb/redis_tasks.py": "redis",
    "fusion_nb/mcp/jwt_verifier.py": "oauth",
}


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def imported_top_level_names() -> dict[str, set[str]]:
    """Absolute imports of the library's source: top-level name -> files importing it."""
    found: dict[str, set[str]] = {}
    for directory in LIBRARY:
        for path in directory.rglob("*.py"):
            for name in top_level_imports(path.read_text(), str(path)):
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def top_level_imports(source: str, filename: str = "<cell>") -> Iterator[str]:
    """The top-level names of ``source``'s absolute imports."""
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_of_the_library_is_a_declared_dependency() -> None:
    project = pyproject()["project"]
    declared = {normalise(Requirement(line).name) for line in project["dependencies"]}
    extras = {
        extra: {normalise(Requirement(line).name) for line in lines}
        for extra, lines in project["optional-dependencies"].items()
    }
    distributions = importlib.metadata.packages_distributions()
    undeclared = {}
    for name, files in imported_top_level_names().items():
        if name in sys.stdlib_module_names or name == "fusion_nb" or name in UNDECLARED_ON_PURPOSE:
            continue
        providers = {normalise(d) for d in distributions.get(name, [name])}
        needing = {EXTRA_MODULES.get(file) for file in files}
        if None not in needing and all(providers & extras[extra] for extra in needing if extra):
            continue  # imported only by modules of extras that declare it
        if not providers & declared:
            undeclared[name] = sorted(files)
    assert not undeclared, f"imported but not in [project] dependencies: {undeclared}"


def test_the_version_is_written_only_in_pyproject() -> None:
    version = pyproject()["project"]["version"]
    assert fusion_nb.__version__ == importlib.metadata.version("fusion-nb") == version
    literal = re.compile(rf"""["']{re.escape(version)}["']""")
    copies = [
        f"{path.relative_to(ROOT)}:{number}"
        for directory in LIBRARY
        for path in sorted(directory.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert not copies, f"version {version} also written in {copies}: read importlib.metadata.version('fusion-nb')"


def extra_requirements(extra: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """The normalised names an extra installs, following ``fusion-nb[other]`` self-references."""
    names: set[str] = set()
    for line in pyproject()["project"]["optional-dependencies"][extra]:
        requirement = Requirement(line)
        if normalise(requirement.name) == "fusion-nb":
            for other in requirement.extras - seen:
                names |= extra_requirements(other, seen | {extra})
        else:
            names.add(normalise(requirement.name))
    return names


def test_the_lab_extra_brings_what_every_teaching_notebook_imports() -> None:
    """`make lab` installs ``.[lab]``: a notebook importing anything else fails on its first cell."""
    import json

    project = pyproject()["project"]
    installed = {normalise(Requirement(line).name) for line in project["dependencies"]} | extra_requirements("lab")
    distributions = importlib.metadata.packages_distributions()
    missing: dict[str, set[str]] = {}
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            lines = "".join(cell["source"]).splitlines()
            if lines and lines[0].startswith("%%fusion_tool"):  # a tool's body is a function body
                lines = ["async def body():", *(f"    {line}" for line in lines[1:]), "    pass"]
            elif lines and lines[0].startswith("%%"):  # another cell magic's body is not Python
                continue
            source = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
            for name in top_level_imports(source, notebook.name):
                if name in sys.stdlib_module_names or name == "fusion_nb":
                    continue
                providers = {normalise(d) for d in distributions.get(name, [name])}
                if not providers & installed:
                    missing.setdefault(name, set()).add(notebook.name)
    assert not missing, f"imported by teaching notebooks but not installed by `make lab` (the lab extra): {missing}"


# --- The built distribution, as a user installs it -------------------------------------------

NOTEBOOK_01 = ROOT / "notebooks" / "01-quickstart.ipynb"
SUPPORTED = ("3.11", "3.12", "3.13")  # requires-python >=3.11; each present here is installed into


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path  # built from the sdist, as pip builds a package from PyPI's source archive
    checkout_wheel: Path  # built straight from the checkout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """``python -m build`` (sdist, then the wheel from it) and ``--wheel`` alone, on a clean copy."""
    from venvs import clean_copy

    base = tmp_path_factory.mktemp("build")
    repo = clean_copy(base / "repo")
    for args, out in (([], "dist"), (["--wheel"], "checkout")):
        done = subprocess.run(
            [sys.executable, "-m", "build", *args, "--outdir", str(base / out), str(repo)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = (base / "dist").glob("*.tar.gz")
    (wheel,) = (base / "dist").glob("*.whl")
    (checkout_wheel,) = (base / "checkout").glob("*.whl")
    return Built(sdist, wheel, checkout_wheel)


def wheel_files(wheel: Path) -> dict[str, str]:
    """Each file of the wheel with the sha256 of its bytes (RECORD, which lists them, left out)."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            name: hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if not name.endswith(".dist-info/RECORD")
        }


def tree_packages() -> set[str]:
    """Every folder of the library that holds Python modules, as its installed package path."""
    found = set()
    for directory, installed in ((ROOT / "fusion_nb", "fusion_nb"), (ROOT / "widgets", "fusion_nb/widgets")):
        for module in directory.rglob("*.py"):
            found.add("/".join([installed, *module.parent.relative_to(directory).parts]))
    return found


def test_every_package_of_the_tree_is_in_the_wheel_with_its_typing_marker(built: Built) -> None:
    files = wheel_files(built.wheel)
    packages = {name.rsplit("/", 1)[0] for name in files if name.endswith("/__init__.py")}
    missing = sorted(tree_packages() - packages)
    assert not missing, f"packages of the tree left out of the wheel: {missing}"
    assert "fusion_nb/py.typed" in files
    assert "fusion_nb/engine/_backends/__init__.py" in files  # the one 0.1.0 left out
    # the MCP Apps views and the notebook preview's bridge: read at run time, offline (#49)
    assert "fusion_nb/mcp/views/view.html" in files and "fusion_nb/widgets/app_preview.js" in files
    # the one data file: it enables the Jupyter server extension wherever the wheel is installed
    version = pyproject()["project"]["version"]
    enabling = f"fusion_nb-{version}.data/data/etc/jupyter/jupyter_server_config.d/fusion_nb.json"
    assert enabling in files, sorted(name for name in files if ".data/" in name)
    strays = sorted(name for name in files if not name.startswith(("fusion_nb/", "fusion_nb-")))
    assert not strays, f"the wheel installs files outside fusion_nb: {strays}"


def test_the_sdist_holds_no_tests_and_rebuilds_the_same_wheel(built: Built) -> None:
    with tarfile.open(built.sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    tests = sorted(name for name in names if name.startswith("tests/") or "/test_" in f"/{name}")
    assert not tests, f"the sdist ships tests: {tests}"
    assert not [name for name in names if name.startswith(("notebooks/", "benchmarks/", "deploy/"))]
    from_sdist, from_checkout = wheel_files(built.wheel), wheel_files(built.checkout_wheel)
    names_of_both = from_sdist.keys() | from_checkout.keys()
    differing = sorted(name for name in names_of_both if from_sdist.get(name) != from_checkout.get(name))
    assert not differing, f"the wheel built from the sdist differs from the checkout's in {differing}"


def supported_pythons() -> list[Any]:
    """Each supported Python present here, the running one always among them."""
    from venvs import python_of

    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    params = []
    for version in SUPPORTED:
        python = Path(sys.executable) if version == running else python_of(version)
        if python is not None:
            params.append(pytest.param(python, id=version))
    return params


def call_notebook_01_over_stdio(fusion_nb: Path, folder: Path) -> tuple[list[str], str]:
    """``fusion-nb serve 01-quickstart.ipynb`` launched as a host launches it: tools listed, one called."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(command=str(fusion_nb), args=["serve", "01-quickstart.ipynb"], cwd=str(folder))
    log = folder / "serve.log"

    async def main() -> tuple[list[str], str]:
        with anyio.fail_after(120), log.open("w") as errlog:
            async with Client(stdio_client(server, errlog=errlog)) as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
                result = await client.call_tool("math.add", {"a": 2, "b": 3})
                return tools, result.content[0].text  # type: ignore[union-attr]

    try:
        return anyio.run(main)
    except BaseException:
        print(f"fusion-nb serve's stderr:\n{log.read_text()[-3000:]}")
        raise


@pytest.mark.kernel
@pytest.mark.timeout(900)
@pytest.mark.parametrize("python", supported_pythons())
def test_the_wheel_installed_in_a_fresh_venv_works(
    python: Path, built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside the checkout, nothing of the source tree on any path: CLI, stdio server, kernel, widgets."""
    from venvs import install_kernel, run_in_kernel

    venv = tmp_path / "venv"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
    bin_ = venv / "bin"
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    started = time.monotonic()
    done = subprocess.run(
        [str(bin_ / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(built.wheel)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    install_seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(NOTEBOOK_01, work)

    helped = subprocess.run([str(bin_ / "fusion-nb"), "--help"], cwd=work, env=env, capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert "serve" in helped.stdout and "install" in helped.stdout

    code = "import fusion_nb, fusion_nb.widgets; print(fusion_nb.__file__); print(fusion_nb.widgets.__file__)"
    imported = subprocess.run([str(bin_ / "python"), "-c", code], cwd=work, env=env, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert all(Path(line).is_relative_to(venv) for line in imported.stdout.split()), imported.stdout

    tools, answer = call_notebook_01_over_stdio(bin_ / "fusion-nb", work)
    assert {"greet", "math.add"} <= set(tools)
    assert answer == "5"

    kernels = install_kernel(bin_ / "python", tmp_path, "wheel")
    where, loaded, _card, called = run_in_kernel(
        kernels,
        "wheel",
        work,
        [
            "import fusion_nb.widgets; print(fusion_nb.widgets.__file__)",
            "%load_ext fusion_nb",
            '%%fusion_tool greet\n"""Say hello."""\nreturn "Hello from the wheel"',
            "await greet()",
        ],
    )
    assert Path(where.strip()).is_relative_to(venv)
    assert loaded == ""
    assert called == "'Hello from the wheel'"
    with capsys.disabled():
        print(
            f"\nwheel {built.wheel.name}: {built.wheel.stat().st_size / 1024:.0f} KiB, installed into a fresh "
            f"venv of {python} in {install_seconds:.1f} s (warm pip cache)"
        )
