"""Closing a view for good: every widget model it made, layouts and styles included.

``Widget.close()`` closes only the widget's own model. A box's children, and every
widget's ``layout`` and ``style`` (models of their own, each with a comm), stay open
and stay in the kernel's widget registry: a view closed that way leaks a dozen models.
"""

from __future__ import annotations

import ipywidgets as w


def close_parts(widget: w.Widget) -> None:
    """Close ``widget``'s ``layout`` and ``style`` models (a ``close()`` override calls this, then ``super``)."""
    for part in ("layout", "style"):
        model = getattr(widget, part, None)
        if isinstance(model, w.Widget):
            model.close()


def close_tree(widget: w.Widget) -> None:
    """Close ``widget``, its children (recursively), and every layout and style model among them."""
    for child in getattr(widget, "children", ()):
        close_tree(child)
    close_parts(widget)
    widget.close()
