"""Each public package exports exactly its public names (httpx's ``tests/test_exported_members.py``).

A helper imported into a package's namespace (``Path``, ``Mapping``, ``App`` re-imported
for a base class) is a name users can reach and come to rely on; here it must either be
in ``__all__`` or be private. Subpackages are attributes of their package without being
its members, and ``fusion_nb.mcp`` loads its members on first use, so each is touched first.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

PACKAGES = (
    "fusion_nb",
    "fusion_nb.engine",
    "fusion_nb.engine.lowlevel",
    "fusion_nb.mcp",
    "fusion_nb.notebook",
    "fusion_nb.widgets",
)


def public_names(module: ModuleType) -> list[str]:
    """The public names in ``module``'s namespace, its own submodules left out."""
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not (isinstance(value, ModuleType) and value.__name__.startswith(module.__name__ + "."))
    )


@pytest.mark.parametrize("name", PACKAGES)
def test_all_public_names_are_exported_and_nothing_else(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    for member in exported:
        getattr(module, member)  # a lazily loaded member lands in the namespace
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    assert sorted(exported) == public_names(module)


def test_the_check_sees_a_leaked_helper() -> None:
    """The check itself: a module with one stray import is caught."""
    stray = ModuleType("stray")
    exec("from pathlib import Path\n__all__ = ['used']\nused = 1\n", vars(stray))
    assert public_names(stray) == ["Path", "used"] != sorted(stray.__all__)
