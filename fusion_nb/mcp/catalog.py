"""Resources and prompts over MCP: ``resources/*`` and ``prompts/*`` for an app's catalog.

``serve_catalog(server, app, notifier)`` registers the handlers on the SDK's low-level server.
A resource's value is presented as a tool's answer is (``fusion_nb.mcp.rich``), except
where a resource has a better file-like form: a DataFrame as CSV (or JSON when the resource
says ``application/json``), a figure as PNG.

Every read is bounded by the app's answer bound (``answer_limits.max_bytes``) without
materialising more than that of the value: a string is cut (a prefix, never the whole
encoded), a list or dict is encoded only as far as the bound (one that contains itself is
one sentence), bytes over the bound are a sentence; each cut says so and how to read more,
as a cut table does. Before, one read of a shared 1 GiB ``str`` took the kernel from 1.1
to 4.1 GB and sent 1 GiB, and a self-containing list was ``-32603``.

A changed value is announced both ways: to handshake-era (2025-11-25) connections that
sent ``resources/subscribe`` for its URI (``notifications/resources/updated``), and as a
``ResourceUpdated`` event on the bus that 2026 ``subscriptions/listen`` streams read.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import sys
import weakref
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..engine import (
    DEFAULT_LIMITS,
    AnswerLimits,
    App,
    CatalogChange,
    NoChannel,
    Prompt,
    Resource,
    ToolError,
    complete,
    image_type,
    present,
    with_input,
)
from ..engine.lowlevel import spawn
from ._sdk import connection_of, on_connection_close
from .changes import ToolsChangedNotifier
from .elicitation import channel_for, input_required, is_modern, missing_capability, resumption
from .options import PAGE_SIZE
from .pages import Cursors, ListPages
from .rich import Limits, figure_png, limits_for, pil_image

log = logging.getLogger("fusion_nb")
RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for an unknown resource URI


class Subscribers:
    """Handshake-era connections and the URIs each subscribed to (forgotten when they close)."""

    def __init__(self) -> None:
        self._sessions: dict[object, tuple[ServerSession, set[str]]] = {}

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        session: ServerSession = ctx.session
        key = connection_of(session)
        entry = self._sessions.get(key)
        if entry is None:
            entry = self._sessions[key] = (session, set())
            on_connection_close(session, lambda: self._sessions.pop(key, None))
        entry[1].add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        entry = self._sessions.get(connection_of(ctx.session))
        if entry is not None:
            entry[1].discard(str(params.uri))
        return types.EmptyResult()

    def sessions_for(self, uri: str) -> list[ServerSession]:
        return [session for session, uris in self._sessions.values() if uri in uris]


def serve_catalog(
    server: Any,
    app: App,
    notifier: ToolsChangedNotifier,
    limits: Limits | None = None,
    *,
    page_size: int = PAGE_SIZE,
    cursors: Cursors | None = None,
    stamp: Callable[[], dict[str, Any]] | None = None,
    extra_resources: Callable[[], list[types.Resource]] | None = None,
) -> list[ListPages]:
    """Register ``resources/*`` and ``prompts/*`` on ``server`` for ``app.catalog``; list changes go out
    through ``notifier`` (2025 sessions and 2026 listen streams alike), as the tools' do.

    Returns the three lists' pages (``pages.ListPages``), for ``PageMiddleware`` to answer from.
    ``extra_resources`` lists resources served elsewhere (the MCP Apps views' ``ui://`` pages).
    """
    catalog = app.catalog
    limits = limits or limits_for(app.answer_limits)
    subscribers = Subscribers()

    def resources() -> list[types.Resource]:
        return [
            types.Resource(uri=r.uri, name=r.name, description=r.description, mime_type=r.mime_type)
            for r in catalog.resources
        ] + (extra_resources() if extra_resources is not None else [])

    def templates() -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(uri_template=r.uri, name=r.name, description=r.description, mime_type=r.mime_type)
            for r in catalog.templates
        ]

    def prompts() -> list[types.Prompt]:
        return [prompt_to_mcp(p) for p in catalog.prompts]

    paging: dict[str, Any] = {
        "page_size": page_size,
        "cursors": cursors or Cursors(),
        "stamp": stamp or (lambda: server.server_info_stamp),
    }
    resource_pages = ListPages("resources/list", types.ListResourcesResult, "resources", resources, **paging)
    template_pages = ListPages(
        "resources/templates/list", types.ListResourceTemplatesResult, "resourceTemplates", templates, **paging
    )
    prompt_pages = ListPages("prompts/list", types.ListPromptsResult, "prompts", prompts, **paging)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        found = catalog.find(uri)
        rows = None
        if found is None and ROWS_QUERY in uri:  # ``...?rows=FIRST-LAST``: a part of a table or list
            uri, _, query = uri.partition(ROWS_QUERY)
            rows = row_range(uri, query)
            found = catalog.find(uri)
        if found is None:
            raise MCPError(RESOURCE_NOT_FOUND, unknown_resource(str(params.uri), catalog.resources, catalog.templates))
        resource, values = found
        value, deferred = await read_value(resource, values, ctx, params, app.max_rounds)
        if deferred is not None:
            return input_required(deferred)
        read = contents(uri, value, resource.mime_type, limits, rows)
        return types.ReadResourceResult.model_validate({"contents": read})

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
        prompt = catalog.prompt(params.name)
        if prompt is None:
            known = ", ".join(repr(p.name) for p in catalog.prompts) or "none"
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt {params.name!r}; the prompts are: {known}.")
        return await render_prompt(prompt, dict(params.arguments or {}), app.answer_limits, ctx, params, app.max_rounds)

    async def complete_argument(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        entry: Prompt | Resource | None
        if isinstance(ref, types.PromptReference):
            entry = catalog.prompt(ref.name)
            if entry is None:
                known = ", ".join(repr(p.name) for p in catalog.prompts) or "none"
                raise MCPError(types.INVALID_PARAMS, f"Unknown prompt {ref.name!r}; the prompts are: {known}.")
        else:
            entry = next((r for r in catalog.templates if r.uri == ref.uri), None)
            if entry is None:
                known = ", ".join(repr(r.uri) for r in catalog.templates) or "none"
                raise MCPError(
                    types.INVALID_PARAMS, f"Unknown resource template {ref.uri!r}; the templates are: {known}."
                )
        filled = dict(params.context.arguments or {}) if params.context is not None else {}
        try:
            values, total = await complete(entry, params.argument.name, params.argument.value, filled)
        except Exception as exc:
            log.exception(
                "fusion-nb: completing %r of %r failed", params.argument.name, getattr(ref, "name", None) or ref
            )
            raise MCPError(
                types.INTERNAL_ERROR, f"Completing argument {params.argument.name!r} failed with {type(exc).__name__}."
            ) from None
        return types.CompleteResult(
            completion=types.Completion(values=values, total=total, has_more=total > len(values))
        )

    server.add_request_handler("completion/complete", types.CompleteRequestParams, complete_argument)
    server.add_request_handler("resources/list", types.PaginatedRequestParams, resource_pages.handler)
    server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, template_pages.handler)
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribers.subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, subscribers.unsubscribe)
    server.add_request_handler("prompts/list", types.PaginatedRequestParams, prompt_pages.handler)
    server.add_request_handler("prompts/get", types.GetPromptRequestParams, get_prompt)

    def changed(change: CatalogChange) -> None:
        kind, uri = change
        if kind in ("resources", "prompts"):
            for pages in (resource_pages, template_pages) if kind == "resources" else (prompt_pages,):
                pages.invalidate()
            notifier.changed(kind)
        elif uri is not None:
            notifier.bus.emit(ResourceUpdated(uri=uri))
            sessions = subscribers.sessions_for(uri)
            if sessions:  # (their connections run on this loop: a change from elsewhere has none to reach)
                spawn(functools.partial(_send_updated, sessions, uri), name="fusion-nb resources/updated")

    _listen_weakly(server, catalog.on_change, changed)
    return [resource_pages, template_pages, prompt_pages]


async def _send_updated(sessions: list[ServerSession], uri: str) -> None:
    for session in sessions:
        try:
            await session.send_resource_updated(uri)
        except Exception:
            log.debug("a closed MCP session missed resources/updated", exc_info=True)


def _listen_weakly(server: Any, on_change: Callable[..., Callable[[], None]], callback: Any) -> None:
    """Hear catalog changes for as long as ``server`` lives (an app outlives many servers)."""
    ref = weakref.ref(server)
    stop: list[Callable[[], None]] = []

    def listener(change: CatalogChange) -> None:
        if ref() is None:
            stop[0]()
            return
        callback(change)

    stop.append(on_change(listener))
    weakref.finalize(server, stop[0])


def unknown_resource(uri: str, resources: list[Resource], templates: list[Resource]) -> str:
    """One sentence: the URI that was sent and what there is."""
    listed = [r.uri for r in resources] + [r.uri for r in templates]
    shown = ", ".join(listed[:10]) + (" …" if len(listed) > 10 else "")
    return f"Unknown resource {uri[:200]!r}; this server offers: {shown or 'no resources'}."


async def asking(
    noun: str, name: str, args: Any, produce: Callable[[], Any], ctx: Any, params: Any, max_rounds: int
) -> tuple[Any, dict[str, Any] | None]:
    """``produce()``'s value, input asked of ``ctx``'s client as for a tool (``with_input``), or the deferred
    question. Its refusal (a ``ToolError``: a question nobody can answer, its own) is ``INVALID_PARAMS``
    in one sentence; anything else it raises is logged and ``INTERNAL_ERROR`` naming the exception."""
    channel = channel_for(ctx, is_modern(ctx)) if ctx is not None else NoChannel()
    resume = response = None
    if params is not None and params.request_state:
        resume, response = resumption(params, params.request_state)
    try:
        return await with_input(
            name, args, produce, channel, resume=resume, response=response, max_rounds=max_rounds, noun=noun
        )
    except ToolError as error:
        missing = missing_capability(error) if ctx is not None and is_modern(ctx) else None
        if missing is not None:
            raise missing from None
        raise MCPError(types.INVALID_PARAMS, f"{error.message} {error.recovery or ''}".strip()) from None
    except Exception as exc:
        log.exception("%s %s failed", noun.lower(), name)
        doing = f"Prompt {name!r}" if noun == "Prompt" else f"Reading resource {name!r}"
        raise MCPError(types.INTERNAL_ERROR, f"{doing} failed with {type(exc).__name__}.") from None


async def read_value(
    resource: Resource, values: dict[str, str], ctx: Any = None, params: Any = None, max_rounds: int = 8
) -> tuple[Any, dict[str, Any] | None]:
    """The resource's current value (or the question it asks first, deferred to a 2026 client: see
    ``render_prompt``); its own refusal (a ``ToolError``) is the client's one sentence."""
    return await asking("Resource", resource.uri, values, lambda: resource.read(**values), ctx, params, max_rounds)


#: how a cut resource tells its reader to see more
READ_MORE = "to read more, have a smaller part shared (in a notebook: %fusion share a slice of it)"
#: a table's or list's rows, from 0, both ends included: ``nb://vars/df?rows=1000-1999``
ROWS_QUERY = "?rows="
#: rows encoded to learn a table's size per row before the part that fits is encoded once
SAMPLE_ROWS = 64


def row_range(uri: str, query: str) -> tuple[int, int]:
    """``1000-1999`` as ``(1000, 1999)``; anything else one sentence saying the form."""
    first, dash, last = query.partition("-")
    if dash and first.isdecimal() and last.isdecimal() and len(query) <= 41 and int(first) <= int(last):
        return int(first), int(last)
    raise MCPError(
        types.INVALID_PARAMS,
        f"rows= takes FIRST-LAST, row numbers from 0 with FIRST <= LAST (for example {uri[:200]}?rows=0-999); "
        f"sent {query[:60]!r}.",
    )


def is_table(value: Any) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, (pandas.DataFrame, pandas.Series))


def contents(
    uri: str, value: Any, mime_type: str | None, limits: Limits, rows: tuple[int, int] | None = None
) -> list[dict[str, Any]]:
    """``resources/read`` contents for a value: a table as CSV/JSON, a figure as PNG, else as a tool answer.

    ``rows`` (``uri?rows=FIRST-LAST``) reads that part of a table or list only.
    """
    room = limits.max_bytes - 1024  # (the answer's own JSON around the text)
    if is_table(value):
        return table_contents(uri, value, mime_type, limits, rows)
    if rows is not None:
        if not isinstance(value, (list, tuple)):
            said = f"{uri[:200]} is a {type(value).__name__}: rows= reads a part of a table or list only."
            raise MCPError(types.INVALID_PARAMS, said)
        return json_contents(uri, value, room // 2, rows)
    if isinstance(value, str):
        return [{"uri": uri, "mimeType": mime_type or "text/plain", "text": cut_text(value, room // 2, "value")}]
    if isinstance(value, (bytes, bytearray, memoryview)):
        size = value.nbytes if isinstance(value, memoryview) else len(value)
        if size * 4 // 3 > room:
            said = (
                f"(binary data of {size} bytes: over the {limits.max_bytes}-byte answer bound, not sent; {READ_MORE}.)"
            )
            return [{"uri": uri, "mimeType": "text/plain", "text": said}]
        blob = bytes(value)
        kind = mime_type or image_type(blob) or "application/octet-stream"
        return [{"uri": uri, "mimeType": kind, "blob": base64.b64encode(blob).decode("ascii")}]
    if isinstance(value, (list, tuple, dict)):
        return json_contents(uri, value, room // 2)
    figure = sys.modules.get("matplotlib.figure")
    if figure is not None and isinstance(value, figure.Figure):
        return [_blob(uri, figure_png(value, limits))]
    image = sys.modules.get("PIL.Image")
    if image is not None and isinstance(value, image.Image):
        return [_blob(uri, pil_image(value, limits, f"image {value.width}x{value.height} px"))]
    content, structured = present(value, limits.answer())
    if structured is not None:
        text = json.dumps(structured, default=str, ensure_ascii=False)
        return [{"uri": uri, "mimeType": "application/json", "text": text}]
    out: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") == "image":
            out.append(_blob(uri, block))
        elif block.get("type") == "resource":
            out.append({**block["resource"], "uri": uri})
        else:
            out.append({"uri": uri, "mimeType": mime_type or "text/plain", "text": block.get("text", "")})
    return out


def cut_text(value: str, limit: int, what: str) -> str:
    """``value`` within ``limit`` UTF-8 bytes, or its start and a sentence saying it was cut and how to read more.

    Never encodes more than ``limit`` characters of it (a 1 GiB string costs its prefix).
    """
    if len(value) * 4 <= limit:
        return value
    ascii_only = value.isascii()  # (then its length is its size in bytes: nothing to encode)
    if ascii_only and len(value) <= limit:
        return value
    head = value[:limit].encode()
    if not ascii_only and len(value) <= limit and len(head) <= limit:
        return value
    kept = head[: max(0, limit - 300)].decode(errors="ignore")
    size = f"{len(value)} bytes" if ascii_only else f"{len(value)} characters"
    shown = f"the first {len(kept)} characters are shown"
    return f"{kept}\n… (cut: the {what} is {size}, over the {limit}-byte bound; {shown}; {READ_MORE}.)"


class _Unsendable(Exception):
    """A value ``shrunk`` cannot make JSON of: the sentence saying why."""


def shrunk(value: Any, limit: int) -> tuple[Any, bool]:
    """A copy of ``value`` whose JSON stays near ``limit`` bytes, and whether it is whole.

    Walks only as far as the bound (a string is cut to what is left, items past it are
    left out), so a huge value costs the bound, not its size. Raises ``_Unsendable``
    for a value that contains itself or is nested deeper than 100 levels.
    """
    left = limit
    whole = True
    path: set[int] = set()

    def walk(item: Any, depth: int) -> Any:
        nonlocal left, whole
        if isinstance(item, str) or not isinstance(item, (dict, list, tuple, int, float, bool, type(None))):
            text = item if isinstance(item, str) else str(item)
            if len(text) + 2 > left:
                text, whole = text[: max(0, left - 2)], False
            left -= len(text) + 2
            return text
        if not isinstance(item, (dict, list, tuple)):
            left -= 8
            return item
        if id(item) in path:
            raise _Unsendable(f"this {type(value).__name__} contains itself, so it cannot be sent as JSON")
        if depth > 100:
            raise _Unsendable(f"this {type(value).__name__} is nested over 100 levels deep, too deep to send")
        path.add(id(item))
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        out: list[tuple[Any, Any]] = []
        for key, inner in pairs:
            if left <= 0:
                whole = False
                break
            left -= len(str(key)) + 4 if isinstance(item, dict) else 2
            out.append((str(key) if isinstance(item, dict) else key, walk(inner, depth + 1)))
        path.discard(id(item))
        return dict(out) if isinstance(item, dict) else [inner for _, inner in out]

    return walk(value, 0), whole


def rows_note(uri: str, first: int, sent: int, total: int, what: str = "rows") -> str | None:
    """``rows 0-999 of 100000; the next: URI?rows=1000-1999``; ``None`` when all of it was sent."""
    if first == 0 and sent == total:
        return None
    last = first + sent - 1
    said = f"{what} {first}-{last} of {total}" if sent else f"no {what} from {first} (there are {total})"
    if last + 1 >= total or not sent:
        return said
    return f"{said}; the next: {uri}{ROWS_QUERY}{last + 1}-{last + sent}"


def json_contents(uri: str, value: Any, limit: int, rows: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """A list or dict as JSON within about ``limit`` bytes; a cut one says so beside it (as a cut table does).

    A list's items are its rows: a cut list, or a part read with ``rows``, says which
    items were sent and the URI of the next ones.
    """
    kind, total, first = type(value).__name__, 0, 0
    if isinstance(value, (list, tuple)):
        total = len(value)
        if rows is not None:
            first = min(rows[0], total)
            value = value[first : rows[1] + 1]
    try:
        part, whole = shrunk(value, limit)
    except _Unsendable as why:
        said = str(why)
        return [{"uri": uri, "mimeType": "text/plain", "text": f"({said[:1].upper()}{said[1:]}; share a part of it.)"}]
    text = json.dumps(part, default=str, ensure_ascii=False)
    note = None
    if isinstance(part, list):
        sent = len(part) if whole else max(0, len(part) - 1)  # (a cut last item is not counted as sent)
        note = rows_note(uri, first, sent, total, "items")
        if note is not None and not whole:
            note = f"cut: this {kind} is over the {limit}-byte bound; {note}"
    elif not whole:
        note = f"cut: this {kind} is over the {limit}-byte bound; what fits is shown above; {READ_MORE}"
    if note is None:
        return [{"uri": uri, "mimeType": "application/json", "text": text}]
    return [
        {"uri": uri, "mimeType": "application/json", "text": text},
        {"uri": uri, "mimeType": "text/plain", "text": note},
    ]


def table_contents(
    uri: str, frame: Any, mime_type: str | None, limits: Limits, rows: tuple[int, int] | None = None
) -> list[dict[str, Any]]:
    """A DataFrame (or Series) as CSV, or JSON records when asked: whole if it fits, else the rows that fit.

    Costs what is sent, not what is held: a row's size is learnt from a few
    (``SAMPLE_ROWS``) and the part that fits is encoded once (again only when its rows
    were bigger than the sample's). A part says which rows it holds and the URI of the
    next ones: CSV in a last ``#`` line, JSON (no room for a comment) in a plain-text
    content beside the records.
    """
    as_json = mime_type == "application/json"
    total = len(frame)
    first, stop = (0, total) if rows is None else (min(rows[0], total), min(rows[1] + 1, total))
    room = limits.max_bytes - 1024  # (the answer's own JSON around the text)

    def encoded(count: int) -> tuple[str, int]:
        part = frame.iloc[first : first + count]
        text = part.to_json(orient="records", date_format="iso") if as_json else part.to_csv(index=False)
        return text, len(json.dumps(text, ensure_ascii=False).encode())  # as the wire carries it: quotes escaped

    count = stop - first
    if count > SAMPLE_ROWS:
        _, sample = encoded(SAMPLE_ROWS)
        count = min(count, max(1, room * SAMPLE_ROWS // sample * 19 // 20))
    text, size = encoded(count)
    while size > room and count > 1:  # rows past the sample were bigger: shrink by what they cost
        count = max(1, count * room // size * 9 // 10)
        text, size = encoded(count)
    note = rows_note(uri, first, count, total)
    if note is not None and first + count < stop:
        note = f"cut: {note} (over the answer bound)"
    if as_json:
        said = [{"uri": uri, "mimeType": "text/plain", "text": note}] if note else []
        return [{"uri": uri, "mimeType": "application/json", "text": text}, *said]
    return [{"uri": uri, "mimeType": "text/csv", "text": text + (f"# {note}\n" if note else "")}]


def _blob(uri: str, block: dict[str, Any]) -> dict[str, Any]:
    if block.get("type") != "image":  # too large to send: the sentence saying so
        return {"uri": uri, "mimeType": "text/plain", "text": block.get("text", "")}
    return {"uri": uri, "mimeType": block["mimeType"], "blob": block["data"]}


def prompt_to_mcp(prompt: Prompt) -> types.Prompt:
    return types.Prompt(
        name=prompt.name,
        description=prompt.description,
        arguments=[types.PromptArgument(name=name, required=required) for name, required in prompt.arguments],
    )


async def render_prompt(
    prompt: Prompt,
    arguments: dict[str, str],
    limits: AnswerLimits = DEFAULT_LIMITS,
    ctx: Any = None,
    params: types.GetPromptRequestParams | None = None,
    max_rounds: int = 8,
) -> types.GetPromptResult | types.InputRequiredResult:
    """The prompt filled in; a missing or unknown argument is one sentence naming it.

    A prompt may ask for input as a tool does (``require_input.*``, ``read_input``): asked over
    ``ctx``'s session (2025) or returned as an ``InputRequiredResult`` and resumed from the retry (2026).
    """
    names = [name for name, _required in prompt.arguments]
    missing = [name for name, required in prompt.arguments if required and name not in arguments]
    if missing:
        raise MCPError(
            types.INVALID_PARAMS,
            f"Prompt {prompt.name!r} needs the argument {missing[0]!r} (a string); "
            f"sent: {sorted(arguments) or 'no arguments'}.",
        )
    unknown = sorted(set(arguments) - set(names))
    if unknown:
        raise MCPError(
            types.INVALID_PARAMS,
            f"Prompt {prompt.name!r} has no argument {unknown[0]!r}; its arguments are: {names or 'none'}.",
        )
    produce = functools.partial(prompt.render, **arguments)
    rendered, deferred = await asking("Prompt", prompt.name, arguments, produce, ctx, params, max_rounds)
    if deferred is not None:
        return input_required(deferred)
    return types.GetPromptResult.model_validate(
        {"description": prompt.description, "messages": prompt_messages(prompt.name, rendered, limits)}
    )


def prompt_messages(name: str, rendered: Any, limits: AnswerLimits) -> list[dict[str, Any]]:
    """A rendered prompt as MCP messages: a message's content may be anything a tool may return (an
    image, a resource, a figure, a list of them: a message a block); a value alone is the user's."""
    if not isinstance(rendered, list):
        rendered = [{"role": "user", "content": rendered}]
    messages: list[dict[str, Any]] = []
    for message in rendered:
        if not isinstance(message, dict):
            message = {"role": "user", "content": message}
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant") or "content" not in message:
            log.error("prompt %s rendered a message that is not {'role': 'user' or 'assistant', 'content': ...}", name)
            raise MCPError(
                types.INTERNAL_ERROR,
                f"Prompt {name!r} rendered a message without a 'user' or 'assistant' role and a content.",
            )
        if isinstance(content, dict) and content.get("type") in CONTENT_BLOCKS:  # a block written as MCP's dict
            messages.append({"role": role, "content": checked_block(name, len(messages) + 1, content)})
        else:
            messages.extend({"role": role, "content": block} for block in present(content, limits)[0])
    return messages


#: the content blocks a prompt message may hold written as MCP's dicts (``{"type": "image", ...}``), by type
CONTENT_BLOCKS: dict[str, type[Any]] = {
    "text": types.TextContent,
    "image": types.ImageContent,
    "audio": types.AudioContent,
    "resource": types.EmbeddedResource,
    "resource_link": types.ResourceLink,
}


def checked_block(name: str, number: int, content: dict[str, Any]) -> Any:
    """A content block dict checked against its type; one that does not fit is one sentence naming it."""
    try:
        return CONTENT_BLOCKS[content["type"]].model_validate(content)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "content"
        raise MCPError(
            types.INTERNAL_ERROR,
            f"Prompt {name!r} returned a message MCP cannot carry "
            f"(message {number}, {content['type']} block, {where}: {problem['msg']}).",
        ) from None
