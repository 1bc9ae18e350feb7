"""Paged lists: ``tools/list``, ``resources/list``, ``resources/templates/list`` and ``prompts/list``.

Why: the SDK's path validated and dumped the whole list again on every call (767 ms
and 3.2 MiB at 10,000 tools, the result object cached but re-serialised). Here each
page is shaped for the wire once per registry generation and protocol version (by the
SDK's own ``serialize_server_result``, when it is first asked for), and its JSON bytes
are kept until the registry changes: ``PageMiddleware`` answers from them, and
fusion-nb's transports (stdio pipe, HTTP) write the bytes as they are
(``wire.preencoded``); any other transport serialises the page's dict as usual.

Cursors are opaque (``Cursors``): a state sealed with an HMAC under a key made per
server. One not made here (forged, malformed, from a restarted server) or from an
earlier generation of the list (it changed since) is -32602 in one sentence.
``tasks/list`` (``tasks.TaskWire.list``) seals its cursors the same way, per client.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import methods as sdk_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._sdk import handshake_pending
from .wire import Preencoded

#: the longest cursor read (ours are under 100 characters)
MAX_CURSOR = 1000
#: the key a 2026 result's ``_meta`` names the server under (spec #3002), as the SDK's runner stamps it
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


class Cursors:
    """Seals a page's position into an opaque cursor and reads it back, refusing any other.

    ``secret``: what every process behind one endpoint shares (the request-state key), so a
    cursor one worker gave another reads; without one, a key made for this process.
    """

    def __init__(self, secret: bytes | str | None = None) -> None:
        if secret is None:
            self._key = secrets.token_bytes(32)
        else:
            raw = secret.encode() if isinstance(secret, str) else secret
            self._key = hmac.new(raw, b"fusion-nb list cursors", "sha256").digest()  # (never the secret itself)

    def _tag(self, scope: str, state: bytes) -> bytes:
        return hmac.new(self._key, scope.encode() + b"\n" + state, "sha256").digest()[:12]

    def seal(self, scope: str, state: str) -> str:
        """A cursor for ``state`` that only ``open`` with the same ``scope`` reads."""
        raw = state.encode()
        return base64.urlsafe_b64encode(self._tag(scope, raw) + raw).decode().rstrip("=")

    def open(self, scope: str, method: str, cursor: object) -> str:
        """The state ``cursor`` holds; -32602 in one sentence when it is no cursor this server gave for ``scope``."""
        if not isinstance(cursor, str):  # (worded as ``ParamsInOneSentence`` words the SDK's own refusals)
            raise MCPError(
                types.INVALID_PARAMS,
                f'Invalid params for {method}: field "params.cursor" expected a string, '
                f"got {str(cursor)[:40]} ({type(cursor).__name__}).",
            )
        try:
            if len(cursor) > MAX_CURSOR:
                raise ValueError
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            tag, state = raw[:12], raw[12:]
            if len(tag) < 12 or not hmac.compare_digest(tag, self._tag(scope, state)):
                raise ValueError
            return state.decode()
        except (ValueError, binascii.Error):
            raise MCPError(
                types.INVALID_PARAMS,
                f"{method}: the cursor {cursor[:40]!r} is not one this server gave (or it restarted since); "
                "list again without a cursor.",
            ) from None


class ListPages:
    """One list's pages for each protocol version, encoded once per generation of the list.

    ``items`` gives the list's items (SDK models) when it is first asked
    for after a change; ``invalidate`` starts a new generation, making older cursors stale.
    """

    def __init__(
        self,
        method: str,
        model: type[types.PaginatedResult],
        key: str,
        items: Callable[[], list[Any]],
        *,
        page_size: int,
        cursors: Cursors,
        stamp: Callable[[], dict[str, Any]],
    ) -> None:
        self.method, self.key, self.page_size = method, key, page_size
        #: the result's own fields (2026: ``resultType``, ``ttlMs``, ``cacheScope``), as the SDK's model writes them
        self._envelope = model.model_validate({key: []}).model_dump(by_alias=True, mode="json", exclude_none=True)
        self._items, self._cursors, self._stamp = items, cursors, stamp
        self.generation = 0
        self._listed: list[Any] | None = None  # the items of this generation
        self._pages: dict[tuple[str, int], dict[str, Any]] = {}

    def invalidate(self) -> None:
        self.generation += 1
        self._listed = None
        self._pages.clear()

    def page(self, params: Any, version: str) -> dict[str, Any]:
        """The wire result for the page ``params.cursor`` names (the first without one), cached."""
        start = self._start(None if params is None else params.get("cursor"))
        cached = self._pages.get((version, start))
        if cached is not None:
            return cached
        generation = self.generation  # (a change made meanwhile, from another thread, is not cached as current)
        items = self._listed if self._listed is not None else self._items()
        dumped = [
            item.model_dump(by_alias=True, mode="json", exclude_none=True) for item in items[start:][: self.page_size]
        ]
        # this page shaped as the version's wire has it (its own fields too: 2026's resultType, ttlMs, ...)
        result = sdk_methods.serialize_server_result(self.method, version, {**self._envelope, self.key: dumped})
        if start + self.page_size < len(items):
            result["nextCursor"] = self._cursors.seal(self.method, f"{generation}.{start + self.page_size}")
        if version in MODERN_PROTOCOL_VERSIONS and result.get("_meta") is None:
            result["_meta"] = {SERVER_INFO_KEY: self._stamp()}
        result[self.key] = Preencoded(result[self.key], result)
        if generation == self.generation:
            self._listed = items
            self._pages[(version, start)] = result
        return result

    def _start(self, cursor: object) -> int:
        if cursor is None:
            return 0
        generation, _, start = self._cursors.open(self.method, self.method, cursor).partition(".")
        if int(generation) != self.generation:
            raise MCPError(
                types.INVALID_PARAMS,
                f"{self.method}: the cursor is stale: the list changed after it was given; "
                "list again without a cursor.",
            )
        return int(start)

    async def handler(self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> Any:
        """The handler the SDK holds (reached when ``PageMiddleware`` defers): the same page as a plain dict."""
        page = self.page(None if params is None else {"cursor": params.cursor}, ctx.protocol_version)
        return {key: list(value) if isinstance(value, Preencoded) else value for key, value in page.items()}


class PageMiddleware:
    """Answers the list methods from their cached pages (innermost middleware: the outer ones still see them).

    A 2025 connection that has not finished its handshake, and params the SDK refuses
    (a cursor that is no string), go the SDK's way.
    """

    def __init__(self, lists: list[ListPages]) -> None:
        self.lists = {pages.method: pages for pages in lists}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        pages = self.lists.get(ctx.method)
        params = ctx.params
        if pages is None or handshake_pending(ctx.session) or not _plain(params):
            return await call_next(ctx)  # (the SDK's checks and its refusal, worded by ``ParamsInOneSentence``)
        return pages.page(params, ctx.protocol_version)


def _plain(params: Any) -> bool:
    """Params a list page can answer: none, or an object whose cursor, if any, is a string."""
    return params is None or (isinstance(params, dict) and isinstance(params.get("cursor", ""), str))
