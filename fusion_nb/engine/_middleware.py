"""Middleware composition: ``async def mw(ctx, call_next)``, with an abort gate before every stage."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

Stage = Callable[[Any], Awaitable[Any]]
Middleware = Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]


def compose(middleware: Sequence[Middleware], terminal: Stage) -> Stage:
    """Build the chain once: the first middleware is outermost, ``terminal`` innermost.

    Each middleware stage checks ``ctx.signal`` before it runs, and ``terminal``
    checks it itself, so an abort between two middleware (or between the last
    middleware and the handler) stops the call there.
    """
    chain = terminal
    for mw in reversed(middleware):
        chain = _stage(mw, chain)
    return chain


def _stage(mw: Middleware, inner: Stage) -> Stage:
    async def stage(ctx: Any) -> Any:
        ctx.signal.raise_if_aborted()
        return await mw(ctx, lambda: inner(ctx))

    return stage
