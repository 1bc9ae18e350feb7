"""One input widget per flat field (the engine's ``AskField``), for elicitation forms and tool Run forms.

Like ``ipywidgets.interact``: the human description is the label and the code key a
quiet hint after the control, except a description that is only an example ("e.g.
2026Q3"), which becomes the box's placeholder under the key as label. Numeric bounds are
part of the label and checked as the person types: 99 in a box of 1 to 50 says so next to
it (a bounded box would silently turn it into 50). An unanswered required number starts
blank, so nobody submits a 0 they never typed. Messages name the field by its label.
Enter in a text box submits (``on_enter``). Blank means "not answered"
(``read()`` returns ``None``). Checking is the engine's: ``AskField.check`` per field
while typing, ``validate_form`` on Submit, so the form and the engine never disagree.
A tool's input schema becomes fields through ``AskField.from_schema``; a tool whose
arguments are not all flat primitives gets no Run form (``flat_fields`` says so).
"""

from __future__ import annotations

import asyncio
from typing import Any

import ipywidgets as w
import traitlets

from fusion_nb.engine import AskField

from .status import ERROR, MUTED, colored, escape

_WIDE = {"description_width": "initial"}
_FLAT = ("string", "number", "integer", "boolean")


class FieldInput:
    """The widget for one field, its key hint and its inline error line."""

    def __init__(self, key: str, field: AskField) -> None:
        self.key = key
        self.field = field
        self.parsed = False  # a Text that is parsed on read (blank allowed)
        self.label = label_of(key, field)
        self.placeholder = field.description if is_example(field.description) else ""
        self.widget = self._make()
        # the message line keeps its height when empty: a message leaving as a person clicks Submit
        # must not move the buttons from under the pointer (the click would land on empty space)
        self.error = w.HTML("", layout=w.Layout(min_height=LINE))
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
        if field.type == "array":
            return Picks([(field.label(v), v) for v in field.values or ()], default or (), label)
        if field.values is not None:
            options = [(field.label(v), v) for v in field.values]
            return w.Dropdown(options=options, value=default, description=label, style=_WIDE)
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
                placeholder=self.placeholder or (f"{field.type}, {bounds}" if bounds else field.type),
                description=label,
                style=_WIDE,
            )
        return w.Text(value=default or "", placeholder=self.placeholder, description=label, style=_WIDE)

    def _bounded(self, label: str, default: Any) -> w.Widget:
        """A number box with its default; its bounds are checked as the person types (never clamped)."""
        if self.field.type == "integer":
            return w.IntText(value=int(default), description=label, style=_WIDE)
        return w.FloatText(value=default, description=label, style=_WIDE)

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
        return list(value) if isinstance(self.widget, Picks) else value

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

    def shown(self, value: Any) -> str:
        """``value`` as the person chose it: a labelled choice by its label (picks joined), else its repr."""
        if not self.field.titles or value is None:
            return repr(value)
        if isinstance(value, (list, tuple)):
            return ", ".join(map(self.field.label, value))
        return self.field.label(value)

    def show(self, problem: str | None) -> None:
        """Show ``problem`` under the field, naming it by its label (``None`` clears it)."""
        self.error.value = colored(escape(self.for_person(problem)), ERROR) if problem else ""

    def for_person(self, problem: str) -> str:
        """The engine's message with the field's label for the code key a person never saw."""
        quoted = f'"{self.key}"'
        name = self.field.description if self.field.description and not self.placeholder else self.key
        return f'"{name}"' + problem[len(quoted) :] if problem.startswith(quoted) else problem

    def on_enter(self, callback: Any) -> None:
        """Call ``callback()`` when Enter is pressed in this field's text box.

        The front end sends Enter as a custom ``submit`` message at once, while the
        last keystroke's value may still wait in its throttle; ``callback`` therefore
        runs a moment later (``ENTER_SETTLE``), once that value has arrived.
        """
        if not isinstance(self.widget, w.Text):
            return

        def on_msg(_widget: Any, content: Any, _buffers: Any) -> None:
            if isinstance(content, dict) and content.get("event") == "submit":
                _later(ENTER_SETTLE, callback)

        self.widget.on_msg(on_msg)

    def _changed(self, change: dict[str, Any]) -> None:
        # numbers are checked as typed (99 in 1 to 50 says so), picks as ticked; others once a message shows
        if self.error.value or (self.field.type in ("number", "integer", "array") and range_text(self.field)):
            self.show(self.problem())

    def fill(self, value: Any) -> None:
        """Put ``value`` in the control as a person would have typed it (a scripted answer)."""
        try:
            if isinstance(self.widget, Picks):
                value = tuple(value)
            self.widget.value = str(value) if self.parsed or isinstance(self.widget, w.Text) else value
        except Exception:  # a value the control cannot hold (the engine checks it anyway)
            return

    def disable(self) -> None:
        """No more editing (the prompt was answered or abandoned)."""
        self.widget.disabled = True


class Picks(w.VBox):
    """A checkbox per choice (``ask.choices``): ``value`` is the tuple of the values ticked, in order.

    Checkboxes rather than a multi-select list: every choice is visible and a click ticks one
    without holding a key.
    """

    value = traitlets.Tuple()

    def __init__(self, options: list[tuple[str, Any]], value: Any, label: str) -> None:
        self.choices = [choice for _title, choice in options]
        self.boxes = [w.Checkbox(value=choice in value, description=title, indent=False) for title, choice in options]
        super().__init__([w.HTML(escape(label)), *self.boxes])
        self.value = tuple(choice for choice in self.choices if choice in value)
        for box in self.boxes:
            box.observe(self._ticked, names="value")
        self.observe(self._set, names="value")

    def _ticked(self, _change: Any) -> None:
        self.value = tuple(choice for choice, box in zip(self.choices, self.boxes, strict=True) if box.value)

    def _set(self, change: Any) -> None:
        for choice, box in zip(self.choices, self.boxes, strict=True):
            box.value = choice in change["new"]

    @property
    def disabled(self) -> bool:
        """Whether the boxes are disabled (all together)."""
        return all(box.disabled for box in self.boxes)

    @disabled.setter
    def disabled(self, value: bool) -> None:
        for box in self.boxes:
            box.disabled = value


#: the height of one line of widget text (JupyterLab's inline widget height, with its fallback)
LINE = "var(--jp-widgets-inline-height, 28px)"

#: seconds between Enter and acting on it: the last keystroke's update arrives first
ENTER_SETTLE = 0.25

_EXAMPLE_PREFIXES = ("e.g.", "e.g ", "eg ", "eg.", "for example", "such as", "example:", "like ")


def is_example(description: str | None) -> bool:
    """A description that only gives an example ("e.g. 2026Q3"): a placeholder, not a label."""
    return description is not None and description.strip().lower().startswith(_EXAMPLE_PREFIXES)


def _later(delay: float, callback: Any) -> None:
    try:
        asyncio.get_running_loop().call_later(delay, callback)
    except RuntimeError:  # no loop (a plain script): act now
        callback()


def label_of(key: str, field: AskField) -> str:
    """What the person reads: the description (else the key), the bounds, and "optional"."""
    label = key if is_example(field.description) else (field.description or key)
    bounds = range_text(field)
    if bounds:
        label += f" (pick {bounds})" if field.type == "array" else f" ({bounds})"
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
