"""A tool as clients see it: an immutable description, with no reference to any app.

What runs it (its composed middleware chain, its concurrency slots and mutation
serializer) belongs to the app it is registered in (``_runner.ToolPlan``); the
callable handle an author gets back from ``handle(fn)`` is a ``BoundTool``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ._handlers import HandlerKind, handler_kind
from ._middleware import Middleware
from ._schema import ToolInput
from ._tasks import TaskOptions

if TYPE_CHECKING:
    from ._app import App


#: the built-in MCP Apps views a tool may name (``.app(view)``); ``auto`` picks by the value (``job`` for a task tool)
VIEWS = ("auto", "table", "image", "plotly", "job")
#: who may call a tool with a view: the model (the agent), the view itself (an app-only tool has only "app")
VISIBILITIES = ("model", "app")


class Verb(StrEnum):
    """What a tool does to the world: ``app.f.action``, ``app.f.query`` (read-only), ``app.f.mutation``."""

    ACTION = "action"
    QUERY = "query"
    MUTATION = "mutation"


@dataclass(frozen=True, eq=False, slots=True, weakref_slot=True)
class Tool:
    """One tool: ``name``, ``description``, schemas and ``annotations`` (what MCP lists), and
    how it runs (``handler`` and its ``kind``, middleware, presenter, limits).

    ``verb`` is ``action``, ``query`` or ``mutation``; ``kind`` is ``async``,
    ``async_gen``, ``sync`` or ``sync_gen``; ``concurrency`` is ``(max_active,
    max_queue)`` or ``None``; ``task`` says how it runs as a task (``None``: never);
    ``scopes`` are the OAuth scopes a caller's token needs (served with ``oauth=``);
    ``view`` names the MCP Apps view its result is shown in (``None``: none) and
    ``visibility`` who may call it (``"model"``, ``"app"``: an app-only tool has only the latter);
    ``inputs`` holds the input schema and, once a call needs it, the input model.
    Build tools with the builder (``app.f``), not by hand.
    """

    name: str
    verb: Verb
    description: str | None
    handler: Callable[..., Any]
    inputs: ToolInput
    output_model: type[BaseModel] | None = None
    annotations: Mapping[str, bool] = field(default_factory=dict)
    middleware: tuple[Middleware, ...] = ()
    presenter: Callable[[Any], Any] | None = None
    interactive: bool = False
    timeout: float | None = None
    max_rounds: int | None = None
    concurrency: tuple[int, int] | None = None
    task: TaskOptions | None = None
    scopes: tuple[str, ...] = ()
    view: str | None = None
    visibility: tuple[str, ...] = ("model", "app")
    kind: HandlerKind = field(init=False)
    input_schema: dict[str, Any] = field(init=False, repr=False)
    output_schema: dict[str, Any] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verb", Verb(self.verb))  # (a verb's name is accepted too)
        object.__setattr__(self, "kind", handler_kind(self.handler))
        object.__setattr__(self, "input_schema", self.inputs.schema)
        output = self.output_model.model_json_schema() if self.output_model is not None else None
        object.__setattr__(self, "output_schema", output)
        object.__setattr__(self, "annotations", dict(self.annotations))

    @property
    def input_model(self) -> type[BaseModel]:
        """The pydantic model of the arguments (built on first use: registering builds none)."""
        return self.inputs.model

    @property
    def runs_in_thread(self) -> bool:
        """Whether the body runs in a worker thread (plain ``def`` handlers)."""
        return self.kind in (HandlerKind.SYNC, HandlerKind.SYNC_GEN)

    def __repr__(self) -> str:
        return f"<Tool {self.name!r} ({self.verb}, {self.kind})>"


class BoundTool:
    """What ``handle(fn)`` returns: the tool, callable through the app it was registered in.

    ``await report(quarter="2026Q3")`` runs a call and returns its response value or
    raises ``ToolError``; ``name``, ``description``, ``input_schema``,
    ``output_schema``, ``annotations``, ``verb`` and ``kind`` are the tool's.
    """

    __slots__ = ("app", "tool")

    def __init__(self, app: App, tool: Tool) -> None:
        self.app = app
        self.tool = tool

    @property
    def name(self) -> str:
        """The MCP tool name."""
        return self.tool.name

    @property
    def description(self) -> str | None:
        """What the tool does, for agents and people."""
        return self.tool.description

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments."""
        return self.tool.input_schema

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of the structured result, if the tool declares one."""
        return self.tool.output_schema

    @property
    def annotations(self) -> Mapping[str, bool]:
        """MCP hints (``readOnlyHint``, ``destructiveHint``...)."""
        return self.tool.annotations

    @property
    def verb(self) -> Verb:
        """``action``, ``query`` or ``mutation``."""
        return self.tool.verb

    @property
    def kind(self) -> HandlerKind:
        """``async``, ``async_gen``, ``sync`` or ``sync_gen``."""
        return self.tool.kind

    async def __call__(self, **arguments: Any) -> Any:
        """Call the tool and return its response value (``ToolError`` on failure)."""
        result = await self.app.call(self.tool.name, arguments)
        return result.unwrap()

    def __repr__(self) -> str:
        return f"<Tool {self.tool.name!r} ({self.tool.verb}, {self.tool.kind})>"
