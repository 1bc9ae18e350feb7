"""Let a source checkout import ``fusion_nb.widgets`` the way an installed copy does.

pyproject installs the top-level ``widgets/`` folder as ``fusion_nb.widgets`` (SPEC section 1),
so only an installed copy has ``fusion_nb/widgets/``. When Python imports ``fusion_nb`` from a
checkout instead (a kernel or ``python`` started at the repository root puts the root first on
``sys.path``, so the checkout's ``fusion_nb/`` shadows any installed copy), nothing maps that
folder and ``%load_ext fusion_nb`` fails with ``No module named 'fusion_nb.widgets'``. Binder
opens at the repository root, which is how visitors met it. The finder below maps exactly that
one name onto the checkout's own ``widgets/`` folder, lazily (ipywidgets is imported only when
the widgets are), and is never installed for an installed copy.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

WIDGETS_PACKAGE = "fusion_nb.widgets"


class CheckoutWidgetsFinder(importlib.abc.MetaPathFinder):
    """Finds ``fusion_nb.widgets`` in a checkout's top-level ``widgets/`` folder (and nothing else)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """Answer only for the widgets package; its modules are then found through its ``__path__``."""
        if fullname != WIDGETS_PACKAGE:
            return None
        return importlib.util.spec_from_file_location(
            fullname, self.folder / "__init__.py", submodule_search_locations=[str(self.folder)]
        )


def map_checkout_widgets(package_folder: Path) -> None:
    """Install the finder when ``package_folder`` (the imported ``fusion_nb/``) is a checkout's.

    An installed copy has ``fusion_nb/widgets/`` and needs nothing; an editable install's own
    finder answers before this one (it is appended last), with the same folder.
    """
    if (package_folder / "widgets").is_dir():
        return
    folder = package_folder.parent / "widgets"
    if not (folder / "__init__.py").is_file():
        return
    if any(isinstance(finder, CheckoutWidgetsFinder) for finder in sys.meta_path):
        return
    sys.meta_path.append(CheckoutWidgetsFinder(folder))
