"""``mcp_server(app)``: the SDK's low-level ``Server`` serving a App app.

Handlers only translate: ``tools/list`` describes the registry, ``tools/call`` starts an
engine call and waits for it. Cancellation needs no code here: when the SDK cancels
the handler (``notifications/cancelled``, an aborted POST, a closed stream), the
cancellation lands in ``call.wait()``, which aborts the engine call and re-raises.
"""

from __future__ import annotations

import contextvars
import logging
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..engine import App, tasks_of
from .apps import EXTENSION_ID, AppsMiddleware, Views, app_only
from .catalog import serve_catalog
from .changes import ToolsChangedNotifier
from .convert import result_to_wire, tool_to_mcp
from .elicitation import (
    channel_for,
    input_required,
    missing_capability,
    resumption,
    state_boundary,
)
from .ending import serving
from .limits import OncePerInterval
from .log_messages import LogLevels, LogPump
from .options import PAGE_SIZE, TASK_PAGE_SIZE, ServerOptions, with_options
from .pages import Cursors, ListPages, PageMiddleware
from .params_errors import ParamsInOneSentence
from .progress import ProgressPump, wants_progress
from .rich import install_default
from .task_listen import TaskListenHandler
from .tasks import TaskWire, owner_of
from .tasks import install as install_tasks

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from starlette.requests import Request


#: the MCP client a tool call is started for ("claude-code 2.1"), while ``tools/call`` starts it;
#: a host that shows who called (the notebook's activity panel) reads it through ``client_label``
calling_client: contextvars.ContextVar[str | None] = contextvars.ContextVar("fusion_nb_calling_client", default=None)


def client_label(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The client's name and version as it declared them, printable and at most 60 characters."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    if info is None:
        return None
    label = f"{info.name} {info.version}".strip()
    if not label.isprintable():  # (read on every call: the character walk only for a label that needs it)
        label = "".join(c for c in label if c.isprintable())
    return label if len(label) <= 60 else label[:59] + "…"


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What ``context_factory(request_info)`` receives for a call that came over MCP.

    ``context`` is the SDK's ``ServerRequestContext`` (session, meta, request id);
    ``request`` is the Starlette request on HTTP (``None`` elsewhere);
    ``access_token`` is the verified bearer token on authenticated HTTP.
    """

    context: ServerRequestContext[Any, Any]

    @property
    def protocol_version(self) -> str:
        """The era the request speaks (``2025-11-25`` or ``2026-07-28``)."""
        return self.context.protocol_version

    @property
    def request(self) -> Request | None:
        """The Starlette request on HTTP, ``None`` on stdio and in memory."""
        return self.context.request

    @property
    def client_info(self) -> types.Implementation | None:
        """The client's name and version, when it sent them."""
        params = self.context.session.client_params
        return params.client_info if params is not None else None

    @property
    def access_token(self) -> AccessToken | None:
        """The verified bearer token on authenticated HTTP (``client_id`` names the token), else ``None``."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        return get_access_token()


class FusionServer(Server[Any]):
    """The SDK's low-level ``Server`` serving one ``App``, complete when constructed: its handlers
    are its methods, its middleware and extensions installed by ``__init__``.

    The handshake declares ``listChanged`` for tools, resources and prompts, and MCP Apps
    (``extensions`` on 2026-07-28, ``experimental`` on 2025-11-25, whose capabilities have no
    ``extensions``): the SDK derives capabilities from ``NotificationOptions`` passed at run
    time, and its in-memory and HTTP entries pass none. ``http_mode``: the words naming an
    HTTP mode that leaves 2025-era calls no way to ask the client
    (``HttpOptions.back_channel_refusal``); a refused question quotes them.
    """

    app: App
    notifier: ToolsChangedNotifier
    #: the tasks wire; ``task_wire.heartbeat`` is the seconds between heartbeats of a task tool run plainly
    task_wire: TaskWire
    #: the ``subscriptions/listen`` handler (``task_listen.watching``: task watches its open streams hold)
    task_listen: TaskListenHandler

    def __init__(self, app: App, options: ServerOptions, *, http_mode: str | None = None) -> None:
        install_default()  # figures, tables and ``_repr_*_`` values as rich content (a kernel plugs in IPython's)
        _quiet_malformed_notifications()
        self.app = app
        self.http_mode = http_mode
        self.progress_interval = options.progress_interval
        keys = options.request_state_keys
        cursors = Cursors(keys[0] if keys else None)  # (one endpoint's workers share it: each reads the others')
        page_size = options.page_size or PAGE_SIZE

        def tool_list(source: Callable[[], list[types.Tool]]) -> ListPages:
            kind = types.ListToolsResult
            return ListPages(
                "tools/list", kind, "tools", source, page_size=page_size, cursors=cursors, stamp=self._stamp
            )

        self.tool_pages = tool_list(self._tools)
        app_tool_pages = tool_list(self._app_tools)  # (a client that declared MCP Apps)
        self.apps = apps = AppsMiddleware(app, Views(), PageMiddleware([app_tool_pages]), owner_of)
        self.log_levels = LogLevels()  # what each 2025 connection chose with logging/setLevel
        super().__init__(
            app.name,
            version=app.version,
            instructions=app.instructions,
            on_list_tools=self.tool_pages.handler,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._input_schema,
        )
        # The SDK's defaults (OpenTelemetry spans) only when asked: a span per call.
        defaults = list(self.middleware) if options.telemetry else []
        boundary = state_boundary(app.name, keys=options.request_state_keys, ttl=options.request_state_ttl)
        self.middleware = [*defaults, ParamsInOneSentence(), boundary, apps]  # (apps: before tasks see a call)
        self.extensions[EXTENSION_ID] = {}
        # (tasks' middleware innermost: task calls carry no request state); the heartbeat is read per call
        self.task_wire = install_tasks(
            self, tasks_of(app), page_size=options.page_size or TASK_PAGE_SIZE, cursors=cursors
        )
        self.notifier = notifier = ToolsChangedNotifier()
        # 2026 listen streams: the SDK's list-changed filter, plus task status for the client's own taskIds
        self.task_listen = TaskListenHandler(notifier.listen_handler, self.task_wire.tasks)
        self.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, self.task_listen)
        self.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self.log_levels.set_level)
        self.add_notification_handler("notifications/initialized", types.NotificationParams, notifier.on_initialized)
        # resources/* and prompts/* (their list changes through the same notifier); the views' ui:// resources too
        catalog_pages = serve_catalog(
            self,
            app,
            notifier,
            page_size=page_size,
            cursors=cursors,
            stamp=self._stamp,
            extra_resources=apps.resources,
        )
        lists = (self.tool_pages.invalidate, app_tool_pages.invalidate, catalog_pages[0].invalidate)
        _listen_weakly(app, self, *lists, notifier.changed)
        self.middleware.append(PageMiddleware([self.tool_pages, *catalog_pages]))  # innermost: cached list pages

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The SDK's options, declaring ``listChanged`` for tools, resources and prompts unless told otherwise."""
        every = NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
        # (2025-11-25 capabilities carry no ``extensions``: MCP Apps is declared as experimental there too)
        experimental = experimental_capabilities if experimental_capabilities is not None else {EXTENSION_ID: {}}
        return super().create_initialization_options(notification_options or every, experimental, extensions)

    def _tools(self) -> list[types.Tool]:
        jobs = tasks_of(self.app).job_wait is not None  # job tools on: task tools may answer a job id
        return [tool_to_mcp(tool, jobs=jobs) for tool in self.app.tools if not app_only(tool)]

    def _app_tools(self) -> list[types.Tool]:  # (a client that declared MCP Apps: views' tools and ``_meta.ui``)
        jobs = tasks_of(self.app).job_wait is not None
        return [tool_to_mcp(tool, jobs=jobs, apps=True) for tool in self.apps.listed(apps=True)]

    def _stamp(self) -> dict[str, Any]:
        return self.server_info_stamp

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        tool = self.app.get(name)
        return tool.input_schema if tool is not None else None

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        calling = calling_client.set(client_label(ctx))  # read as the call starts (the notebook's panel)
        try:
            return await self._run_call(ctx, params)
        finally:
            calling_client.reset(calling)

    async def _run_call(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        # Returns the CallToolResult wire dict (see convert.result_to_wire): the SDK validates it the same way.
        # A requestState here is plaintext: the SDK's RequestStateBoundary (middleware) unsealed and checked it.
        app = self.app
        info = RequestInfo(ctx) if app.context_factory is not None else None
        resume = response = None
        if params.request_state:
            resume, response = resumption(params, params.request_state)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        channel = channel_for(ctx, modern, self.http_mode)
        tool = app.get(params.name)  # (the tool this call runs: nothing can replace it before ``run`` starts)
        exchange = serving.get()  # why our transport may end it early (the SDK's own transports: no reason)
        ended_by = exchange.ended_because if exchange is not None else None
        least = self.log_levels.least(ctx, modern)
        pump = logs = None
        if wants_progress(ctx, modern):
            heartbeat = self.task_wire.heartbeat if tool is not None and tool.task is not None else None
            pump = ProgressPump(ctx.session.report_progress, self.progress_interval, heartbeat)
        if least is not None:
            logs = LogPump(ctx, least, params.name)
        request = app.request(
            params.name,
            params.arguments,
            on_progress=pump.offer if pump is not None else None,
            request_info=info,
            channel=channel,
            resume=resume,
            response=response,
            ended_by=ended_by,
            on_log=logs.offer if logs is not None else None,
        )
        try:
            if pump is None:
                result = await app.run(request)
            else:
                async with anyio.create_task_group() as group:
                    group.start_soon(pump.run)
                    try:
                        result = await app.run(request)
                    finally:
                        pump.close()  # normal end: the last value goes out before the result
        except BaseException:
            if logs is not None:
                logs.abandon()
            raise
        if logs is not None:
            await logs.finish()  # every line before the result
        if result.input_required is not None:
            return input_required(result.input_required)  # sealed on its way out by the boundary
        if modern and result.error is not None:
            missing = missing_capability(result.error)
            if missing is not None:
                raise missing
        wire = result_to_wire(
            result, has_output_schema=tool is not None and tool.output_schema is not None, modern=modern
        )
        return self.apps.decorate(wire, result, ctx) if tool is not None and tool.view is not None else wire


@with_options(ServerOptions)
def mcp_server(app: App, options: ServerOptions) -> FusionServer:
    """The SDK's low-level server for ``app``; serve it in-memory, over stdio or HTTP.

    The options are ``ServerOptions``' (``fusion_nb.mcp.options``), which documents them.
    """
    return FusionServer(app, options)


def _listen_weakly(app: App, server: FusionServer, *callbacks: Any) -> None:
    """Subscribe to registry changes for as long as ``server`` lives (an app outlives many servers)."""
    ref = weakref.ref(server)
    subscription: list[Callable[[], None]] = []

    def listener() -> None:
        if ref() is None:
            subscription[0]()
            return
        for callback in callbacks:
            callback()

    subscription.append(app.on_tools_changed(listener))
    weakref.finalize(server, subscription[0])


#: the SDK's runner logs a WARNING per notification with malformed params, which a client can send at will
_MALFORMED = OncePerInterval("dropped %r: malformed params")


def _quiet_malformed_notifications() -> None:
    """One such WARNING per 10 s on the SDK's runner logger (installed once per process)."""
    runner_log = logging.getLogger("mcp.server.runner")
    if _MALFORMED not in runner_log.filters:
        runner_log.addFilter(_MALFORMED)
