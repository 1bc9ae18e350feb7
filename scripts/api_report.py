"""Count what the engineering gate measures: ruff findings, mypy errors, undocumented public
symbols and ``Any`` in public signatures.

The counts make a before/after table for a change that tightens the gate, so the definitions
below are fixed and written down rather than re-decided each time:

- The public surface is the modules in ``PUBLIC_MODULES``: each name in a module's ``__all__``
  (a module without ``__all__``: its public names defined in that module), and, for each
  class among them (or the class of an exported instance, such as ``ask``), the public methods,
  properties, class and static methods that fusion-nb code defines, inherited ones included.
  Each object counts once, under the first name it is exported by. Dunders and names starting
  with ``_`` are private; constants and other plain values have no docstring of their own.
- A symbol is documented when it has a non-blank docstring of its own. A method overriding a
  documented fusion-nb method inherits that contract; a docstring inherited from a third-party
  base, or generated (a dataclass's signature), does not count.
- ``Any`` in public signatures: the parameter and return annotations of the public functions,
  methods and constructors that mention ``Any``, each annotation counted once.

Run ``.venv/bin/python scripts/api_report.py`` (``--list`` prints the symbols behind the counts).
tests/test_public_api.py uses the same collector, so the test and the table agree.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = (
    "fusion_nb",
    "fusion_nb.engine",
    "fusion_nb.mcp",
    "fusion_nb.notebook",
    "fusion_nb.widgets",
    "fusion_nb.dask",
)
OWN_PACKAGE = "fusion_nb"
ANY = re.compile(r"\bAny\b")


@dataclasses.dataclass(frozen=True)
class Symbol:
    """One public object: ``name`` is where users find it, ``obj`` the function, class or module."""

    name: str
    kind: str  # "module", "class", "function", "method", "property"
    obj: Any
    owner: type | None = None  # the class a method is looked up on (for inherited contracts)


def _is_own(obj: Any, package: str) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module == package or module.startswith(package + ".")


def _exported_names(module: ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    )


def _unwrap_member(raw: Any) -> tuple[str, Any] | None:
    """The kind and the documented object of a class attribute, or None for plain data."""
    if isinstance(raw, property):
        return "property", raw.fget
    if isinstance(raw, classmethod | staticmethod):
        return "method", raw.__func__
    cached = getattr(raw, "func", None)
    if type(raw).__name__ == "cached_property" and cached is not None:
        return "property", cached
    if inspect.isfunction(raw):
        return "method", raw
    return None


def _members(cls: type, package: str) -> Iterator[tuple[str, str, Any]]:
    """(name, kind, object) of the public methods and properties fusion-nb code defines on ``cls``."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            member = _unwrap_member(raw)
            if member is not None and _is_own(member[1], package):
                yield name, member[0], member[1]


def public_symbols(modules: tuple[str, ...] = PUBLIC_MODULES, package: str = OWN_PACKAGE) -> list[Symbol]:
    """Every public symbol of ``modules``, each object once, in export order."""
    symbols: list[Symbol] = []
    seen: set[int] = set()

    def add(symbol: Symbol) -> bool:
        if id(symbol.obj) in seen:
            return False
        seen.add(id(symbol.obj))
        symbols.append(symbol)
        return True

    for module_name in modules:
        module = importlib.import_module(module_name)
        add(Symbol(module_name, "module", module))
        for export in _exported_names(module):
            value = getattr(module, export)
            qualified = f"{module_name}.{export}"
            if inspect.isclass(value):
                cls = value
                if _is_own(cls, package):
                    add(Symbol(qualified, "class", cls))
            elif inspect.isfunction(value) or inspect.ismodule(value):
                if _is_own(value, package) or inspect.ismodule(value):
                    add(Symbol(qualified, "module" if inspect.ismodule(value) else "function", value))
                continue
            elif _is_own(type(value), package):
                cls = type(value)  # an exported instance: `ask`, `require_input`, `default_app`, `f`
                add(Symbol(qualified, "class", cls))
            else:
                continue  # a constant: no docstring of its own
            if not _is_own(cls, package):
                continue
            for name, kind, obj in _members(cls, package):
                add(Symbol(f"{qualified}.{name}", kind, obj, owner=cls))
    return symbols


def _own_doc(symbol: Symbol) -> str:
    doc = symbol.obj.__dict__.get("__doc__") if symbol.kind == "class" else getattr(symbol.obj, "__doc__", None)
    doc = (doc or "").strip()
    if symbol.kind == "class" and doc.startswith(f"{symbol.obj.__name__}("):
        return ""  # generated by @dataclass or NamedTuple from the signature
    return doc


def _inherited_contract(symbol: Symbol, package: str) -> str:
    """The docstring of the fusion-nb method this one overrides, if any."""
    if symbol.owner is None:
        return ""
    name = symbol.name.rsplit(".", 1)[1]
    for klass in symbol.owner.__mro__[1:]:
        member = _unwrap_member(vars(klass).get(name))
        if member is not None and _is_own(member[1], package) and (member[1].__doc__ or "").strip():
            return str(member[1].__doc__)
    return ""


def undocumented(symbols: list[Symbol], package: str = OWN_PACKAGE) -> list[Symbol]:
    """The symbols with no docstring of their own and no inherited fusion-nb contract."""
    return [s for s in symbols if not _own_doc(s) and not _inherited_contract(s, package)]


def _signature_of(symbol: Symbol) -> inspect.Signature | None:
    target: Callable[..., Any] | None = None
    if symbol.kind in ("function", "method", "property"):
        target = symbol.obj
    elif symbol.kind == "class":
        init = symbol.obj.__dict__.get("__init__")
        target = init if inspect.isfunction(init) else None
    if target is None:
        return None
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def any_in_signatures(symbols: list[Symbol]) -> list[str]:
    """``name(parameter)`` or ``name -> return`` for each public annotation mentioning ``Any``."""
    found: list[str] = []
    for symbol in symbols:
        signature = _signature_of(symbol)
        if signature is None:
            continue
        for parameter in signature.parameters.values():
            text = _annotation_text(parameter.annotation)
            if ANY.search(text):
                found.append(f"{symbol.name}({parameter.name}: {text})")
        returns = _annotation_text(signature.return_annotation)
        if ANY.search(returns):
            found.append(f"{symbol.name} -> {returns}")
    return found


def ruff_findings() -> int:
    """Findings of ``ruff check`` over the tree, with the project's configuration."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--exit-zero", "--output-format=json", "."],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return len(json.loads(done.stdout))


def mypy_errors() -> int:
    """Errors of ``mypy`` with the project's configuration (strict on the engine)."""
    done = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT)
    return sum(1 for line in done.stdout.splitlines() if ": error:" in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--list", action="store_true", help="print the symbols behind the counts")
    args = parser.parse_args()
    symbols = public_symbols()
    missing = undocumented(symbols)
    anys = any_in_signatures(symbols)
    rows = [
        ("ruff findings", ruff_findings()),
        ("mypy errors", mypy_errors()),
        ("public symbols", len(symbols)),
        ("undocumented public symbols", len(missing)),
        ("Any in public signatures", len(anys)),
    ]
    width = max(len(label) for label, _ in rows)
    for label, count in rows:
        print(f"{label:<{width}}  {count}")
    if args.list:
        print("\nundocumented:")
        print("\n".join(f"  {s.kind:<8} {s.name}" for s in missing))
        print("\nAny in public signatures:")
        print("\n".join(f"  {line}" for line in anys))


if __name__ == "__main__":
    main()
