"""Tool input: the pydantic model built from builder fields, and one-sentence validation errors."""

from __future__ import annotations

from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from ._errors import INVALID_INPUT, ToolError

_MISSING: Any = ...


class InputFields:
    """Collects ``with_*`` fields in order and builds the strict input model once."""

    def __init__(self) -> None:
        self.definitions: dict[str, tuple[Any, Any]] = {}

    def add(
        self, key: str, annotation: Any, description: str | None, *, default: Any = _MISSING, optional: bool = False
    ) -> None:
        if not key.isidentifier():
            raise ValueError(f"field name {key!r} must be a Python identifier")
        if key in self.definitions:
            raise ValueError(f"field {key!r} is defined twice")
        if optional and default is _MISSING:
            annotation, default = annotation | None, None
        self.definitions[key] = (annotation, Field(default, description=description))

    def build(self, tool_name: str) -> type[BaseModel]:
        name = "".join(part.title() for part in tool_name.replace("-", "_").replace(".", "_").split("_")) + "Input"
        return pydantic.create_model(name, __config__=ConfigDict(extra="forbid"), **self.definitions)


def enum_annotation(values: list[Any]) -> Any:
    if not values:
        raise ValueError("an enum needs at least one value")
    return Literal[tuple(values)]


def strict_model(model: type[BaseModel]) -> type[BaseModel]:
    """The user's model, refusing unknown keys unless it says otherwise."""
    if model.model_config.get("extra") is not None:
        return model
    return type(
        model.__name__,
        (model,),
        {"model_config": ConfigDict(**model.model_config, extra="forbid"), "__module__": model.__module__},
    )


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def validate_input(tool_name: str, model: type[BaseModel], args: Any) -> BaseModel:
    """Validate ``args`` or raise ``INVALID_INPUT`` naming every bad field."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolError(
            INVALID_INPUT,
            f'Invalid input for tool "{tool_name}": expected an object of named arguments, got {_shown(args)}.',
            recovery="Send the arguments as a JSON object.",
        )
    try:
        return model.model_validate(args)
    except pydantic.ValidationError as exc:
        problems = [describe_problem(error, model) for error in exc.errors()]
        raise ToolError(
            INVALID_INPUT,
            f'Invalid input for tool "{tool_name}": ' + "; ".join(problems) + ".",
            recovery="Fix the named fields and call again; the tool's input schema lists every field.",
            details={"errors": problems},
        ) from None


def describe_problem(error: Any, model: type[BaseModel] | None = None) -> str:
    """One clause for one pydantic error: the field, what was expected, what was sent."""
    field = ".".join(str(part) for part in error.get("loc", ())) or "(input)"
    kind = error.get("type")
    if kind == "missing":
        return f'field "{field}" is required but was not sent'
    if kind == "extra_forbidden":
        known = ", ".join(model.model_fields) if model is not None else ""
        suffix = f" (known fields: {known})" if known else ""
        return f'field "{field}" is not accepted{suffix}, got {_shown(error.get("input"))}'
    expected = (
        str(error.get("msg", "")).removeprefix("Input should be ").removeprefix("Value error, ").split(", unable to")[0]
    )
    return f'field "{field}" expected {expected}, got {_shown(error.get("input"))}'


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"
