"""The fluent tool builder: ``f.query("name").describe(...).with_string(...).handle(fn)``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Strict, StrictBool, StrictInt, StrictStr

from ._errors import no_such_attribute
from ._json_schema import SchemaInput, header_problem
from ._middleware import Middleware
from ._schema import _MISSING, InputFields, ToolInput, enum_annotation, strict_model
from ._tasks import TaskOptions
from ._tool import VIEWS, VISIBILITIES, BoundTool, Tool, Verb

if TYPE_CHECKING:
    from ._app import App

#: Builder fields take exactly what their JSON Schema promises: no "3" for an integer,
#: no true for an integer, no "yes" for a boolean (a number may be sent as an integer).
StrictNumber = Annotated[float, Strict()]

_VERB_HINTS: dict[Verb, dict[str, bool]] = {
    Verb.ACTION: {},
    Verb.QUERY: {"readOnlyHint": True},
    Verb.MUTATION: {"destructiveHint": True},
}


class ToolBuilder:
    """Chainable description of one tool; ``handle(fn)`` registers it with the app."""

    def __init__(self, app: App, verb: Verb | str, name: str) -> None:
        if not isinstance(name, str) or not name or len(name.split(maxsplit=1)) != 1 or name.strip() != name:
            raise ValueError(f"a tool name must be a non-empty string without spaces, got {name!r}")
        self._app = app
        self._verb = Verb(verb)
        self._name = name
        self._description: str | None = None
        self._fields = InputFields()
        self._model: type[BaseModel] | None = None
        self._schema: SchemaInput | None = None
        self._returns: type[BaseModel] | None = None
        self._annotations: dict[str, bool] = dict(_VERB_HINTS[self._verb])
        self._middleware: list[Middleware] = []
        self._presenter: Callable[[Any], Any] | None = None
        self._interactive = False
        self._timeout: float | None = None
        self._max_rounds: int | None = None
        self._concurrency: tuple[int, int] | None = None
        self._task: TaskOptions | None = None
        self._scopes: tuple[str, ...] = ()
        self._view: str | None = None
        self._visibility: tuple[str, ...] = VISIBILITIES

    @property
    def name(self) -> str:
        """The MCP name of the tool being built."""
        return self._name

    def describe(self, text: str) -> ToolBuilder:
        """What the tool does, for agents choosing it (default: the handler's docstring)."""
        self._description = inspect.cleandoc(text)
        return self

    def _field(
        self,
        key: str,
        annotation: Any,
        description: str | None,
        default: Any,
        optional: bool,
        header: str | None = None,
    ) -> ToolBuilder:
        if self._model is not None or self._schema is not None:
            how = (
                "with_model(); add the field to the model" if self._model is not None else "with_schema(); add it there"
            )
            raise ValueError(f'tool "{self._name}" already takes its input from {how} instead')
        self._fields.add(key, annotation, description, default=default, optional=optional, header=header)
        return self

    def with_string(
        self,
        key: str,
        description: str | None = None,
        *,
        default: Any = _MISSING,
        optional: bool = False,
        header: str | None = None,
    ) -> ToolBuilder:
        """A string argument ``key``; ``optional=True`` makes it default to ``None``.

        ``header="Region"`` mirrors it into an ``Mcp-Param-Region`` HTTP header (SEP-2243,
        2026-07-28 clients): gateways route on it without reading the body, and the server
        refuses a call whose header and argument disagree. Also on integer, boolean and
        enum fields; a mirrored field is required or has a default (``null`` has no header).
        """
        return self._field(key, StrictStr, description, default, optional, header)

    def with_number(
        self, key: str, description: str | None = None, *, default: Any = _MISSING, optional: bool = False
    ) -> ToolBuilder:
        """A number argument (finite: NaN and infinities are refused)."""
        return self._field(key, StrictNumber, description, default, optional)

    def with_integer(
        self,
        key: str,
        description: str | None = None,
        *,
        default: Any = _MISSING,
        optional: bool = False,
        header: str | None = None,
    ) -> ToolBuilder:
        """An integer argument (``1.5``, ``"3"`` and ``true`` are refused)."""
        return self._field(key, StrictInt, description, default, optional, header)

    def with_boolean(
        self,
        key: str,
        description: str | None = None,
        *,
        default: Any = _MISSING,
        optional: bool = False,
        header: str | None = None,
    ) -> ToolBuilder:
        """A boolean argument."""
        return self._field(key, StrictBool, description, default, optional, header)

    def with_enum(
        self,
        key: str,
        values: Sequence[Any],
        description: str | None = None,
        *,
        default: Any = _MISSING,
        optional: bool = False,
        header: str | None = None,
    ) -> ToolBuilder:
        """An argument that must be one of ``values``."""
        return self._field(key, enum_annotation(list(values)), description, default, optional, header)

    def with_model(self, model: type[BaseModel]) -> ToolBuilder:
        """Take the whole input from a pydantic model (unknown keys refused unless it says otherwise)."""
        if self._fields.definitions or self._schema is not None:
            raise ValueError(f'tool "{self._name}" already has its input; use with_* fields, one model or one schema')
        self._model = strict_model(model)
        return self

    def with_schema(self, schema: Mapping[str, Any]) -> ToolBuilder:
        """Take the whole input as raw JSON Schema (2020-12 unless its ``$schema`` says otherwise).

        Clients get the schema exactly as given (``$schema``, ``$defs``, ``$ref``,
        ``allOf``, ``if``/``then``/``else`` kept), and every call is validated against
        it before the handler runs, which gets the arguments as a dict whose keys also
        read as attributes (``input["city"]`` or ``input.city``). For inputs a pydantic
        model cannot say, or a schema that already exists. ``"x-mcp-header"`` on a
        property mirrors it into an ``Mcp-Param-*`` header, as ``header=`` does.
        """
        if self._fields.definitions or self._model is not None:
            raise ValueError(f'tool "{self._name}" already has its input; use with_* fields, one model or one schema')
        self._schema = SchemaInput(self._name, schema)
        return self

    def returns(self, model: type[BaseModel]) -> ToolBuilder:
        """Declare the output model: an output schema, and structured content checked against it."""
        self._returns = model
        return self

    def read_only(self, value: bool = True) -> ToolBuilder:
        """MCP hint: the tool does not change its environment."""
        self._annotations["readOnlyHint"] = value
        return self

    def destructive(self, value: bool = True) -> ToolBuilder:
        """MCP hint: the tool may destroy or overwrite data."""
        self._annotations["destructiveHint"] = value
        return self

    def idempotent(self, value: bool = True) -> ToolBuilder:
        """MCP hint: calling again with the same arguments has no further effect."""
        self._annotations["idempotentHint"] = value
        return self

    def open_world(self, value: bool = True) -> ToolBuilder:
        """MCP hint: the tool reaches outside systems (the web, other services)."""
        self._annotations["openWorldHint"] = value
        return self

    def interactive(self) -> ToolBuilder:
        """Mark the tool as one that may ask for input (hosts may show it differently)."""
        self._interactive = True
        return self

    def use(self, middleware: Middleware) -> ToolBuilder:
        """Add middleware for this tool only (inside the app's, in the order added)."""
        self._middleware.append(middleware)
        return self

    def concurrency(self, max_active: int, max_queue: int = 0) -> ToolBuilder:
        """At most ``max_active`` bodies at once, ``max_queue`` waiting (FIFO); more get SERVER_BUSY."""
        if max_active < 1 or max_queue < 0:
            raise ValueError("concurrency needs max_active >= 1 and max_queue >= 0")
        self._concurrency = (int(max_active), int(max_queue))
        return self

    def timeout(self, seconds: float) -> ToolBuilder:
        """Abort a call with TIMEOUT after ``seconds`` (queueing and input rounds included)."""
        if not seconds > 0:
            raise ValueError("a timeout must be a positive number of seconds")
        self._timeout = float(seconds)
        return self

    def task(self, mode: str = "optional", ttl: float = 3600, poll_interval: float = 1.0) -> ToolBuilder:
        """Let clients run the tool as a task: the call returns a task id at once and they poll it.

        For work longer than a client waits for one answer (minutes of training, a
        report). ``mode="optional"`` still serves clients without tasks as a plain
        call; ``"required"`` refuses them. ``ttl`` (seconds from creation) is how long
        the task and its result are kept, at most (a client may ask for less);
        ``poll_interval`` (seconds) is the polling pace suggested to clients.
        """
        self._task = TaskOptions(mode, float(ttl), float(poll_interval))
        return self

    def scopes(self, *names: str) -> ToolBuilder:
        """OAuth scopes a caller's token needs for this tool (``http_app(oauth=...)``; 403 without).

        Static bearer tokens carry no scopes and are not limited by them: a scope only
        means something where an authorization server grants it.
        """
        if not names or not all(isinstance(n, str) and n and not any(c.isspace() for c in n) for n in names):
            raise ValueError(f'tool "{self._name}": scopes takes one or more names without spaces, got {names!r:.80}')
        self._scopes = tuple(dict.fromkeys(names))
        return self

    def app(self, view: str | None = None, *, visibility: Sequence[str] = VISIBILITIES) -> ToolBuilder:
        """Show the result as an MCP App (``io.modelcontextprotocol/ui``) in hosts that render them.

        ``view`` is a built-in view (``auto``, the default, picks by the value: a DataFrame as a
        paged table, a figure as a zoomable image; ``table`` and ``image`` insist on one; ``plotly``
        draws a plotly figure with plotly's own bundle, 4.8 MB for plotly 7.1; a ``.task()`` tool's
        ``auto`` is ``job``: its progress, status and a Stop button while it runs, then its result). Clients
        without the extension get the same content as without ``.app()``. ``visibility=["app"]``
        makes an app-only tool: hidden from the model, refused when a client without apps calls it.
        """
        if view is not None and view not in VIEWS:
            raise ValueError(f'tool "{self._name}": .app() takes one of the views {", ".join(VIEWS)}, not {view!r}')
        chosen = tuple(dict.fromkeys(visibility)) if not isinstance(visibility, str) else (visibility,)
        if not chosen or any(v not in VISIBILITIES for v in chosen):
            raise ValueError(
                f'tool "{self._name}": .app() visibility is a list of "model" and "app", not {visibility!r}'
            )
        self._view, self._visibility = view or "auto", chosen
        return self

    def max_rounds(self, rounds: int) -> ToolBuilder:
        """The most input rounds one call may ask for (default: the app's ``max_rounds``)."""
        if rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self._max_rounds = int(rounds)
        return self

    def present(self, fn: Callable[[Any], Any]) -> ToolBuilder:
        """Turn the response value into what the default presenter shows (for every handler kind).

        ``fn(value)`` is called once per successful call, synchronously on the event loop, with
        what the handler (through its middleware) returned; its return value is then presented as
        usual (a ``str`` as text, a dict or model as structured content, bytes as an image or blob).
        Raising ``ToolError`` there makes the call an error result. Example::

            @f.query("report").present(lambda rows: "\\n".join(f"{r.name}: {r.total}" for r in rows)).handle
            async def report(input, ctx):
                return await load_rows()
        """
        self._presenter = fn
        return self

    def handle(self, fn: Callable[..., Any]) -> BoundTool:
        """Register ``fn(input, ctx)`` as the handler; returns the callable tool (a decorator too)."""
        description = self._description
        if description is None and fn.__doc__:
            description = inspect.cleandoc(fn.__doc__)
        tool = Tool(
            name=self._name,
            verb=self._verb,
            description=description,
            handler=fn,
            inputs=self._inputs(),
            output_model=self._returns,
            annotations=dict(self._annotations),
            middleware=tuple(self._middleware),
            presenter=self._presenter,
            interactive=self._interactive,
            timeout=self._timeout,
            max_rounds=self._max_rounds,
            concurrency=self._concurrency,
            task=self._task,
            scopes=self._scopes,
            view="job" if self._view == "auto" and self._task is not None else self._view,
            visibility=self._visibility,
        )
        self._app.register(tool)
        return BoundTool(self._app, tool)

    def _inputs(self) -> ToolInput:
        if self._schema is not None:
            return self._schema
        inputs = ToolInput.of_model(self._model) if self._model else self._fields.spec(self._name)
        if self._model is not None or self._fields.headers:  # (a model may say x-mcp-header in json_schema_extra)
            problem = header_problem(inputs.schema)
            if problem is not None:
                raise ValueError(f'tool "{self._name}": {problem}')
        return inputs

    def __repr__(self) -> str:
        return f"<ToolBuilder {self._verb} {self._name!r}>"

    def __getattr__(self, name: str) -> Any:
        """A mistyped method (``.with_integr``) is named with the near one, in one sentence."""
        if name.startswith("_"):
            raise AttributeError(name)
        raise no_such_attribute(f'f.{self._verb}("{self._name}")', "method", name, dir(type(self)))


class BuilderFactory:
    """``f``: starts a builder for one tool of an app."""

    def __init__(self, app: App) -> None:
        self._app = app

    def action(self, name: str) -> ToolBuilder:
        """A tool with no hint about its effects."""
        return ToolBuilder(self._app, "action", name)

    def query(self, name: str) -> ToolBuilder:
        """A read-only tool (``readOnlyHint``)."""
        return ToolBuilder(self._app, "query", name)

    def mutation(self, name: str) -> ToolBuilder:
        """A destructive tool (``destructiveHint``) whose calls run one at a time, FIFO."""
        return ToolBuilder(self._app, "mutation", name)

    def __getattr__(self, name: str) -> Any:
        """A mistyped verb (``f.querry``) is named with the near one, in one sentence."""
        if name.startswith("_"):
            raise AttributeError(name)
        raise no_such_attribute("f", "verb", name, _VERB_HINTS, prefix="f.")
