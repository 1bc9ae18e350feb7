"""What the package promises to its installers: the dependencies it imports are declared, and
its version is written in one place.

A package that arrives only through another dependency today (starlette through mcp, say)
disappears the day that dependency drops it, so each direct import must be declared.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

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
EXTRA_MODULES = {"fusion_nb/dask.py": "dask", "fusion_nb/redis_tasks.py": "redis"}


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def imported_top_level_names() -> dict[str, set[str]]:
    """Absolute imports of the library's source: top-level name -> files importing it."""
    found: dict[str, set[str]] = {}
    for directory in LIBRARY:
        for path in directory.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


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
