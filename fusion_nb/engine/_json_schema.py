"""Tool input declared as raw JSON Schema (``with_schema``): kept as given, validated before the handler.

Registering such a tool costs a copy of the schema and a few cheap checks: ``jsonschema``
(a dependency of the MCP SDK) is imported and the schema compiled on the first call, so
an app of many tools, or one that never calls this one, pays nothing for it. The dialect
is the schema's ``$schema`` (2020-12 when absent, as MCP says); a ``$ref`` resolves
inside the schema only, never over the network (SEP-2106). A bad call gets the same one
bounded sentence as the other tools (field, what was expected, what was sent).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ._errors import INTERNAL_ERROR, INVALID_INPUT, ToolError
from ._schema import (
    _FINITE,
    _MAX_ERRORS_READ,
    _MAX_EXPECTED,
    HEADER_TOKEN,
    ToolInput,
    _clip,
    _name,
    _non_finite,
    _oneline,
    _path,
    _shown,
    invalid_input,
)

#: the annotation that mirrors a parameter into an ``Mcp-Param-<name>`` HTTP header (SEP-2243)
X_MCP_HEADER = "x-mcp-header"
_HEADER_TYPES = ("string", "integer", "boolean")


class Arguments(dict[str, Any]):
    """The validated arguments of a ``with_schema`` tool: a dict whose top-level keys read as attributes too.

    ``input["city"]``, ``input.get("unit", "C")`` and ``input.city`` all work; nested
    objects are plain dicts, as the schema left them.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(
                f"the call sent no argument {name!r} (optional arguments are absent: use input.get({name!r}))"
            ) from None


class SchemaInput(ToolInput):
    """A tool's input given as JSON Schema: the schema as sent to clients, its validator made on first use."""

    __slots__ = ("compiled",)

    def __init__(self, tool_name: str, schema: Mapping[str, Any]) -> None:
        super().__init__(_checked_copy(tool_name, schema), None, tool_name)
        self.compiled: Any = None  # the jsonschema validator, made by the first call

    def validator(self, tool_name: str) -> Callable[[Any], Any]:
        """Validation against the schema; the handler's ``input`` is an ``Arguments`` dict."""
        return _schema_validator(tool_name, self)

    @property
    def model(self) -> Any:
        """No pydantic model: the arguments are validated against the schema itself."""
        raise TypeError(f'tool "{self._name}" takes its input as JSON Schema (with_schema): it has no input model')


def _checked_copy(tool_name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON copy of ``schema`` (later changes to the caller's dict do not reach clients), or one ValueError."""
    where = f'tool "{tool_name}": with_schema'
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} takes a JSON Schema object (a dict), got {type(schema).__name__}")
    try:
        copy: dict[str, Any] = json.loads(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} takes a schema made of JSON values only ({_clip(str(exc), 120)})") from None
    if copy.get("type") != "object":
        raise ValueError(f'{where} needs "type": "object" at the top (MCP tool arguments are an object)')
    problem = header_problem(copy)
    if problem is not None:
        raise ValueError(f"{where}: {problem}")
    return copy


def header_problem(schema: Mapping[str, Any]) -> str | None:
    """Why the schema's ``x-mcp-header`` annotations are unusable (SEP-2243), or None.

    A client drops a tool whose annotation is malformed, so it is refused when the tool
    is registered: a non-empty RFC 9110 token, on a string, integer or boolean property
    reached from the top through ``properties`` alone, unique ignoring case.
    """
    seen: dict[str, str] = {}
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        where, node = stack.pop()
        properties = node.get("properties") if isinstance(node, Mapping) else None
        if not isinstance(properties, Mapping):
            continue
        for key, prop in properties.items():
            path = f"{where}.{key}" if where else str(key)
            stack.append((path, prop))
            if not isinstance(prop, Mapping) or X_MCP_HEADER not in prop:
                continue
            header, kind, name = prop[X_MCP_HEADER], prop.get("type"), f'parameter "{_clip(path, 80)}"'
            if not isinstance(header, str) or not HEADER_TOKEN.fullmatch(header):
                return f"{name}: {X_MCP_HEADER} must be a header name token (letters, digits, -), got {header!r:.40}"
            if kind not in _HEADER_TYPES:
                return f'{name}: {X_MCP_HEADER} needs "type" string, integer or boolean, got {kind!r:.40}'
            if header.lower() in seen:
                return f'{X_MCP_HEADER} "{header}" of {name} repeats that of "{seen[header.lower()]}"'
            seen[header.lower()] = path
    return None


def _schema_validator(tool_name: str, inputs: SchemaInput) -> Callable[[Any], Arguments]:
    """The function that validates one call's arguments against the tool's schema."""

    def validated(args: Any) -> Arguments:
        validator = inputs.compiled
        if validator is None:
            validator = inputs.compiled = _compiled(tool_name, inputs.schema)
        if args is None:
            args = {}
        elif not isinstance(args, dict):
            raise ToolError(
                INVALID_INPUT,
                f'Invalid input for tool "{_clip(tool_name, 80)}": expected an object of named arguments, '
                f"got {_shown(args)}.",
                recovery="Send the arguments as a JSON object.",
            )
        problems: list[str] = []
        count = 0
        try:
            for error in validator.iter_errors(args):
                count += 1
                if count <= _MAX_ERRORS_READ:
                    problems.extend(_clauses(error))
        except Exception as exc:  # an unresolvable $ref, a bad pattern: the author's schema, not the caller
            raise _unusable(tool_name, exc) from None
        if not problems:
            problems = [
                f'field "{_path(loc)}" expected {_FINITE}, got {_shown(sent)}' for loc, sent in _non_finite(args)
            ]
        if problems:
            raise invalid_input(tool_name, list(dict.fromkeys(problems)), max(0, count - _MAX_ERRORS_READ))
        return Arguments(args)

    return validated


def _compiled(tool_name: str, schema: dict[str, Any]) -> Any:
    """The schema's validator class (its ``$schema``, else 2020-12), checked against its meta-schema."""
    import jsonschema  # (here: importing it costs more than registering hundreds of tools)

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise _unusable(tool_name, exc) from None
    return cls(schema)


def _unusable(tool_name: str, exc: BaseException) -> ToolError:
    reason = _clip(_oneline(getattr(exc, "message", None) or str(exc) or type(exc).__name__), 200)
    return ToolError(
        INTERNAL_ERROR,
        f'Tool "{_clip(tool_name, 80)}" cannot check its input: its JSON Schema is not usable ({reason}).',
        recovery="The tool's author must fix its with_schema(...) schema; calling again will not help.",
    )


_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "object": "an object",
    "array": "a list",
    "null": "null",
}
_BOUNDS = {
    "minimum": "at least {}",
    "maximum": "at most {}",
    "exclusiveMinimum": "a value greater than {}",
    "exclusiveMaximum": "a value less than {}",
    "multipleOf": "a multiple of {}",
    "minLength": "a string of at least {} characters",
    "maxLength": "a string of at most {} characters",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
    "minProperties": "at least {} fields",
    "maxProperties": "at most {} fields",
    "pattern": "a string matching the pattern {!r}",
    "const": "{!r}",
}


def _clauses(error: Any) -> list[str]:
    """The clauses of one ``jsonschema`` error: field, what was expected, what was sent."""
    loc = tuple(error.absolute_path)
    kind = error.validator
    if kind == "required":
        return [f'field "{_path((*loc, name))}" is required but was not sent' for name in _missing(error)]
    if kind in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, Mapping):
        known = error.schema.get("properties", {})
        extra = [name for name in error.instance if name not in known] or list(error.instance)
        hint = ", ".join(_name(str(name)) for name in list(known)[:10])
        suffix = f" (known fields: {_clip(hint, 200)})" if hint else ""
        return [
            f'field "{_path((*loc, name))}" is not accepted{suffix}, got {_shown(error.instance[name])}'
            for name in extra
        ]
    return [f'field "{_path(loc)}" expected {_expected(error)}, got {_shown(error.instance)}']


def _expected(error: Any) -> str:
    """What a schema keyword wanted, in words, bounded."""
    kind, value = error.validator, error.validator_value
    if kind == "type":
        kinds = [value] if isinstance(value, str) else list(value)
        return _clip(" or ".join(_TYPES.get(k, str(k)) for k in kinds), _MAX_EXPECTED)
    if kind == "enum":
        return _clip("one of " + ", ".join(repr(v) for v in value), _MAX_EXPECTED)
    if kind in _BOUNDS:
        return _clip(_BOUNDS[kind].format(value), _MAX_EXPECTED)
    if kind in ("anyOf", "oneOf") and error.context:
        return _clip(" or ".join(dict.fromkeys(_alternative(e) for e in error.context)), _MAX_EXPECTED)
    return _clip(f"a valid value ({_oneline(str(error.message))})", _MAX_EXPECTED)


def _alternative(error: Any) -> str:
    """One alternative of an ``anyOf``/``oneOf``, as a phrase (a required field names that field)."""
    if error.validator == "required":
        names = [f'"{_name(str(name))}"' for name in _missing(error)]
        return f"the field{'s' if len(names) > 1 else ''} " + " and ".join(names)
    return _expected(error)


def _missing(error: Any) -> list[Any]:
    """The names a ``required`` error found absent."""
    names = list(error.validator_value)
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    return [name for name in names if name not in instance] or list(names)
