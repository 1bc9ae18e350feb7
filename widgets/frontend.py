"""Is there a widget frontend? Only a kernel can carry widgets to a person.

Terminal IPython, plain Python and headless runs have no kernel comm manager, so a
form shown there would wait forever. ``FUSION_NB_WIDGETS=0`` forces the text path
(e.g. unattended nbconvert runs, where a kernel exists but nobody answers).
"""

from __future__ import annotations

import os

ENV_FLAG = "FUSION_NB_WIDGETS"


def has_widget_frontend() -> bool:
    """True inside a Jupyter kernel, unless ``FUSION_NB_WIDGETS`` is 0/false/no/off."""
    if os.environ.get(ENV_FLAG, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipywidgets depends on IPython
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
