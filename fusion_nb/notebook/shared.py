"""``%fusion share NAME``: a notebook variable served live as the resource ``nb://vars/NAME``.

A table reads as CSV there, and as JSON records at ``nb://vars/NAME.json`` (the agent picks
the form it parses best). Only names shared on purpose can be read: the templates
``nb://vars/{name}`` and ``nb://vars/{name}.json`` refuse any other name with one sentence,
so an agent cannot read arbitrary variables (or, through them, files). After every cell, a
shared variable whose value changed (re-assigned, or its length or shape changed) is
announced to subscribed clients.
"""

from __future__ import annotations

from typing import Any

from ..engine import INVALID_INPUT, App, ToolError

PREFIX = "nb://vars/"
TEMPLATE = PREFIX + "{name}"
#: the same variable as JSON (a table as records); registered before ``TEMPLATE``, which would match it too
JSON_TEMPLATE = TEMPLATE + ".json"


def fingerprint(value: Any) -> tuple[Any, ...]:
    """What "changed" means for a shared value: another object, or another length or shape.

    (Hashing a large table's contents after every cell would cost the kernel more than a
    client re-reading it; an in-place edit that keeps the shape is announced on re-assignment.)
    """
    shape = getattr(value, "shape", None)
    try:
        size = len(value) if shape is None else None
    except TypeError:
        size = None
    return id(value), repr(shape) if shape is not None else size


class SharedVariables:
    """The variables of one shell served as resources."""

    def __init__(self, app: App, namespace: dict[str, Any]) -> None:
        self.app = app
        self.namespace = namespace
        self.shared: dict[str, tuple[Any, ...]] = {}

    def share(self, name: str) -> str:
        """Serve ``name``; the sentence to print."""
        if name not in self.namespace:
            raise KeyError(f"{name!r} is not defined in this notebook; assign it first, then %fusion share {name}.")
        if not self.shared and TEMPLATE not in [r.uri for r in self.app.catalog.templates]:
            # offered once something is shared: a notebook sharing nothing lists no resources
            description = "A variable this notebook shares (%fusion share NAME), read live."
            as_json = "A shared variable as JSON (a table as records), read live."
            json_form = self.app.resource(
                JSON_TEMPLATE, name="notebook variable as JSON", description=as_json, mime_type="application/json"
            )
            json_form(self._read)
            self.app.resource(TEMPLATE, name="notebook variable", description=description)(self._read)
        self.shared[name] = fingerprint(self.namespace[name])
        description = f"The notebook variable {name}, read live."
        self.app.resource(PREFIX + name, name=name, description=description)(lambda: self._read(name))
        return f"Sharing {name} as {PREFIX}{name}."

    def unshare(self, name: str) -> str:
        """Stop serving ``name``; the sentence to print."""
        if self.shared.pop(name, None) is None:
            raise KeyError(f"{name!r} is not shared; shared: {sorted(self.shared) or 'nothing'}.")
        self.app.catalog.remove_resource(PREFIX + name)
        return f"{PREFIX}{name} is no longer served."

    def after_cell(self) -> None:
        """Announce each shared variable whose value changed (or that was deleted) in the cell."""
        for name, before in list(self.shared.items()):
            now = fingerprint(self.namespace.get(name))
            if now != before:
                self.shared[name] = now
                self.app.catalog.updated(PREFIX + name)

    def _read(self, name: str) -> Any:
        if name not in self.shared:
            raise ToolError(
                INVALID_INPUT,
                f"{name[:80]!r} is not a shared variable; shared: {sorted(self.shared) or 'nothing'} "
                f"(the notebook shares one with %fusion share NAME).",
            )
        if name not in self.namespace:
            raise ToolError(INVALID_INPUT, f"The shared variable {name!r} no longer exists in the notebook.")
        return self.namespace[name]
