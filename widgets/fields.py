"""One input widget per flat field (the engine's ``AskField``), for elicitation forms and tool Run forms.

Like ``ipywidgets.interact``: the human description is the label and the code key a
quiet hint after the control; numeric bounds are part of the label and enforced by
the control itself (a bounded text box), and an unanswered required number starts
blank, so nobody submits a 0 they never typed. Blank means "not answered"
(``read()`` returns ``None``). Checking is the engine's: ``AskField.check`` per field
while typing, ``validate_form`` on Submit, so the form and the engine never disagree.
A tool's input schema becomes fields through ``AskField.from_schema``; a tool whose
arguments are not all flat primitives gets no Run form (``flat_fields`` says so).
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from fusion_nb.engine import AskField

from .status import ERROR, MUTED, colored, escape

_FLOAT_LIMIT = 1e300
_INT_LIMIT = 2**53 - 1  # what a browser's number keeps exactly
_WIDE = {"description_width": "initial"}
_FLAT = ("string", "number", "integer", "boolean")


class FieldInput:
    """The widget for one field, its key hint and its inline error line."""

    def __init__(self, key: str, field: AskField) -> None:
        self.key = key
        self.field = field
        self.parsed = False  # a Text that is parsed on read (blank allowed)
        self.label = label_of(key, field)
        self.widget = self._make()
        self.error = w.HTML("")
        hint = w.HTML(colored(f"<code>{escape(key)}</code>", MUTED), layout=w.Layout(flex="0 0 auto"))
        self.box = w.VBox([w.HBox([self.widget, hint], layout=w.Layout(align_items="center")), self.error])
        self.widget.observe(self._changed, names="value")

    @property
    def blank_allowed(self) -> bool:
        """A blank answer is fine when the field is optional or has a default."""
        return not self.field.required or self.field.has_default

    def _make(self) -> w.Widget:
        field, label = self.field, self.label
        default = field.default_value if field.has_default else None
        if field.values is not None:
            return w.Dropdown(options=list(field.values), value=default, description=label, style=_WIDE)
        if field.type == "boolean":
            if field.required or field.has_default:
                return w.Checkbox(value=bool(default), description=label, indent=False)
            return w.Dropdown(options=[("yes", True), ("no", False)], value=None, description=label, style=_WIDE)
        if field.type in ("number", "integer"):
            if field.has_default:
                return self._bounded(label, default)
            # no default: start blank, so nobody submits a 0 they never typed
            self.parsed = True
            bounds = range_text(field)
            return w.Text(
                placeholder=f"{field.type}, {bounds}" if bounds else field.type, description=label, style=_WIDE
            )
        return w.Text(value=default or "", description=label, style=_WIDE)

    def _bounded(self, label: str, default: Any) -> w.Widget:
        """A number box the browser keeps inside the field's bounds."""
        field = self.field
        integer = field.type == "integer"
        low, high = field.minimum, field.maximum
        if low is None and high is None:
            plain = w.IntText if integer else w.FloatText
            return plain(value=default, description=label, style=_WIDE)
        limit = _INT_LIMIT if integer else _FLOAT_LIMIT
        low = -limit if low is None else low
        high = limit if high is None else high
        if integer:
            return w.BoundedIntText(
                value=int(default), min=int(-(-low // 1)), max=int(high // 1), description=label, style=_WIDE
            )
        return w.BoundedFloatText(value=default, min=low, max=high, description=label, style=_WIDE)

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
            number = _parse(float, text, self.key, "a number")
            return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
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
        try:
            self.field.check(value, self.key)
        except ValueError as exc:
            return str(exc)
        return None

    def show(self, problem: str | None) -> None:
        """Show ``problem`` under the field (``None`` clears it)."""
        self.error.value = colored(escape(problem), ERROR) if problem else ""

    def _changed(self, change: dict[str, Any]) -> None:
        if self.error.value:  # re-check live once a message is showing
            self.show(self.problem())

    def disable(self) -> None:
        """No more editing (the prompt was answered or abandoned)."""
        self.widget.disabled = True


def label_of(key: str, field: AskField) -> str:
    """What the person reads: the description (else the key), the bounds, and "optional"."""
    label = field.description or key
    bounds = range_text(field)
    if bounds:
        label += f" ({bounds})"
    if not field.required:
        label += " (optional)"
    return label


def range_text(field: AskField) -> str:
    """``0 to 100``, ``at least 1``, ``at most 9`` or ``""``."""
    low, high = field.minimum, field.maximum
    if low is not None and high is not None:
        return f"{low:g} to {high:g}"
    if low is not None:
        return f"at least {low:g}"
    if high is not None:
        return f"at most {high:g}"
    return ""


def _parse(fn: Any, text: str, key: str, what: str) -> Any:
    try:
        return fn(text)
    except ValueError:
        raise ValueError(f'"{key}" expected {what}, got {text!r}') from None


def flat_fields(schema: dict[str, Any]) -> dict[str, AskField] | None:
    """A tool's input schema as form fields, or ``None`` when an argument is not a flat primitive.

    Optional arguments arrive as ``anyOf [T, null]`` with a ``null`` default: they are
    field ``T`` without a default (blank means "leave it out").
    """
    required = set(schema.get("required", ()))
    fields: dict[str, AskField] = {}
    for key, prop in schema.get("properties", {}).items():
        flat = dict(prop)
        if "anyOf" in flat:
            variants = [v for v in flat.pop("anyOf") if v.get("type") != "null"]
            if len(variants) != 1:
                return None
            flat.update(variants[0])
            if flat.get("default", 0) is None:
                del flat["default"]
        if flat.get("type") not in _FLAT:
            return None
        fields[key] = AskField.from_schema(flat, key in required)
    return fields


def problems_for(key: str, problems: list[str] | tuple[str, ...]) -> list[str]:
    """The engine's clauses start with the quoted key; pick this field's."""
    return [p for p in problems if p.startswith(f'"{key}"')]
