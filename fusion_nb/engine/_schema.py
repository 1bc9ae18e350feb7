"""Tool input: its JSON schema and model from builder fields, and bounded one-sentence validation errors.

Registering a tool builds no pydantic model: the schema is assembled from one cached
fragment per field type, and the model is built on the first call (``ToolInput``).

Whatever a client sends, the INVALID_INPUT answer is one sentence of at most
``MAX_MESSAGE`` characters: one clause per bad field (field, what was expected, what
was sent), every name and value shown truncated, and "... and N more fields" when
the clauses do not fit. A client controls the field names and values it sends, so
nothing it sent is ever echoed unbounded.

Numbers: JSON has no NaN or Infinity and the input schema's ``"type": "number"``
cannot promise them, so they are refused. Built models and ``with_model`` models get
``allow_inf_nan=False`` in their config (unless the author set it); that config
does not reach models nested inside them, so validated input that contains nested
models is checked once more by a walk over it (``_non_finite``).
"""

from __future__ import annotations

import functools
import json
import math
import re
import reprlib
import types
import typing
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from ._errors import INVALID_INPUT, ToolError

_MISSING: Any = ...

#: an RFC 9110 token: what an ``x-mcp-header`` name must be (SEP-2243)
HEADER_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

#: the whole INVALID_INPUT message is at most this long
MAX_MESSAGE = 1024
#: at most this many pydantic errors are read (the rest are only counted)
_MAX_ERRORS_READ = 100
_MAX_NAME = 40  # one field-name part, as shown
_MAX_PATH = 100  # a whole dotted field path, as shown
_MAX_VALUE = 60  # a sent value's repr, as shown
_MAX_EXPECTED = 160  # what was expected, as shown
_MAX_KNOWN = 200  # the known-fields hint
_FINITE = "a finite number (NaN and Infinity are not accepted)"


class InputFields:
    """Collects ``with_*`` fields in order; ``spec`` makes the tool's ``ToolInput`` without building a model."""

    def __init__(self) -> None:
        self.definitions: dict[str, tuple[Any, Any, str | None]] = {}  # name -> (annotation, default, description)
        self.headers: dict[str, str] = {}  # name -> its SEP-2243 ``x-mcp-header`` (few fields have one)

    def add(
        self,
        key: str,
        annotation: Any,
        description: str | None,
        *,
        default: Any = _MISSING,
        optional: bool = False,
        header: str | None = None,
    ) -> None:
        """Add one field; names are identifiers and unique, ``optional`` makes it nullable with default None."""
        if not key.isidentifier():
            raise ValueError(f"field name {key!r} must be a Python identifier")
        if key in self.definitions:
            raise ValueError(f"field {key!r} is defined twice")
        if header is not None:
            if not isinstance(header, str) or not HEADER_TOKEN.fullmatch(header):
                raise ValueError(
                    f'field "{key}": x-mcp-header must be a header name token (letters, digits, -), got {header!r:.40}'
                )
            if optional and (default is _MISSING or default is None):  # null has no header form: give a default instead
                raise ValueError(f'field "{key}" mirrored into a header cannot be optional; give it a default instead')
            self.headers[key] = header
        if optional and default is _MISSING:
            annotation, default = annotation | None, None
        elif default is not _MISSING and not (optional and default is None):  # fails here, not in a form later
            try:
                _adapter(annotation).validate_python(default)
            except pydantic.ValidationError as exc:
                reason = exc.errors()[0]["msg"].lower()
                raise ValueError(f'field "{key}" cannot default to {default!r} ({reason})') from None
        self.definitions[key] = (annotation, default, description)

    def spec(self, tool_name: str) -> ToolInput:
        """The tool's input: its JSON schema now (from cached per-type fragments), its model on first use.

        A field pydantic would warn about or refuse (a leading underscore, a name
        ``BaseModel`` already has) or a type whose schema is not a plain fragment
        builds the model now, as registration always did, so the same error or
        warning comes from ``handle()``.
        """
        fields = tuple((key, *definition) for key, definition in self.definitions.items())
        schema = _assembled_schema(fields)
        inputs = ToolInput.of_model(_build_model(tool_name, fields)) if schema is None else None
        if self.headers:
            properties = (inputs.schema if inputs is not None else schema or {})["properties"]
            for key, header in self.headers.items():
                properties[key]["x-mcp-header"] = header
        return inputs if inputs is not None else ToolInput(schema or {}, None, tool_name, fields)


class ToolInput:
    """A tool's input: the JSON schema clients see (a dict kept as sent) and the model that validates it.

    For builder fields the model is built on first use (a call, or ``Tool.input_model``) and
    shared by every tool of the same class name and fields (a re-run cell, another app), so
    registering a tool builds no pydantic class: that was most of a tool's memory and time.
    """

    __slots__ = ("_fields", "_model", "_name", "schema")

    def __init__(
        self, schema: dict[str, Any], model: type[BaseModel] | None, tool_name: str = "", fields: tuple[Any, ...] = ()
    ) -> None:
        self.schema = schema
        self._model = model
        self._name = tool_name
        self._fields = fields

    @classmethod
    def of_model(cls, model: type[BaseModel]) -> ToolInput:
        """The input of a tool whose model exists already (``with_model``)."""
        return cls(input_schema(model), model)

    def validator(self, tool_name: str) -> Callable[[Any], Any]:
        """The function that validates one call's arguments into the handler's ``input``."""
        return _Validator(tool_name, self).validated

    @property
    def model(self) -> type[BaseModel]:
        """The strict input model (built, or found among identical ones, the first time it is asked for)."""
        model = self._model
        if model is None:
            # (a default's type too: 1 == True, yet an enum of both must keep the one it was given)
            key: Any = (_model_name(self._name), tuple((*field, type(field[2])) for field in self._fields))
            try:
                model = _MODELS.get(key)
            except TypeError:  # an unhashable default or enum value: this tool's own model
                key = None
            if model is None:
                model = _build_model(self._name, self._fields)
                if key is not None:
                    _MODELS[key] = model
            self._model, self._fields = model, ()
        return model


#: built input models by (class name, fields), alive while a tool holds them
_MODELS: weakref.WeakValueDictionary[Any, type[BaseModel]] = weakref.WeakValueDictionary()


def _model_name(tool_name: str) -> str:
    """``billing.refund-v2`` -> ``BillingRefundV2Input``."""
    return "".join(part.title() for part in tool_name.replace("-", "_").replace(".", "_").split("_")) + "Input"


def _build_model(tool_name: str, fields: tuple[Any, ...]) -> type[BaseModel]:
    """The input model of ``tool_name``: unknown keys and non-finite numbers are refused."""
    name = _model_name(tool_name)
    config = ConfigDict(extra="forbid", allow_inf_nan=False)
    definitions: dict[str, Any] = {
        key: (annotation, Field(default, description=description)) for key, annotation, default, description in fields
    }
    model: type[BaseModel] = pydantic.create_model(name, __config__=config, **definitions)
    return model


def _adapter(annotation: Any) -> pydantic.TypeAdapter[Any]:
    """One ``TypeAdapter`` per field type (``StrictStr``...), not one per field with a default."""
    adapter: pydantic.TypeAdapter[Any] = _per_type(annotation, _ADAPTERS, pydantic.TypeAdapter)
    return adapter


def _fragment(annotation: Any) -> dict[str, Any] | None:
    """The JSON schema of one field type as pydantic writes it in a model, or None if it is not self-contained."""
    fragment: dict[str, Any] | None = _per_type(annotation, _FRAGMENTS, _new_fragment)
    return fragment


def _new_fragment(annotation: Any) -> dict[str, Any] | None:
    try:
        fragment = pydantic.TypeAdapter(annotation).json_schema()
    except Exception:  # the model, built at registration then, raises what pydantic says about it
        return None
    text = json.dumps(fragment)
    return None if '"$ref"' in text or '"$defs"' in text or "title" in fragment else fragment


_ADAPTERS: dict[Any, tuple[Any, Any]] = {}
_FRAGMENTS: dict[Any, tuple[Any, Any]] = {}
_PER_TYPE_MAX = 512


def _per_type(annotation: Any, cache: dict[Any, tuple[Any, Any]], make: Callable[[Any], Any]) -> Any:
    """``make(annotation)``, kept per annotation object (looked up by identity: hashing
    ``Annotated`` types costs more than the rest of a registration); a bounded cache."""
    found = cache.get(id(annotation))
    if found is not None and found[0] is annotation:
        return found[1]
    value = make(annotation)
    if len(cache) >= _PER_TYPE_MAX:
        cache.clear()
    cache[id(annotation)] = (annotation, value)  # (holding it keeps its id from being reused)
    return value


@functools.lru_cache(maxsize=1024)
def _plain_name(key: str) -> bool:
    """Whether pydantic takes ``key`` as a field without error or warning (no ``_`` start, not a ``BaseModel`` name)."""
    return not key.startswith("_") and not hasattr(BaseModel, key)


def _copied(value: Any) -> Any:
    """A copy of a JSON value (each tool's schema is its own: a caller may change it)."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


@functools.lru_cache(maxsize=1024)
def _title(key: str) -> str:
    """A field's title as pydantic derives it (one string per name, not one per tool)."""
    return key.title().replace("_", " ").strip()


def _assembled_schema(fields: tuple[Any, ...]) -> dict[str, Any] | None:
    """The schema ``model_json_schema`` gives for ``fields`` (keys sorted as pydantic sorts them), or None.

    None when a field needs the model itself: a name pydantic refuses or warns about,
    or a type whose schema has definitions or titles of its own.
    """
    properties: dict[str, Any] = {}
    required = []
    for key, annotation, default, description in fields:
        if not _plain_name(key):
            return None
        fragment = _fragment(annotation)
        if fragment is None:
            return None
        field = _copied(fragment)
        field["title"] = _title(key)
        if description is not None:
            field["description"] = description
        if default is _MISSING:
            required.append(key)
        else:
            field["default"] = to_jsonable_python(default)
        properties[key] = dict(sorted(field.items()))
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema["type"] = "object"
    return schema


def enum_annotation(values: list[Any]) -> Any:
    """The annotation of a ``with_enum`` field: a ``Literal`` of its values."""
    if not values:
        raise ValueError("an enum needs at least one value")
    return Literal[tuple(values)]


def strict_model(model: type[BaseModel]) -> type[BaseModel]:
    """The user's model, refusing unknown keys and NaN/Infinity unless its config says otherwise.

    A subclass carries the stricter config (the handler still receives an instance
    of the user's class); a model that already sets both options is used as is.
    """
    config = model.model_config
    overrides: dict[str, Any] = {}
    if config.get("extra") is None:
        overrides["extra"] = "forbid"
    if config.get("allow_inf_nan") is None:
        overrides["allow_inf_nan"] = False
    if not overrides:
        return model
    return type(
        model.__name__,
        (model,),
        {"model_config": ConfigDict(**{**config, **overrides}), "__module__": model.__module__},  # type: ignore[typeddict-item]
    )


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema clients see: the model's, without its title, always with ``properties``."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def input_validator(tool_name: str, inputs: ToolInput) -> Callable[[Any], Any]:
    """The function that validates one tool's arguments (built once per registration, run per call)."""
    return inputs.validator(tool_name)


class _Validator:
    """One tool's validation: the model, and whether it needs the non-finite walk, looked up on the first call.

    The model may be built then (a registration builds none), so a call pays only for
    pydantic's own validation. A slotted object, not a closure: it is held per tool.
    """

    __slots__ = ("empty", "inputs", "model", "tool_name", "validate", "walk")

    def __init__(self, tool_name: str, inputs: ToolInput) -> None:
        self.tool_name, self.inputs = tool_name, inputs
        self.validate: Callable[[Any], BaseModel] | None = None
        self.model: type[BaseModel] = BaseModel
        self.walk = False
        self.empty: BaseModel | None = None

    def validated(self, args: Any) -> BaseModel:
        validate = self.validate
        if validate is None:
            model = self.model = self.inputs.model
            self.walk, self.empty = _needs_finite_walk(model), _shared_empty(model)
            validate = self.validate = model.__pydantic_validator__.validate_python  # (what model_validate calls)
        if args is None or (not args and type(args) is dict):
            if self.empty is not None:
                return self.empty
            args = {}
        elif not isinstance(args, dict):
            raise ToolError(
                INVALID_INPUT,
                f'Invalid input for tool "{_clip(self.tool_name, 80)}": expected an object of named arguments, '
                f"got {_shown(args)}.",
                recovery="Send the arguments as a JSON object.",
            )
        try:
            value: BaseModel = validate(args)
        except pydantic.ValidationError as exc:
            errors = exc.errors(include_url=False)[:_MAX_ERRORS_READ]
            problems = describe_problems(errors, self.model)
            unread = max(0, exc.error_count() - len(errors))
            raise invalid_input(self.tool_name, problems, unread) from None
        if self.walk:
            bad = [f'field "{_path(loc)}" expected {_FINITE}, got {_shown(sent)}' for loc, sent in _non_finite(value)]
            if bad:
                raise invalid_input(self.tool_name, bad, 0)
        return value


def _shared_empty(model: type[BaseModel]) -> BaseModel | None:
    """The one instance every argument-less call of ``model`` gets, when instances cannot differ.

    A model without fields, extra keys, private attributes, validators or a
    ``model_post_init`` of its own validates ``{}`` to interchangeable instances that
    refuse attribute assignment; every in-flight call would otherwise hold its own.
    """
    if (
        model.model_fields
        or model.model_config.get("extra") == "allow"
        or model.__private_attributes__
        or model.model_post_init is not BaseModel.model_post_init
        or any(getattr(model.__pydantic_decorators__, kind) for kind in _VALIDATOR_KINDS)
    ):
        return None
    try:
        empty: BaseModel = model.__pydantic_validator__.validate_python({})
    except pydantic.ValidationError:
        return None
    return empty


_VALIDATOR_KINDS = ("validators", "field_validators", "root_validators", "model_validators", "field_serializers")


def invalid_input(tool_name: str, problems: list[str], unread: int = 0) -> ToolError:
    """The INVALID_INPUT error: as many clauses as fit in ``MAX_MESSAGE``, then how many more.

    ``details["errors"]`` holds exactly the clauses the message shows, so it is bounded
    like the message; ``details["more_errors"]`` counts the rest when there are any.
    """
    text, shown, more = _bounded(f'Invalid input for tool "{_clip(tool_name, 80)}": ', problems, unread)
    details: dict[str, Any] = {"errors": shown}
    if more:
        details["more_errors"] = more
    return ToolError(
        INVALID_INPUT,
        text,
        recovery="Fix the named fields and call again; the tool's input schema lists every field.",
        details=details,
    )


def validation_sentence(head: str, error: pydantic.ValidationError, *, under: tuple[str, ...] = ()) -> str:
    """``head`` and one clause per bad field of ``error``, in one sentence of at most ``MAX_MESSAGE`` characters.

    For whatever else validates what a client sent (a request's params): the same
    clauses as a tool's INVALID_INPUT (field, what was expected, what was sent, each
    clipped), however many errors and however large the values. ``under`` is the path
    the validated value sits at (``("params",)``), shown before each field.
    """
    errors = [{**found, "loc": (*under, *found["loc"])} for found in error.errors(include_url=False)[:_MAX_ERRORS_READ]]
    return _bounded(_clip(head, 200), describe_problems(errors), max(0, error.error_count() - len(errors)))[0]


def _bounded(head: str, problems: list[str], unread: int) -> tuple[str, list[str], int]:
    """``head`` and the clauses that fit, "... and N more fields", a full stop; the clauses shown; N."""
    reserve = len("; ... and 99999999 more fields.")
    shown: list[str] = []
    length = len(head)
    for problem in problems:
        extra = len(problem) + (2 if shown else 0)
        if shown and length + extra + reserve > MAX_MESSAGE:
            break
        if not shown and length + extra + reserve > MAX_MESSAGE:  # one clause always shows, clipped
            problem = _clip(problem, MAX_MESSAGE - length - reserve)
            extra = len(problem)
        shown.append(problem)
        length += extra
    more = len(problems) - len(shown) + unread
    text = head + "; ".join(shown)
    if more:
        text += f"; ... and {more} more field{'s' if more != 1 else ''}"
    return text + ".", shown, more


def describe_problems(errors: list[Any], model: type[BaseModel] | None = None) -> list[str]:
    """One clause per field for pydantic ``errors`` (a union's alternatives merge into one clause)."""
    merged: dict[tuple[str, str], list[Any]] = {}
    for error in errors:
        loc = _without_union_tags(tuple(error.get("loc", ())))
        kind = error.get("type")
        key = (_path(loc), "extra" if kind == "extra_forbidden" else "missing" if kind == "missing" else "value")
        merged.setdefault(key, []).append({**error, "loc": loc})
    problems, hinted = [], False
    for group in merged.values():
        first = group[0]
        if first.get("type") == "extra_forbidden":
            problems.append(_describe_extra(first, model if not hinted else None))
            hinted = True
        elif len(group) == 1:
            problems.append(describe_problem(first, model))
        else:
            alternatives = list(dict.fromkeys(_expected(error) for error in group))
            expected = _clip(" or ".join(alternatives), _MAX_EXPECTED)
            problems.append(f'field "{_path(first["loc"])}" expected {expected}, got {_shown(first.get("input"))}')
    return problems


def describe_problem(error: Any, model: type[BaseModel] | None = None) -> str:
    """One clause for one pydantic error: the field, what was expected, what was sent."""
    field = _path(tuple(error.get("loc", ())))
    kind = error.get("type")
    if kind == "missing":
        return f'field "{field}" is required but was not sent'
    if kind == "extra_forbidden":
        return _describe_extra(error, model)
    if kind in ("value_error", "assertion_error"):
        reason = str(error.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        return (
            f'field "{field}" is invalid ({_clip(_oneline(reason), _MAX_EXPECTED)}), got {_shown(error.get("input"))}'
        )
    return f'field "{field}" expected {_expected(error)}, got {_shown(error.get("input"))}'


def _describe_extra(error: Any, model: type[BaseModel] | None) -> str:
    field = _path(tuple(error.get("loc", ())))
    known = _known_fields(model) if model is not None else ""
    suffix = f" (known fields: {known})" if known else ""
    return f'field "{field}" is not accepted{suffix}, got {_shown(error.get("input"))}'


def _known_fields(model: type[BaseModel]) -> str:
    names = [field.alias or name for name, field in model.model_fields.items()]
    text = ""
    for index, name in enumerate(names):
        part = (", " if text else "") + _name(name)
        if len(text) + len(part) > _MAX_KNOWN:
            return f"{text}, ... ({len(names) - index} more)"
        text += part
    return text


_PHRASES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "int_parsing_size": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": _FINITE,
    "bool_type": "a boolean (true or false)",
    "bool_parsing": "a boolean (true or false)",
    "string_type": "a string",
    "string_unicode": "a string",
    "bytes_type": "a string",
    "none_required": "null",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dict_type": "an object",
    "dataclass_type": "an object",
    "typed_dict_type": "an object",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "frozen_set_type": "a list",
    "iterable_type": "a list",
}
_BOUNDS = {
    "greater_than": ("gt", "a value greater than {}"),
    "greater_than_equal": ("ge", "at least {}"),
    "less_than": ("lt", "a value less than {}"),
    "less_than_equal": ("le", "at most {}"),
    "multiple_of": ("multiple_of", "a multiple of {}"),
    "string_too_short": ("min_length", "a string of at least {} characters"),
    "string_too_long": ("max_length", "a string of at most {} characters"),
    "too_short": ("min_length", "at least {} items"),
    "too_long": ("max_length", "at most {} items"),
    "literal_error": ("expected", "{}"),
    "enum": ("expected", "{}"),
    "string_pattern_mismatch": ("pattern", "a string matching the pattern {!r}"),
}


def _expected(error: Any) -> str:
    """What the field expected, in words, bounded (pydantic's message only as the last resort)."""
    kind = error.get("type")
    phrase = _PHRASES.get(kind)
    if phrase is not None:
        return phrase
    bound = _BOUNDS.get(kind)
    context = error.get("ctx") or {}
    if bound is not None and bound[0] in context:
        return _clip(_oneline(bound[1].format(context[bound[0]])), _MAX_EXPECTED)
    message = _oneline(str(error.get("msg", "")))
    if message.startswith("Input should be "):
        message = message.removeprefix("Input should be ").split(", ")[0]
    else:
        message = f"a valid value ({message[:1].lower()}{message[1:]})"
    return _clip(message, _MAX_EXPECTED)


#: labels pydantic puts in ``loc`` for the alternatives of a union (``int | str`` -> "int", "str")
_UNION_TAG = re.compile(
    r"(int|float|str|bool|bytes|none|decimal|date|datetime|time|timedelta|uuid|url|any|"
    r"list|dict|set|frozenset|tuple|literal|function-\w+|json-or-python|tagged-union|nullable)(\[.*\])?",
    re.DOTALL,
)


def _without_union_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # the first part is always a top-level field name, never a tag
    return loc[:1] + tuple(part for part in loc[1:] if not (isinstance(part, str) and _UNION_TAG.fullmatch(part)))


def _path(loc: tuple[Any, ...]) -> str:
    """``("route", "legs", 2, "km")`` -> ``route.legs[2].km``, every name clipped, the whole bounded."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + _name(str(part))
    return _clip(text, _MAX_PATH) or "(input)"


def _name(name: str) -> str:
    """A field name as shown inside double quotes: clipped, quotes and control characters escaped."""
    return json.dumps(_clip(name, _MAX_NAME), ensure_ascii=False)[1:-1]


_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = _MAX_VALUE + 10
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = _repr.maxfrozenset = 6
_repr.maxlevel = 3
_repr.maxlong = 40


def _shown(value: Any) -> str:
    """A sent value as ``repr (type)``; computing it costs the same whatever the value's size."""
    try:
        text = _repr.repr(value)
    except Exception:
        text = "..."
    return f"{_clip(_oneline(text), _MAX_VALUE)} ({_clip(type(value).__name__, _MAX_NAME)})"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def _oneline(text: str) -> str:
    return " ".join(text.split()) if ("\n" in text or "\r" in text) else text


# -- NaN and Infinity inside nested models ---------------------------------------------

_WALK_NEEDED: weakref.WeakKeyDictionary[type[BaseModel], bool] = weakref.WeakKeyDictionary()
_SCALARS = (str, int, float, bool, bytes, type(None))


def _needs_finite_walk(model: type[BaseModel]) -> bool:
    """Whether validated input of ``model`` may hold floats its own config did not check."""
    needed = _WALK_NEEDED.get(model)
    if needed is None:
        needed = model.model_config.get("allow_inf_nan") is False and not all(
            _config_covers(field.annotation) for field in model.model_fields.values()
        )
        _WALK_NEEDED[model] = needed
    return needed


def _config_covers(annotation: Any) -> bool:
    """Whether every float in ``annotation`` is validated under the enclosing model's own config."""
    if annotation in _SCALARS:
        return True
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return True
    if origin in (typing.Union, types.UnionType, list, tuple, set, frozenset, dict, Mapping):
        return all(arg is Ellipsis or _config_covers(arg) for arg in typing.get_args(annotation))
    return False  # nested models, dataclasses, Any, anything else: walk


def _non_finite(value: Any) -> Iterator[tuple[tuple[Any, ...], float]]:
    """Where validated input holds NaN or Infinity (models that explicitly allow them are skipped)."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        loc, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                yield loc, item
        elif isinstance(item, BaseModel):
            if item.model_config.get("allow_inf_nan") is True and loc:
                continue
            fields = type(item).model_fields
            children = [((*loc, field.alias or name), getattr(item, name, None)) for name, field in fields.items()]
            stack.extend(reversed(children))  # popped in field order
        elif isinstance(item, dict):
            stack.extend(reversed([((*loc, str(key)), child) for key, child in item.items()]))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([((*loc, index), child) for index, child in enumerate(item)]))
        elif isinstance(item, (set, frozenset)):
            stack.extend((loc, child) for child in item)
