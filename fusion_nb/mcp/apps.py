"""MCP Apps (``io.modelcontextprotocol/ui``, spec ext-apps 2026-01-26): a tool's result as a view.

A tool built with ``.app()`` is listed, to a client that declares the extension (with the
``text/html;profile=mcp-app`` MIME type, as the SDK's ``client_supports_apps`` reads it), with
``_meta.ui.resourceUri`` naming one of the built-in ``ui://fusion-nb/...`` views; its results
then carry ``_meta["io.github.fusion-nb/view"]``: which view draws them, and for a table a
handle the view pages through with the app-only tool ``fusion_nb.view.table_page``. A client
without the extension gets exactly what it got before ``.app()`` (the same list entries and
the same PNG, Markdown and structured content): one tool serves both.

App-only tools (``visibility=["app"]``, the built-in page tool among them) are listed only to
clients that declared the extension (whose hosts keep them from the model, as the spec says)
and refused, in one sentence, when any other client calls them. They validate their input as
every tool does (the page tool is an engine tool of its own small app). A view reaches only what
a tool returned: a handle names one returned value, is unguessable, is bound to the caller that
received it and is forgotten after ``KEPT`` newer ones.
"""

from __future__ import annotations

import contextvars
import functools
import json
import secrets
import sys
from collections import OrderedDict
from collections.abc import Hashable
from importlib import resources as package_files
from typing import Any

import anyio
import mcp_types as types
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID, client_supports_apps
from mcp.server.context import CallNext, ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field

from ..engine import CANCELLED, INVALID_INPUT, App, CallResult, Task, Tool, ToolError, tasks_of
from .convert import result_to_wire, tool_to_mcp, ui_uri
from .tasks import opted_in

__all__ = [
    "APP_MIME_TYPE",
    "EXTENSION_ID",
    "PAGE_TOOL",
    "STATUS_TOOL",
    "STOP_TOOL",
    "VIEW_META",
    "AppsMiddleware",
    "LocalHost",
    "Views",
    "declared",
    "ui_uri",
]

PAGE_TOOL = "fusion_nb.view.table_page"
"""The app-only tool a table view pages, sorts and filters through."""
STATUS_TOOL = "fusion_nb.view.job_status"
"""The app-only tool a job view polls (the task store's record of the call)."""
STOP_TOOL = "fusion_nb.view.job_stop"
"""The app-only tool a job view's Stop button calls."""
VIEW_META = "io.github.fusion-nb/view"
"""The result ``_meta`` key telling the view how to draw the result."""
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
APP_ONLY = "APP_ONLY"
"""The error code of an app-only tool called by a client without MCP Apps."""
KEPT = 64
"""How many returned values the views of one server can still reach (the oldest are forgotten)."""
MAX_PAGE = 500
"""The most rows one page carries."""

#: who is calling the page tool now (set by the middleware around the engine call)
_caller: contextvars.ContextVar[Hashable] = contextvars.ContextVar("fusion_nb_view_caller", default=None)


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request's client declared MCP Apps (2025: at the handshake; 2026: per request too)."""
    if client_supports_apps(ctx):
        return True
    declared_caps = (ctx.meta or {}).get(CLIENT_CAPABILITIES)  # type: ignore[union-attr]
    settings = (
        ((declared_caps or {}).get("extensions") or {}).get(EXTENSION_ID) if isinstance(declared_caps, dict) else None
    )
    return isinstance(settings, dict) and APP_MIME_TYPE in (settings.get("mimeTypes") or ())


def app_only(tool: Tool) -> bool:
    """A tool only a view may call."""
    return tool.view is not None and "model" not in tool.visibility


# -- the values views may reach -----------------------------------------------------------


class Views:
    """The values ``.app()`` tools returned to app-capable clients, by handle (one server's)."""

    def __init__(self, kept: int = KEPT, max_figure: int = 1 << 20) -> None:
        self.kept, self.max_figure = kept, max_figure
        self._values: OrderedDict[str, tuple[Hashable, Any]] = OrderedDict()
        self._orders: dict[str, tuple[tuple[Any, ...], Any]] = {}  # a handle's last sorted/filtered frame

    def remember(self, owner: Hashable, value: Any) -> str:
        handle = secrets.token_urlsafe(16)
        self._values[handle] = (owner, value)
        while len(self._values) > self.kept:
            forgotten, _ = self._values.popitem(last=False)
            self._orders.pop(forgotten, None)
        return handle

    def value(self, handle: str, owner: Hashable) -> Any:
        found = self._values.get(handle)
        if found is None or found[0] != owner:
            raise ToolError(
                INVALID_INPUT,
                f"No result {handle[:40]!r} is open for this client's views "
                f"(a view reaches the last {self.kept} results its tools returned).",
            )
        return found[1]

    def arranged(self, handle: str, frame: Any, key: tuple[Any, ...], arrange: Any) -> Any:
        """``frame`` sorted and filtered as ``key`` says, computed once per key (paging through it is cheap)."""
        cached = self._orders.get(handle)
        if cached is not None and cached[0] == key:
            return cached[1]
        arranged = arrange(frame)
        self._orders[handle] = (key, arranged)
        return arranged

    def describe(self, value: Any, owner: Hashable, structured: dict[str, Any] | None) -> dict[str, Any]:
        """What a view needs to draw ``value``: its kind and, for a table, the handle to page with."""
        pandas = sys.modules.get("pandas")
        if pandas is not None and isinstance(value, pandas.Series):
            value = value.to_frame()
        if pandas is not None and isinstance(value, pandas.DataFrame):
            return {
                "view": "table",
                "handle": self.remember(owner, value),
                "pageTool": PAGE_TOOL,
                "columns": [str(column) for column in value.columns],
                "totalRows": len(value),
            }
        plotly = sys.modules.get("plotly.basedatatypes")
        if plotly is not None and isinstance(value, plotly.BaseFigure):
            dumped = value.to_json()
            if len(dumped) > self.max_figure:
                said = f"The figure's JSON is {len(dumped)} bytes, over the {self.max_figure}-byte bound of a view."
                return {"view": "plotly", "cut": said}
            return {"view": "plotly", "figure": json.loads(dumped)}
        return {"view": "content"}


class TablePage(BaseModel):
    """One page of a table a tool returned: ``offset``/``limit`` rows, sorted by a column, filtered by text."""

    model_config = ConfigDict(extra="forbid")

    handle: str = Field(min_length=1, max_length=64, description="The handle the tool's result gave its view.")
    offset: int = Field(0, ge=0, description="The first row of the page (after sorting and filtering).")
    limit: int = Field(50, ge=1, le=MAX_PAGE, description="How many rows the page holds.")
    sort: str | None = Field(None, max_length=200, description="The column to sort by.")
    descending: bool = False
    filter: str | None = Field(None, max_length=200, description="Keep rows where a column contains this text.")


class JobStatus(BaseModel):
    """Which job: by id, or the newest of a tool (a view knows its tool before its call answers)."""

    model_config = ConfigDict(extra="forbid")

    job: str | None = Field(None, min_length=1, max_length=64, description="The job's id.")
    tool: str | None = Field(None, min_length=1, max_length=200, description="The tool whose newest job to show.")


class JobStop(BaseModel):
    """The job to stop."""

    model_config = ConfigDict(extra="forbid")

    job: str = Field(min_length=1, max_length=64, description="The job's id.")


def job_state(task: Task) -> dict[str, Any]:
    """What a job view shows: status, message, percent (the call's last progress), whether it ended."""
    progress = task.call.progress if task.call is not None else None
    message = task.status_message or (progress.message if progress is not None else None)
    return {
        "job": task.id,
        "tool": task.tool_name,
        "status": str(task.status),
        "message": message,
        "percent": progress.percent if progress is not None else None,
        "final": task.final,
    }


def view_tools(views: Views, served: App) -> App:
    """The built-in app-only tools as an engine app of their own (validated and run as any tool)."""
    tools = App("fusion-nb views")
    tasks = tasks_of(served)

    async def job_of(job: str) -> Task:
        task = await tasks.find(_caller.get(), job)
        if task is None:
            raise ToolError(INVALID_INPUT, f"There is no job {job[:40]!r} for this client's views.")
        return task

    @tools.f.query(STATUS_TOOL).with_model(JobStatus).app("job", visibility=["app"]).handle
    async def job_status(input: JobStatus, ctx: Any) -> dict[str, Any]:
        """The status of a job an ``.app()`` task tool runs (for its view: polled, the spec has no progress push)."""
        if input.job is not None:
            return job_state(await job_of(input.job))
        mine = [t for t in await tasks.find_all(_caller.get()) if input.tool is None or t.tool_name == input.tool]
        return job_state(mine[-1]) if mine else {"job": None, "status": "none", "final": False}

    @tools.f.mutation(STOP_TOOL).with_model(JobStop).app("job", visibility=["app"]).handle
    async def job_stop(input: JobStop, ctx: Any) -> dict[str, Any]:
        """Stop a job an ``.app()`` task tool runs (its cleanup runs); answers its state after."""
        task = await job_of(input.job)
        await tasks.stop(task)
        return job_state(task)

    @tools.f.query(PAGE_TOOL).with_model(TablePage).app("table", visibility=["app"]).handle
    def table_page(input: TablePage, ctx: Any) -> dict[str, Any]:
        """One page of a table a tool returned (for its view: sorted, filtered, never the whole table)."""
        frame = views.value(input.handle, _caller.get())
        columns = [str(column) for column in frame.columns]
        if input.sort is not None and input.sort not in columns:
            raise ToolError(INVALID_INPUT, f"sort names no column of this table: {input.sort[:60]!r}.")
        key = (input.sort, input.descending, input.filter or None)
        arranged = views.arranged(input.handle, frame, key, functools.partial(_arrange, columns=columns, key=key))
        page = arranged.iloc[input.offset : input.offset + input.limit]
        rows = json.loads(page.to_json(orient="values", date_format="iso", default_handler=str))
        return {
            "columns": columns,
            "rows": rows,
            "offset": input.offset,
            "matched": len(arranged),
            "totalRows": len(frame),
        }

    return tools


def _arrange(frame: Any, *, columns: list[str], key: tuple[Any, ...]) -> Any:
    sort, descending, text = key
    if text:
        mask = None
        for column in frame.columns:
            hit = frame[column].astype(str).str.contains(text, case=False, regex=False, na=False)
            mask = hit if mask is None else mask | hit
        frame = frame[mask] if mask is not None else frame
    if sort is not None:
        frame = frame.sort_values(frame.columns[columns.index(sort)], ascending=not descending, kind="stable")
    return frame


# -- the wire --------------------------------------------------------------------------------


class AppsMiddleware:
    """The extension on the wire: app-capable clients' tool list, app-only calls, ``ui://`` reads.

    ``app_pages`` answers ``tools/list`` with app-only tools and ``_meta.ui`` (a ``PageMiddleware``);
    ``app`` is the served app; ``views`` its returned values; ``owner_of(ctx)`` who calls.
    """

    def __init__(self, app: App, views: Views, app_pages: Any, owner_of: Any) -> None:
        self.app, self.views, self.owner_of = app, views, owner_of
        self.app_pages = app_pages
        self.tools = view_tools(views, app)

    def listed(self, *, apps: bool) -> list[Tool]:
        """The tools a client is shown: app-only ones (the built-in page tool too) only with the extension."""
        mine = [tool for tool in self.app.tools if apps or not app_only(tool)]
        if apps and any(tool.view is not None for tool in self.app.tools):
            mine += list(self.tools.tools)
        return mine

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        method, params = ctx.method, ctx.params
        if method == "tools/list" and declared(ctx):
            return await self.app_pages(ctx, call_next)  # (a ``PageMiddleware`` over the app-capable list)
        if method == "tools/call" and isinstance(params, dict) and isinstance(params.get("name"), str):
            name = params["name"]
            builtin = self.tools.get(name)
            tool = builtin or self.app.get(name)
            job = tool is not None and tool.task is not None and tool.view == "job" and params.get("task") is None
            if tool is not None and job and declared(ctx) and not _tasks_declared(ctx):
                return await self.run_job(ctx, tool, params.get("arguments"))
            if tool is not None and app_only(tool):
                if not declared(ctx):
                    return _refusal(
                        f"Tool {name!r} is app-only: only an MCP Apps view may call it, and this client did not "
                        f"declare the {EXTENSION_ID} extension.",
                        ctx,
                    )
                if builtin is not None:
                    arguments = params.get("arguments") or {}
                    token = _caller.set(self.owner_of(ctx))
                    try:  # (arguments that are no object: the engine's validation says so in one sentence)
                        result = await self.tools.call(
                            name, arguments if isinstance(arguments, dict) else {"": arguments}
                        )
                    finally:
                        _caller.reset(token)
                    return result_to_wire(result, has_output_schema=False, modern=_modern(ctx))
        if method == "resources/read" and isinstance(params, dict) and str(params.get("uri", "")).startswith("ui://"):
            uri = str(params["uri"])
            html = view_html(uri)
            if html is not None:
                content = {"uri": uri, "mimeType": APP_MIME_TYPE, "text": html, "_meta": RESOURCE_META}
                return types.ReadResourceResult.model_validate({"contents": [content]})
        return await call_next(ctx)

    async def run_job(self, ctx: ServerRequestContext[Any, Any], tool: Tool, arguments: Any) -> dict[str, Any]:
        """A task tool's plain call from an app-capable client, run as a task its view can poll and stop.

        The call still answers with the tool's result (or the cancellation), as a plain call does;
        the task store is what lets the view, which the host shows beside the running call, see it.
        """
        tasks, owner, modern = tasks_of(self.app), self.owner_of(ctx), _modern(ctx)
        args = arguments if isinstance(arguments, dict) or arguments is None else {"": arguments}
        try:
            task = await tasks.start(owner, tool.name, args, can_answer=lambda request: False)
        except ToolError as error:
            return result_to_wire(CallResult.failure(error), has_output_schema=True, modern=modern)
        try:
            await task.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await tasks.stop(task)  # (the caller went away: so does its job)
            raise
        result = task.result or CallResult.failure(ToolError(CANCELLED, f"Job {task.id} was stopped."))
        wire = result_to_wire(result, has_output_schema=tool.output_schema is not None, modern=modern)
        if not result.is_error:
            wire = self.decorate(wire, result, ctx)
        meta = dict((wire.get("_meta") or {}).get(VIEW_META) or {"view": "content"})
        wire["_meta"] = {**(wire.get("_meta") or {}), VIEW_META: {**meta, "job": job_state(task)}}
        return wire

    def decorate(self, wire: dict[str, Any], result: CallResult, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """A successful ``.app()`` result for an app-capable client: what its view needs, in ``_meta``."""
        if result.is_error or not declared(ctx):
            return wire
        meta = self.views.describe(result.value, self.owner_of(ctx), result.structured_content)
        wire["_meta"] = {**(wire.get("_meta") or {}), VIEW_META: meta}
        return wire

    def resources(self) -> list[types.Resource]:
        """The ``ui://`` views the app's tools name, for ``resources/list``."""
        views = sorted({tool.view for tool in self.app.tools if tool.view is not None})
        return [
            types.Resource(uri=ui_uri(view), name=f"fusion-nb {view} view", mime_type=APP_MIME_TYPE) for view in views
        ]


#: no network at all: the views' scripts and styles are inline, their data comes through the host
RESOURCE_META = {"ui": {"csp": {"connectDomains": [], "resourceDomains": []}, "prefersBorder": True}}


@functools.lru_cache(maxsize=8)
def view_html(uri: str) -> str | None:
    """The HTML of a built-in view (``ui://fusion-nb/NAME.html``), ``None`` for any other URI."""
    prefix, suffix = "ui://fusion-nb/", ".html"
    if not (uri.startswith(prefix) and uri.endswith(suffix)):
        return None
    view = uri[len(prefix) : -len(suffix)]
    if view not in ("auto", "table", "image", "plotly", "job"):
        return None
    page = package_files.files("fusion_nb.mcp").joinpath("views", "view.html").read_text(encoding="utf-8")
    page = page.replace("__FUSION_VIEW__", json.dumps(view))
    if view == "plotly":  # plotly's own bundle, from the package that made the figure, inline (no CDN)
        page = page.replace("<!--LIBRARY-->", f"<script>{plotly_bundle()}</script>", 1)
    return page


def plotly_bundle() -> str:
    """plotly.js as the ``plotly`` package ships it (``plotly/package_data/plotly.min.js``), or a stand-in
    that says it is missing (the view then shows the result's text)."""
    try:
        bundle = package_files.files("plotly").joinpath("package_data", "plotly.min.js").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return "window.PlotlyMissing = true;"
    return bundle.replace("</script", "<\\/script")


def _tasks_declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether a 2026 request opted into the tasks extension (then the tasks wire answers a task)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and opted_in(ctx)


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _refusal(sentence: str, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    return result_to_wire(
        CallResult.failure(ToolError(APP_ONLY, sentence)), has_output_schema=True, modern=_modern(ctx)
    )


# -- the notebook's preview ----------------------------------------------------------------------


class LocalHost:
    """The server's side of an app-capable host inside the kernel (the notebook's preview, #49 item 4).

    ``shown`` gives what a host gets for an ``.app()`` call (the view's HTML, the tool's list entry,
    the result on the wire with the view's ``_meta``), as ``AppsMiddleware`` gives it to a client that
    declared the extension; ``call`` answers the view's ``tools/call`` through the engine, the
    built-in app-only tools included, so paging a preview reaches only what the tool returned.
    """

    OWNER = "fusion-nb notebook preview"

    def __init__(self, app: App, views: Views | None = None) -> None:
        self.app, self.views = app, views or Views()
        self.tools = view_tools(self.views, app)

    def shown(self, name: str, arguments: dict[str, Any], result: CallResult) -> dict[str, Any]:
        tool = self.app.get(name)
        if tool is None or tool.view is None:
            raise ValueError(f"Tool {name!r} has no MCP Apps view: build it with .app() to preview it.")
        wire = result_to_wire(result, has_output_schema=tool.output_schema is not None)
        if not result.is_error:
            meta = self.views.describe(result.value, self.OWNER, result.structured_content)
            wire["_meta"] = {**(wire.get("_meta") or {}), VIEW_META: meta}
        html = view_html(ui_uri(tool.view)) or ""
        return {
            "html": html,
            "tool": tool_to_mcp(tool, apps=True).model_dump(mode="json", by_alias=True, exclude_none=True),
            "input": arguments,
            "result": wire,
            "csp": RESOURCE_META,
        }

    async def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """A view's ``tools/call``, validated and run by the engine as any call."""
        args = arguments if isinstance(arguments, dict) else {"": arguments}
        builtin = self.tools.get(name)
        token = _caller.set(self.OWNER)
        try:
            result = await (self.tools if builtin is not None else self.app).call(name, args)
        finally:
            _caller.reset(token)
        tool = builtin or self.app.get(name)
        return result_to_wire(result, has_output_schema=tool is not None and tool.output_schema is not None)
