"""One input widget per flat field, shared by elicitation forms and tool Run forms.

Fields are the engine's ``AskField`` (string / number / integer / boolean / enum);
a tool's JSON input schema is mapped onto the same fields so both forms look and
validate alike. Blank means "not answered" (``read()`` returns ``None``); the
engine's own ``AskField.check`` gives the inline messages, so the form and the
engine never disagree.
"""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as w

from fusion_nb.engine import AskField

from .status import escape

_FLOAT_LIMIT = 1e300
_INT_LIMIT = 2**53 - 1  # what a browser's number keeps exactly
_WIDE = {"description_width": "initial"}


class FieldInput:
    """The widget for one field, its help line and its inline error line."""

    def __init__(self, key: str, field: AskField) -> None:
        self.key = key
        self.field = field
        self.parsed = False  # a Text that is parsed on read (blank allowed)
        self.widget = self._make()
        self.error = w.HTML("")
        parts: list[w.Widget] = [self.widget]
        if field.description:
            parts.append(w.HTML(f"<small>{escape(field.description)}</small>"))
        parts.append(self.error)
        self.box = w.VBox(parts)
        self.widget.observe(self._changed, names="value")

    @property
    def blank_allowed(self) -> bool:
        return not self.field.required or self.field.has_default

    def _make(self) -> w.Widget:
        field, key = self.field, self.key
        label = key + ("" if field.required else " (optional)")
        default = field.default_value if field.has_default else None
        if field.values is not None:
            return w.Dropdown(options=list(field.values), value=default, description=label, style=_WIDE)
        if field.type == "boolean":
            if field.required or field.has_default:
                return w.Checkbox(value=bool(default), description=label, indent=False)
            return w.Dropdown(options=[("true", True), ("false", False)], value=None, description=label, style=_WIDE)
        if field.type in ("number", "integer"):
            if field.has_default:
                return self._number(label, default)
            # no default: start blank, so nobody submits a 0 they never typed
            self.parsed = True
            return w.Text(placeholder=_range_hint(field), description=label, style=_WIDE)
        if field.type == "string":
            return w.Text(value=default or "", placeholder=field.description or "", description=label, style=_WIDE)
        self.parsed = True  # anything else: JSON text
        return w.Textarea(
            value=json.dumps(default) if default is not None else "",
            placeholder="JSON value",
            description=label,
            style=_WIDE,
        )

    def _number(self, label: str, default: Any) -> w.Widget:
        field = self.field
        integer = field.type == "integer"
        low, high = field.minimum, field.maximum
        start = default
        if low is None and high is None:
            cls = w.IntText if integer else w.FloatText
            return cls(value=start, description=label, style=_WIDE)
        limit = _INT_LIMIT if integer else _FLOAT_LIMIT
        low = -limit if low is None else low
        high = limit if high is None else high
        if integer:
            cls, low, high, start = w.BoundedIntText, int(-(-low // 1)), int(high // 1), int(start)
        else:
            cls = w.BoundedFloatText
        return cls(value=start, min=low, max=high, description=label, style=_WIDE)

    # -- reading and checking ---------------------------------------------------------
    def read(self) -> Any:
        """The answer as a JSON value, ``None`` when blank; ``ValueError`` if unreadable."""
        value = self.widget.value
        if self.parsed:
            text = value.strip()
            if not text:
                return None
            if self.field.type == "integer":
                return _parse(int, text, self.key, "an integer")
            if self.field.type == "number":
                number = _parse(float, text, self.key, "a number")
                return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
            return _parse(json.loads, text, self.key, "a JSON value")
        if isinstance(self.widget, w.Text) and value == "":
            return None
        return value

    def problem(self) -> str | None:
        """The inline message for the current value, or ``None`` when it is fine."""
        try:
            value = self.read()
        except ValueError as exc:
            return str(exc)
        if value is None:
            return None if self.blank_allowed else f'"{self.key}" is required but was not answered'
        if self.field.type not in ("string", "number", "integer", "boolean"):
            return None  # the engine validates what a flat field cannot describe
        try:
            self.field.check(value, self.key)
        except ValueError as exc:
            return str(exc)
        return None

    def show(self, problem: str | None) -> None:
        self.error.value = f'<span style="color:#c62828">{escape(problem)}</span>' if problem else ""

    def _changed(self, change: dict[str, Any]) -> None:
        if self.error.value:  # re-check live once a message is showing
            self.show(self.problem())

    def disable(self) -> None:
        self.widget.disabled = True


def _range_hint(field: AskField) -> str:
    low, high = field.minimum, field.maximum
    if low is not None and high is not None:
        return f"{field.type}, {low:g} to {high:g}"
    if low is not None:
        return f"{field.type}, at least {low:g}"
    if high is not None:
        return f"{field.type}, at most {high:g}"
    return field.type


def _parse(fn: Any, text: str, key: str, what: str) -> Any:
    try:
        return fn(text)
    except ValueError:
        raise ValueError(f'"{key}" expected {what}, got {text!r}') from None


def schema_fields(schema: dict[str, Any]) -> dict[str, AskField]:
    """A tool's JSON input schema as flat fields; what they cannot describe becomes JSON text."""
    required = set(schema.get("required", ()))
    fields: dict[str, AskField] = {}
    for key, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        variants = [v for v in prop.get("anyOf", ()) if v.get("type") != "null"]
        if "anyOf" in prop and len(variants) == 1:
            del prop["anyOf"]
            prop.update(variants[0])
        kind = prop.get("type")
        if "anyOf" in prop or kind not in ("string", "number", "integer", "boolean"):
            kind = "json"
        field = AskField(kind, prop.get("description"), prop.get("enum"))
        field.minimum, field.maximum = prop.get("minimum"), prop.get("maximum")
        if prop.get("default") is not None:
            field.default_value = prop["default"]
        field.required = key in required
        fields[key] = field
    return fields


def problems_for(key: str, problems: list[str]) -> list[str]:
    """The engine's clauses start with the quoted key; pick this field's."""
    return [p for p in problems if p.startswith(f'"{key}"')]
