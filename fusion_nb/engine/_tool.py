"""A registered tool: its MCP description and the compiled pipeline that runs it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .middleware import Middleware, compose
from .slots import Slots

if TYPE_CHECKING:
    from .app import Fusion


class Tool:
    """A tool as clients see it (``name``, ``description``, schemas, ``annotations``).

    ``await tool(**arguments)`` calls it through its app and returns the response
    value, or raises ``ToolError``.
    """

    def __init__(
        self,
        app: Fusion,
        *,
        name: str,
        verb: str,
        description: str | None,
        handler: Callable[..., Any],
        input_model: type[BaseModel],
        output_model: type[BaseModel] | None,
        annotations: dict[str, bool],
        middleware: list[Middleware],
        presenter: Callable[[Any], Any] | None,
        interactive: bool,
        timeout: float | None,
        max_rounds: int | None,
        concurrency: tuple[int, int] | None,
    ) -> None:
        from .handlers import make_runner
        from .schema import input_schema

        self.app = app
        self.name = name
        self.verb = verb
        self.description = description
        self.handler = handler
        self.input_model = input_model
        self.output_model = output_model
        self.annotations = annotations
        self.middleware = middleware
        self.presenter = presenter
        self.interactive = interactive
        self.timeout = timeout
        self.max_rounds = max_rounds
        self.input_schema = input_schema(input_model)
        self.output_schema = output_model.model_json_schema() if output_model is not None else None
        self.run_handler = make_runner(handler, name)
        self.kind: str = self.run_handler.kind  # type: ignore[attr-defined]
        self.slots = Slots(name, *concurrency) if concurrency else None
        self.serializer = Slots(name, 1, None) if verb == "mutation" else None
        self.compose()

    def compose(self) -> None:
        """(Re)build the chain: app middleware, then the tool's, then the handler stage."""
        self.chain = compose([*self.app.middleware, *self.middleware], self._handler_stage())

    def _handler_stage(self) -> Any:
        """The innermost stage: a last abort gate, the mutation lock, the handler."""
        run, serializer = self.run_handler, self.serializer
        if serializer is None and self.kind == "async":
            fn = self.handler

            async def plain(ctx: Any) -> Any:  # the common case, one frame
                ctx.signal.raise_if_aborted()
                return await fn(ctx.input, ctx)

            return plain

        async def stage(ctx: Any) -> Any:
            ctx.signal.raise_if_aborted()
            call = ctx._call
            if serializer is not None and serializer not in call._held:  # once per call, not per round
                await call.hold(serializer)
                ctx.signal.raise_if_aborted()
            return await run(ctx.input, ctx, call.offer_progress)

        return stage

    async def __call__(self, **arguments: Any) -> Any:
        result = await self.app.call(self.name, arguments)
        return result.unwrap()

    def __repr__(self) -> str:
        return f"<Tool {self.name!r} ({self.verb}, {self.kind})>"
