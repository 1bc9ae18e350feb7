"""``ask.*``: the fields of an input form (flat primitives, as MCP elicitation allows).

A field knows its JSON schema and validates an answer; it can also be rebuilt from
that schema, so a continuation carried by a stateless client only needs the schema.
"""

from __future__ import annotations

from typing import Any

from ._errors import no_such_attribute

_NO_DEFAULT: Any = object()
_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "number": (int, float),
    "integer": int,
    "boolean": bool,
    "array": list,
}
_TYPE_WORDS = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "array": "a list of choices",
}


def _has_type(value: Any, kind: str) -> bool:
    """Whether ``value`` is of the JSON type ``kind`` (a bool is not a number).

    A function rather than an inline ``isinstance``, so that ``value`` stays ``Any`` for the
    range checks after it.
    """
    return not (isinstance(value, bool) and kind != "boolean") and isinstance(value, _TYPES[kind])


class AskField:
    """One form field; chain ``.default(v)``, ``.describe(text)``, ``.optional()``.

    A choice (``ask.enum``, ``ask.choices``) keeps its ``values`` and, when they were given
    with labels, their ``titles`` (value -> label); ``ask.choices`` is of type ``array``, its
    ``minimum`` and ``maximum`` counting the values picked.
    """

    __slots__ = (
        "default_value",
        "description",
        "enum_names",
        "maximum",
        "minimum",
        "required",
        "titles",
        "type",
        "values",
    )

    def __init__(
        self,
        type: str,
        description: str | None = None,
        values: list[Any] | None = None,
        titles: dict[str, str] | None = None,
    ) -> None:
        self.type = type
        self.description = description
        self.default_value = _NO_DEFAULT
        self.required = True
        self.minimum: float | None = None
        self.maximum: float | None = None
        self.values = values
        self.titles = titles
        self.enum_names = False

    def default(self, value: Any) -> AskField:
        """Pre-fill the form with ``value``; it must fit the field, so a bad default fails where it is written."""
        self.check(value, "default")
        self.default_value = value
        return self

    def describe(self, text: str) -> AskField:
        """Set the label the person sees (replaces the one given to the constructor)."""
        self.description = text
        return self

    def optional(self) -> AskField:
        """Let the person leave the field empty; the answer then has no value for it."""
        self.required = False
        return self

    def min(self, value: float) -> AskField:
        """Smallest accepted value (``ask.number``, ``ask.integer``), or fewest picks (``ask.choices``)."""
        self._numeric("min")
        self.minimum = value
        return self

    def max(self, value: float) -> AskField:
        """Largest accepted value (``ask.number``, ``ask.integer``), or most picks (``ask.choices``)."""
        self._numeric("max")
        self.maximum = value
        return self

    def as_enum_names(self) -> AskField:
        """Send an ``ask.enum``'s labels as ``enumNames`` (the form clients before MCP 2025-11-25 read)."""
        if self.type != "string" or self.titles is None:
            raise TypeError("as_enum_names() applies to an ask.enum given as {value: label}")
        self.enum_names = True
        return self

    def _numeric(self, what: str) -> None:
        if self.type not in ("number", "integer", "array"):
            kind = self.type if self.values is None else "enum"
            raise TypeError(f"{what}() applies to ask.number, ask.integer and ask.choices, not ask.{kind}")

    @property
    def has_default(self) -> bool:
        """Whether ``.default()`` was given (``None`` is a valid default, so this is not ``default_value is None``)."""
        return self.default_value is not _NO_DEFAULT

    def schema(self) -> dict[str, Any]:
        """The field as one JSON Schema property, as sent to the client in an elicitation request."""
        prop: dict[str, Any] = {"type": self.type}
        if self.type == "array":
            prop["items"] = self._choices("anyOf")
        elif self.values is not None:
            prop.update(self._choices("oneOf"))
        if self.description:
            prop["description"] = self.description
        bounds = ("minItems", "maxItems") if self.type == "array" else ("minimum", "maximum")
        for name, bound in zip(bounds, (self.minimum, self.maximum), strict=True):
            if bound is not None:
                prop[name] = bound
        if self.has_default:
            prop["default"] = self.default_value
        return prop

    def _choices(self, titled: str) -> dict[str, Any]:
        """The values as SEP-1330 says: ``enum``, or ``oneOf``/``anyOf`` of ``const`` and ``title``."""
        values = list(self.values or ())
        if self.titles is None:
            return {"type": "string", "enum": values} if self.type == "array" else {"enum": values}
        if self.enum_names:
            return {"enum": values, "enumNames": [self.titles[value] for value in values]}
        return {titled: [{"const": value, "title": self.titles[value]} for value in values]}

    @classmethod
    def from_schema(cls, prop: dict[str, Any], required: bool) -> AskField:
        """Rebuild a field from its schema property, so a stateless continuation needs only the schema."""
        kind = prop.get("type", "string")
        choices = prop.get("items", {}) if kind == "array" else prop
        titled = choices.get("oneOf") or choices.get("anyOf")
        values: list[Any] | None
        titles: dict[Any, Any] | None
        if titled:
            values = [option.get("const") for option in titled]
            titles = {option.get("const"): option.get("title", option.get("const")) for option in titled}
        else:
            values = choices.get("enum")
            names = choices.get("enumNames")
            titles = dict(zip(values, names, strict=True)) if values and names and len(names) == len(values) else None
        field = cls(kind, prop.get("description"), values, titles)
        field.enum_names = bool(titles) and "enumNames" in choices
        if kind == "array":
            field.minimum, field.maximum = prop.get("minItems"), prop.get("maxItems")
        else:
            field.minimum, field.maximum = prop.get("minimum"), prop.get("maximum")
        if "default" in prop:
            field.default_value = prop["default"]
        field.required = required
        return field

    def check(self, value: Any, key: str) -> Any:
        """Return ``value`` if it fits this field, else raise ``ValueError`` with one clause."""
        if not _has_type(value, self.type):
            raise ValueError(f'"{key}" expected {_TYPE_WORDS[self.type]}, got {value!r}')
        if self.type == "array":
            return self._check_picks(value, key)
        if self.values is not None and value not in self.values:
            raise ValueError(f'"{key}" expected one of {", ".join(map(repr, self.values))}, got {value!r}')
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f'"{key}" expected at least {self.minimum:g}, got {value!r}')
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f'"{key}" expected at most {self.maximum:g}, got {value!r}')
        return value

    def _check_picks(self, picks: list[Any], key: str) -> list[Any]:
        allowed = self.values or []
        wrong = [pick for pick in picks if pick not in allowed]
        if wrong:
            raise ValueError(f'"{key}" expected picks among {", ".join(map(repr, allowed))}, got {wrong[0]!r}')
        if len(set(picks)) != len(picks):
            raise ValueError(f'"{key}" expected each choice at most once, got {picks!r}')
        if self.minimum is not None and len(picks) < self.minimum:
            raise ValueError(f'"{key}" expected at least {_picks(self.minimum)}, got {len(picks)}')
        if self.maximum is not None and len(picks) > self.maximum:
            raise ValueError(f'"{key}" expected at most {_picks(self.maximum)}, got {len(picks)}')
        return picks

    def label(self, value: Any) -> str:
        """What a person sees for ``value`` of a choice: its title, else the value."""
        return self.titles.get(value, str(value)) if self.titles else str(value)

    def __repr__(self) -> str:
        return f"<ask.{self.type} {self.description!r}>"

    def __getattr__(self, name: str) -> Any:
        """A mistyped method (``.mx(5)``) is named with the near one, in one sentence."""
        if name.startswith("_") or name in self.__slots__:
            raise AttributeError(name)
        raise no_such_attribute("a field", "method", name, [n for n in dir(type(self)) if n not in self.__slots__])


class _Ask:
    """Namespace of field constructors: ``ask.string("Name")``, ``ask.number("Age").min(0)``."""

    @staticmethod
    def string(description: str | None = None) -> AskField:
        """A text field."""
        return AskField("string", description)

    @staticmethod
    def number(description: str | None = None) -> AskField:
        """A number field (int or float; a bool is refused); bound it with ``.min()`` and ``.max()``."""
        return AskField("number", description)

    @staticmethod
    def integer(description: str | None = None) -> AskField:
        """A whole-number field; bound it with ``.min()`` and ``.max()``."""
        return AskField("integer", description)

    @staticmethod
    def boolean(description: str | None = None) -> AskField:
        """A yes/no field (a checkbox in the notebook form)."""
        return AskField("boolean", description)

    @staticmethod
    def enum(values: list[str] | dict[str, str], description: str | None = None) -> AskField:
        """One choice among ``values``: strings, or ``{value: label}`` to show labels (a dropdown in the notebook)."""
        return AskField("string", description, *_options("ask.enum", values))

    @staticmethod
    def choices(values: list[str] | dict[str, str], description: str | None = None) -> AskField:
        """Any number of ``values`` (a list in the answer); bound how many with ``.min()`` and ``.max()``."""
        return AskField("array", description, *_options("ask.choices", values))

    def __getattr__(self, name: str) -> Any:
        """A mistyped field kind (``ask.integr``) is named with the near one, in one sentence."""
        if name.startswith("_"):
            raise AttributeError(name)
        raise no_such_attribute("ask", "field kind", name, dir(type(self)), prefix="ask.")


ask = _Ask()


def _picks(count: float) -> str:
    return f"{count:g} pick" + ("" if count == 1 else "s")


def _options(kind: str, values: list[str] | dict[str, str]) -> tuple[list[str], dict[str, str] | None]:
    titles = dict(values) if isinstance(values, dict) else None
    listed = list(values)
    if not listed or not all(isinstance(v, str) for v in listed) or len(set(listed)) != len(listed):
        raise ValueError(f"{kind} needs a non-empty list of distinct strings (or a dict of them to their labels)")
    if titles is not None and not all(isinstance(t, str) for t in titles.values()):
        raise ValueError(f"{kind}'s labels are strings: {{value: label}}")
    return listed, titles


def form_schema(fields: dict[str, AskField]) -> dict[str, Any]:
    """The requested schema of a form: a flat object of primitive properties."""
    return {
        "type": "object",
        "properties": {key: field.schema() for key, field in fields.items()},
        "required": [key for key, field in fields.items() if field.required],
    }


def fields_from_schema(schema: dict[str, Any]) -> dict[str, AskField]:
    """The fields of a form schema (the inverse of ``form_schema``), for answers checked after a round trip."""
    required = set(schema.get("required", ()))
    return {key: AskField.from_schema(prop, key in required) for key, prop in schema.get("properties", {}).items()}


def validate_form(fields: dict[str, AskField], content: Any) -> tuple[dict[str, Any], list[str]]:
    """Check a form answer: returns the cleaned content (defaults filled) and the problems."""
    if not isinstance(content, dict):
        return {}, [f"expected the answer to be an object of field values, got {content!r}"]
    problems: list[str] = []
    clean: dict[str, Any] = {}
    for key, field in fields.items():
        if key in content and content[key] is not None:
            try:
                clean[key] = field.check(content[key], key)
            except ValueError as exc:
                problems.append(str(exc))
        elif field.has_default:
            clean[key] = field.default_value
        elif field.required:
            problems.append(f'"{key}" is required but was not answered')
    return clean, problems  # (a key the form lacks is dropped: MCP's requestedSchema cannot forbid extra keys)
