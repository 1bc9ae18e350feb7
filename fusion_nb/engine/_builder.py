"""The fluent tool builder: ``f.query("name").describe(...).with_string(...).handle(fn)``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .middleware import Middleware
from .schema import _MISSING, InputFields, enum_annotation, strict_model

if TYPE_CHECKING:
    from .app import Fusion
    from .tool import Tool

_VERB_HINTS = {
    "action": {},
    "query": {"readOnlyHint": True},
    "mutation": {"destructiveHint": True},
}


class ToolBuilder:
    """Chainable description of one tool; ``handle(fn)`` registers it with the app."""

    def __init__(self, app: Fusion, verb: str, name: str) -> None:
        if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
            raise ValueError(f"a tool name must be a non-empty string without spaces, got {name!r}")
        self._app = app
        self._verb = verb
        self._name = name
        self._description: str | None = None
        self._fields = InputFields()
        self._model: type[BaseModel] | None = None
        self._returns: type[BaseModel] | None = None
        self._annotations: dict[str, bool] = dict(_VERB_HINTS[verb])
        self._middleware: list[Middleware] = []
        self._presenter: Callable[[Any], Any] | None = None
        self._interactive = False
        self._timeout: float | None = None
        self._max_rounds: int | None = None
        self._concurrency: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return self._name

    def describe(self, text: str) -> ToolBuilder:
        self._description = inspect.cleandoc(text)
        return self

    def _field(self, key: str, annotation: Any, description: str | None, default: Any, optional: bool) -> ToolBuilder:
        if self._model is not None:
            raise ValueError(
                f'tool "{self._name}" already takes its input from with_model(); add the field to the model instead'
            )
        self._fields.add(key, annotation, description, default=default, optional=optional)
        return self

    def with_string(
        self, key: str, description: str | None = None, *, default: Any = _MISSING, optional: bool = False
    ) -> ToolBuilder:
        return self._field(key, str, description, default, optional)

    def with_number(
        self, key: str, description: str | None = None, *, default: Any = _MISSING, optional: bool = False
    ) -> ToolBuilder:
        return self._field(key, float, description, default, optional)

    def with_integer(
        self, key: str, description: str | None = None, *, default: Any = _MISSING, optional: bool = False
    ) -> ToolBuilder:
        return self._field(key, int, description, default, optional)

    def with_boolean(
        self, key: str, description: str | None = None, *, default: Any = _MISSING, optional: bool = False
    ) -> ToolBuilder:
        return self._field(key, bool, description, default, optional)

    def with_enum(
        self,
        key: str,
        values: Sequence[Any],
        description: str | None = None,
        *,
        default: Any = _MISSING,
        optional: bool = False,
    ) -> ToolBuilder:
        return self._field(key, enum_annotation(list(values)), description, default, optional)

    def with_model(self, model: type[BaseModel]) -> ToolBuilder:
        if self._fields.definitions:
            raise ValueError(f'tool "{self._name}" already has with_* fields; use either fields or one model')
        self._model = strict_model(model)
        return self

    def returns(self, model: type[BaseModel]) -> ToolBuilder:
        self._returns = model
        return self

    def read_only(self, value: bool = True) -> ToolBuilder:
        self._annotations["readOnlyHint"] = value
        return self

    def destructive(self, value: bool = True) -> ToolBuilder:
        self._annotations["destructiveHint"] = value
        return self

    def idempotent(self, value: bool = True) -> ToolBuilder:
        self._annotations["idempotentHint"] = value
        return self

    def open_world(self, value: bool = True) -> ToolBuilder:
        self._annotations["openWorldHint"] = value
        return self

    def interactive(self) -> ToolBuilder:
        self._interactive = True
        return self

    def use(self, middleware: Middleware) -> ToolBuilder:
        self._middleware.append(middleware)
        return self

    def concurrency(self, max_active: int, max_queue: int = 0) -> ToolBuilder:
        if max_active < 1 or max_queue < 0:
            raise ValueError("concurrency needs max_active >= 1 and max_queue >= 0")
        self._concurrency = (int(max_active), int(max_queue))
        return self

    def timeout(self, seconds: float) -> ToolBuilder:
        if not seconds > 0:
            raise ValueError("a timeout must be a positive number of seconds")
        self._timeout = float(seconds)
        return self

    def max_rounds(self, rounds: int) -> ToolBuilder:
        if rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self._max_rounds = int(rounds)
        return self

    def present(self, fn: Callable[[Any], Any]) -> ToolBuilder:
        self._presenter = fn
        return self

    def handle(self, fn: Callable[..., Any]) -> Tool:
        """Register ``fn(input, ctx)`` as the handler; returns the ``Tool`` (a decorator too)."""
        from .tool import Tool

        description = self._description
        if description is None and fn.__doc__:
            description = inspect.cleandoc(fn.__doc__)
        tool = Tool(
            self._app,
            name=self._name,
            verb=self._verb,
            description=description,
            handler=fn,
            input_model=self._model or self._fields.build(self._name),
            output_model=self._returns,
            annotations=dict(self._annotations),
            middleware=list(self._middleware),
            presenter=self._presenter,
            interactive=self._interactive,
            timeout=self._timeout,
            max_rounds=self._max_rounds,
            concurrency=self._concurrency,
        )
        self._app.register(tool)
        return tool

    def __repr__(self) -> str:
        return f"<ToolBuilder {self._verb} {self._name!r}>"


class BuilderFactory:
    """``f``: starts a builder for one tool of an app."""

    def __init__(self, app: Fusion) -> None:
        self._app = app

    def action(self, name: str) -> ToolBuilder:
        return ToolBuilder(self._app, "action", name)

    def query(self, name: str) -> ToolBuilder:
        return ToolBuilder(self._app, "query", name)

    def mutation(self, name: str) -> ToolBuilder:
        return ToolBuilder(self._app, "mutation", name)
