"""Turning a SOURCE argument into the app to serve: ``x.ipynb``, ``x.py`` or ``pkg.module[:app]``.

Any form takes an optional ``:name`` naming the app. Without it the app is found:
the one ``Fusion`` app the source defines (``app`` wins when there are several), or
``fusion_nb.default_app`` when the source registered tools on it (``%%fusion_tool``
cells, ``fnb.f``). Anything else is a one-sentence error naming the choices.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine import App
from .errors import CliError
from .headless import StartupReport, failure_message, run_notebook


@dataclass
class Loaded:
    """The app a SOURCE yields, and (for a notebook) how its cells fared at start-up."""

    app: App
    label: str
    report: StartupReport | None = None
    shell: Any = None


def split_source(source: str) -> tuple[str, str | None]:
    """``"a/b.ipynb:app"`` -> ``("a/b.ipynb", "app")``; a Windows drive letter is not an app name."""
    location, sep, name = source.rpartition(":")
    if not sep or not name.isidentifier() or (len(location) == 1 and location.isalpha()):
        return source, None
    return location, name


async def load_source(source: str, *, echo: bool = False, allow_failed: bool = False) -> Loaded:
    """Load SOURCE and find its app; a failing notebook cell raises ``CliError`` unless ``allow_failed``."""
    location, name = split_source(source)
    if location.endswith(".ipynb"):
        path = Path(location)
        shell, report = await run_notebook(path, echo=echo)
        failed = report.failed
        if failed is not None and not allow_failed:
            raise CliError(failure_message(path, failed))
        app = find_app(shell.user_ns, name, location)
        return Loaded(app, location, report, shell)
    namespace = _exec_file(Path(location)) if location.endswith(".py") else _import_module(location)
    return Loaded(find_app(namespace, name, location), location)


def find_app(namespace: Mapping[str, Any], name: str | None, where: str) -> App:
    """The app named ``name`` in ``namespace``, or the only one there is (see the module docstring)."""
    import fusion_nb

    if name is not None:
        app = namespace.get(name)
        if not isinstance(app, App):
            raise CliError(
                f"{where}: {name!r} is not a fusion-nb app (a fusion_nb.Fusion instance); check the name after ':'"
            )
        return app
    found: dict[int, tuple[str, App]] = {}
    for key, value in namespace.items():
        if isinstance(value, App) and not key.startswith("_") and id(value) not in found:
            found[id(value)] = (key, value)
    default = fusion_nb.default_app
    if default.tools and id(default) not in found:
        found[id(default)] = ("fusion_nb.default_app", default)
    apps = [entry for entry in found.values() if entry[1].tools or entry[1] is not default]
    if len(apps) == 1:
        return apps[0][1]
    named = [app for key, app in apps if key == "app"]
    if len(named) == 1:
        return named[0]
    if not apps:
        raise CliError(f"{where}: defines no tools; add a %%fusion_tool cell or a fusion_nb.Fusion app with tools")
    names = ", ".join(sorted(key for key, _ in apps))
    raise CliError(f"{where}: defines several apps ({names}); name one, e.g. {where}:{apps[0][0]}")


def _exec_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CliError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise CliError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    sys.path.insert(0, str(path.resolve().parent))  # its sibling modules import as they would in `python x.py`
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise CliError(_raised(str(path), exc)) from exc
    return vars(module)


def _import_module(name: str) -> dict[str, Any]:
    if not all(part.isidentifier() for part in name.split(".")):
        raise CliError(f"{name!r} is neither a .ipynb or .py path nor a module name like package.module[:app]")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules in the working directory import
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            raise CliError(f"no module named {name!r} (is it installed, or run from its directory?)") from None
        raise CliError(_raised(name, exc)) from exc
    except Exception as exc:
        raise CliError(_raised(name, exc)) from exc
    return vars(module)


def _raised(where: str, exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return f"{where}: importing it raised {detail}"
