"""A package whose public names load with their module on first use (PEP 562).

``fusion_nb.mcp`` must not pull in the HTTP stack when only stdio is served, and
``fusion_nb.widgets`` must not pull in ipywidgets where no widget can show (a headless
``fusion-nb serve``): each names where its public names live, and this imports a name's
module when the name is first read, then keeps the value on the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_attributes(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: ``homes`` maps each public name to its (relative) module."""

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
