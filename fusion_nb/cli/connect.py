"""``fusion-nb connect URL``: a stdio <-> Streamable HTTP bridge, so desktop hosts reach a kernel without Node.

Claude Desktop launches stdio servers only; ``%fusion serve`` and ``fusion-nb serve
--transport http`` speak Streamable HTTP. This bridge is an SDK low-level ``Server``
on stdio whose handlers forward to an SDK ``Client`` on the URL:

* ``tools/list`` is forwarded as is.
* ``tools/call``: progress comes back through ``report_progress``; cancelling the
  downstream request cancels the upstream one (the SDK cancels our handler, whose
  upstream call is then aborted); elicitation depends on the downstream era. A
  2026-07-28 host gets the upstream ``InputRequiredResult`` unchanged and retries
  with its answers and the upstream's sealed ``requestState``, which the bridge
  forwards byte for byte (it never sees the plaintext). A 2025-11-25 host is asked
  over its live session (``elicitation/create``) when the upstream asks the bridge.
* A change of the upstream's tools (a kernel cell redefining a tool) reaches the host:
  upstream, the bridge keeps a ``subscriptions/listen`` stream open for
  ``tools_list_changed`` (2026-07-28; a 2025-era upstream sends
  ``notifications/tools/list_changed`` on its session instead); downstream, a 2025-era
  host gets ``notifications/tools/list_changed`` on its session and a 2026-07-28 host on
  the ``subscriptions/listen`` stream it opened on the bridge. A lost upstream stream is
  re-opened, and the host is told the list may have changed (what happened meanwhile is
  not replayed).
* Tasks (``io.modelcontextprotocol/tasks``) pass through for a 2026-07-28 host when
  the upstream advertises them: the bridge advertises them too, forwards an opted-in
  ``tools/call`` (its client capabilities naming the extension, ``_restamped``) and
  returns the upstream's task answer unchanged (its client's claim, ``_tasks_claim``,
  never polls), and relays ``tasks/get``, ``tasks/list``, ``tasks/cancel`` and
  ``tasks/update`` as they came. A 2025-11-25 host's tasks are translated onto the
  same upstream extension (``legacy_tasks.LegacyTasks``): ``capabilities.tasks`` in its
  handshake, ``execution.taskSupport`` in its tool list (from a short 2025-era upstream
  session: the 2026 list has none), a ``params.task`` call sent upstream opted in
  (``_Forwarded.tasks``) and answered ``{"task": ...}``, and ``tasks/get``,
  ``tasks/result`` (polling, the task's questions asked over the host's session),
  ``tasks/list`` and ``tasks/cancel`` served from the upstream's ``tasks/*``. Without
  the extension upstream, any task request is refused in one sentence.
* Task status on listen: a 2026 host's ``subscriptions/listen`` naming ``taskIds``
  gets an upstream listen stream of its own for them, opened in the host's name and
  closed with the host's stream (``_TaskListen``); the host's ack names the ids the
  upstream accepted, and each upstream ``notifications/tasks`` reaches the host's
  stream stamped with the host's subscription id. Tool list changes share the stream.
* Resources, templates, prompts, completion and logging are forwarded when the upstream
  declares them (``_relayed_handlers``), and the host's handshake carries the upstream's
  ``serverInfo``, ``instructions`` and capabilities. A 2026 host's ``prompts/get`` and
  ``resources/read`` pass their input rounds through as a tool call does; a 2025 host is
  asked for sampling and roots over its session (``_forward_sampling``, ``_forward_roots``),
  and its ``logging/setLevel`` is kept and sent upstream in each request's ``_meta``.
* A POST of one call refused (413) or cut before any answer fails that call alone, in one
  sentence (``_watching_transport``: the SDK's client would leave it unanswered and close).
  A lost upstream fails the calls waiting on it; the bridge reconnects (``bridge``'s
  upstream loop), new calls wait a little for it, and the host is told to refetch.

A host gets through the bridge what it would get direct:

* Each forwarded request declares upstream the host's own ``clientInfo`` and exactly
  the elicitation modes the host declared (none, form, URL; the SDK client would
  declare both for any callback): the transport's writer restamps the 2026 envelope
  of requests sent on a host's behalf. So the upstream refuses a question the host
  cannot answer with its own ``ELICITATION_UNSUPPORTED`` result, in either era.
* A 2025-era host whose elicitation handler fails gets the ``ELICITATION_FAILED``
  result the server gives a direct client; any other failure reaches the host as one
  JSON-RPC error with its code and one sentence (never ``code 0``, never a traceback).
* A 2026 upstream's change arrives on the listen stream only once (the SDK client also
  copies listen events to the message handler, which the bridge then ignores).

Upstream the bridge speaks 2026-07-28 (every fusion-nb server does): its input rounds
run in the forwarding handler's own task, which is how an upstream question finds the
downstream request it belongs to. A 2025-era upstream fixes its session's capabilities
at the bridge's start, before any host is known: there the bridge declares both modes
and answers a question in a mode its host lacks with an error the upstream reports.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types
import pydantic
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..mcp.client_config import TOKEN_ENV
from ..mcp.params_errors import ParamsInOneSentence
from ..mcp.tasks import LEGACY_CAPABILITY, requested_ttl
from ..mcp.tasks_client import EXTENSION as TASKS_EXTENSION
from ..mcp.tasks_client import listen_request
from .errors import CliError
from .legacy_tasks import LegacyTasks
from .progress_relay import ProgressRelay
from .service import log_to_stderr as log

if TYPE_CHECKING:
    from ..engine import ToolError


@dataclasses.dataclass
class _Forwarded:
    """One downstream request being forwarded: the host's context and what went wrong asking it."""

    ctx: Any
    tool: str = ""
    failure: ToolError | None = None  # what the host would get direct, when asking the host failed
    listen: _UpstreamListen | None = None  # the upstream listen stream this request opens, told its request id
    tasks: bool = False  # made for a 2025-11-25 host's task: declares the tasks extension upstream


#: the level the bridge's 2025-era host set (``logging/setLevel``; one host per bridge): a 2026 upstream has no
#: setLevel, so each request made for that host carries it in ``_meta`` (every line until it sets one, as direct)
_host_level: contextvars.ContextVar[list[str]] = contextvars.ContextVar("fusion_nb_connect_host_level")

#: the downstream request an upstream request (or an upstream elicitation) is made for
_downstream: contextvars.ContextVar[_Forwarded] = contextvars.ContextVar("fusion_nb_connect_downstream")
#: where the upstream POSTs of one downstream call report a failure (the SDK sends them in that call's context)
_call_failure: contextvars.ContextVar[_Failure] = contextvars.ContextVar("fusion_nb_connect_failure")


async def bridge(
    url: str,
    token: str | None,
    *,
    headers: dict[str, str] | None = None,
    upstream_mode: str = "auto",
    streams: Any = None,
    answer_timeout: float | None = 600.0,
) -> int:
    """Serve stdio (or the given ``(read, write)`` streams) by forwarding to ``url``.

    ``answer_timeout`` bounds each question relayed to the host on stdio: with a 2026-07-28
    upstream the question comes back in an input-required result, and nothing upstream
    would ever end it (before, an unanswered one held its call for ever).
    """
    from .. import __version__
    from ..mcp.http import connect

    relay = _Relay(url)
    _host_level.set(["debug"])  # (seen by every task of this bridge: they are all started below)

    async def task_support() -> dict[str, str]:
        """Each upstream tool's ``taskSupport``, from a short 2025-era session (the 2026 wire has no ``execution``)."""
        support: dict[str, str] = {}
        async with connect(url, token, mode="legacy", headers=headers) as legacy:
            cursor = None
            while True:
                page = await legacy.list_tools(cursor=cursor)
                for tool in page.tools:
                    support[tool.name] = (tool.execution.task_support if tool.execution else None) or "forbidden"
                cursor = page.next_cursor
                if not cursor:
                    return support

    relay.fetch_task_support = task_support

    async def upstream(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The upstream client for as long as the bridge runs, opened again each time it is lost.

        The first failure to connect ends the bridge (its sentence says why); once serving,
        a lost upstream is retried (``RECONNECT_DELAYS``) and the host told the lists may
        have changed when it is back.
        """
        started, attempts = False, 0
        while not relay.stopped.is_set():
            try:
                async with (
                    connect(
                        url,
                        token,
                        mode=upstream_mode,
                        headers=headers,
                        transport=_watching_transport(),
                        outgoing=_HostStamp,
                        client_info=types.Implementation(name="fusion-nb-connect", version=__version__),
                        elicitation_callback=_forward_elicitation,
                        sampling_callback=_forward_sampling,
                        list_roots_callback=_forward_roots,
                        extensions=[_tasks_claim(relay.on_task_status)],
                        message_handler=relay.on_upstream_message,
                    ) as client,
                    anyio.create_task_group() as follow,
                ):
                    again = relay.attach(client)
                    await follow.start(relay.follow_upstream)  # listening upstream before the host lists tools
                    if not started:
                        started = True
                        task_status.started()
                    elif again:
                        await relay.lists_changed()  # a restarted upstream may offer other tools
                    attempts = 0
                    await relay.lost.wait()
                    follow.cancel_scope.cancel()
            except Exception as exc:
                if not started:
                    raise
                relay.connection_lost(exc)
            attempts += 1
            with anyio.move_on_after(relay.RECONNECT_DELAYS[min(attempts, len(relay.RECONNECT_DELAYS)) - 1]):
                await relay.stopped.wait()

    try:
        async with anyio.create_task_group() as group:
            await group.start(upstream)
            server = _bridge_server(relay)
            if streams is not None:
                await server.run(*streams, server.create_initialization_options())
            else:  # the host's side is fusion-nb serve's own stdio: bad lines, bounds, ids in use, signals
                from ..mcp.stdio import serve_server_stdio

                await serve_server_stdio(server, answer_timeout=answer_timeout)
            relay.stop()
    except* Exception as failed:
        from ..mcp.http import bearer_headers

        raise CliError(_upstream_failure(url, bearer_headers(token, headers), failed)) from None
    return 0


@dataclasses.dataclass(frozen=True)
class _UpstreamHandshake:
    """What the first upstream said of itself: the bridge says the same to its host."""

    info: types.Implementation | None
    instructions: str | None
    capabilities: types.ServerCapabilities
    protocol_version: str


class _Relay:
    """Holds the upstream client and passes the upstream's tool-list changes to the host.

    Downstream, a 2025-era host's session is remembered when it lists tools (it gets
    ``notifications/tools/list_changed``); a 2026-07-28 host listens on ``bus`` through
    the bridge's ``subscriptions/listen`` handler.
    """

    #: seconds before re-opening a lost upstream listen stream: the n-th failure in a row waits the n-th (or the last)
    RELISTEN_DELAYS = (0.1, 0.5, 2.0, 5.0)
    #: seconds before reconnecting to a lost upstream, likewise (capped at 1 s: a restarted kernel is back soon)
    RECONNECT_DELAYS = (0.05, 0.2, 0.5, 1.0)
    #: how long a host request waits for a lost upstream to come back before it is refused in one sentence
    RECONNECT_WAIT = 2.0

    def __init__(self, url: str = "") -> None:
        from mcp.server.subscriptions import InMemorySubscriptionBus

        self.url = url
        self.client: Any = None  # the upstream client while connected
        #: the first upstream's handshake (identity, instructions, capabilities, era): the host's handshake too
        self.first: _UpstreamHandshake | None = None
        self.connected = anyio.Event()  # set while an upstream client is attached
        self.lost = anyio.Event()  # the attached client is lost: the upstream loop opens another one
        self.stopped = anyio.Event()  # the host has gone: no more reconnecting
        self.down: str | None = None  # while no client is attached: why, in one sentence
        self.sessions: list[Any] = []
        self.bus = InMemorySubscriptionBus()
        self.output_schemas: dict[str, bool] = {}  # whether each listed tool declares one (error results differ)
        self.pending: set[_Failure] = set()  # the calls waiting for the upstream now
        self.task_listens: dict[types.RequestId, _UpstreamListen] = {}  # by upstream subscription id
        self.task_support: dict[str, str] = {}  # each listed tool's execution.taskSupport ("forbidden" when absent)
        self.fetch_task_support: Callable[[], Awaitable[dict[str, str]]] | None = None  # set by ``bridge``
        self.legacy = LegacyTasks(self.legacy_request, self.output_schemas)  # a 2025-11-25 host's tasks
        self.subscribed: dict[str, set[Any]] = {}  # resource URI -> the 2025-era host sessions subscribed to it

    def remember(self, session: Any) -> None:
        """A 2025-era host's session (it can be sent notifications): told of every change from now on."""
        if session not in self.sessions and session.can_send_request:
            self.sessions.append(session)

    def attach(self, client: Any) -> bool:
        """Serve through ``client`` from now on; whether it replaces a lost one (the host is then told)."""
        again = self.first is not None
        if again:
            log(f"reconnected to the upstream server at {self.url}")
        else:
            self.first = _UpstreamHandshake(
                client.server_info, client.instructions, client.server_capabilities, client.protocol_version
            )
        self.client, self.down = client, None
        self.lost = anyio.Event()
        self.connected.set()
        return again

    def connection_lost(self, exc: BaseException) -> None:
        """The upstream is gone: calls waiting on it end in one sentence, later ones wait for the reconnection."""
        cause = type(_first_leaf(exc)).__name__  # (an ExceptionGroup says nothing: what is inside it does)
        if self.client is not None:
            log(f"the connection to the upstream server at {self.url} was lost ({cause}); reconnecting")
            self.down = (
                f"the connection to the upstream server at {self.url} was lost ({cause}); "
                "the bridge reconnects as soon as it is back: try again shortly"
            )
            self.client = None
            self.connected = anyio.Event()
        for failure in list(self.pending):
            failure.fail(exc)
        self.lost.set()

    def stop(self) -> None:
        """The host has gone: the upstream loop closes its client and ends."""
        self.stopped.set()
        self.lost.set()

    async def lists_changed(self) -> None:
        """Tell every host the upstream's lists may have changed (it came back, perhaps as another kernel)."""
        from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged

        assert self.first is not None  # (only once reconnected)
        capabilities = self.first.capabilities
        if capabilities.resources is not None:
            await self.changed(ResourcesListChanged())
        if capabilities.prompts is not None:
            await self.changed(PromptsListChanged())
        await self.tools_changed()

    async def with_task_support(self, result: types.ListToolsResult) -> types.ListToolsResult:
        """A 2025-11-25 host's tool list with each task tool's ``execution.taskSupport`` (its hosts read it).

        The 2026 upstream's list has no ``execution``, so a short 2025-era session asks
        for it. If that fails, the list goes without it (the host then calls plainly,
        and the bridge refuses no ``params.task`` it cannot judge).
        """
        support = await self.learn_task_support()
        if support is None:
            return result
        tools = [
            tool
            if support.get(tool.name, "forbidden") == "forbidden"
            else tool.model_copy(
                update={"execution": types.ToolExecution.model_validate({"taskSupport": support[tool.name]})}
            )
            for tool in result.tools
        ]
        return result.model_copy(update={"tools": tools})

    async def learn_task_support(self) -> dict[str, str] | None:
        """Each upstream tool's ``taskSupport`` (kept in ``task_support``); ``None`` when it could not be learned."""
        try:
            support = await self.fetch_task_support() if self.fetch_task_support is not None else {}
        except Exception as exc:
            log(f"could not learn the upstream tools' task support ({type(exc).__name__}); listing them without it")
            return None
        self.task_support.update(support)
        return support

    async def legacy_request(self, ctx: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """``method`` upstream for a 2025-11-25 host's task (``LegacyTasks``), in the host's name, as JSON."""
        request = _Relayed(method=method, params=_OpenParams.model_validate(params))
        async with _forwarding(_Forwarded(ctx, tasks=True)):
            result: dict[str, Any] = await self.forward(lambda: self.client.session.send_request(request, _RAW_RESULT))
        return result

    async def forward(self, upstream: Any) -> Any:
        """Await ``upstream()`` (one downstream call's upstream request), or fail it in one sentence.

        While the upstream is lost the call waits up to ``RECONNECT_WAIT`` for it. The wait
        for the answer runs in the call's own cancel scope, which ``_Failure.fail`` cancels
        (this call's POST failed, or the upstream was lost); the upstream's own error
        propagates as is.
        """
        if self.client is None:
            with anyio.move_on_after(self.RECONNECT_WAIT):
                await self.connected.wait()
            if self.client is None:
                raise MCPError(types.INTERNAL_ERROR, self.down or f"the upstream server at {self.url} is not reachable")
        failure = _Failure()
        reset = _call_failure.set(failure)
        self.pending.add(failure)
        try:
            with failure.scope:
                return await upstream()
        finally:
            self.pending.discard(failure)
            _call_failure.reset(reset)
        raise MCPError(types.INTERNAL_ERROR, self._failed_call(failure))

    def _failed_call(self, failure: _Failure) -> str:
        """The sentence for a call whose upstream request failed; a failed POST also starts a reconnection."""
        error = failure.error or RuntimeError()
        cause = type(_first_leaf(error)).__name__
        if failure.posted is None:  # the upstream was lost while this call waited for its answer
            return (
                f"the upstream server at {self.url} failed ({cause}) while this call was in flight; "
                "its outcome is unknown; the bridge reconnects as soon as it is back"
            )
        size = failure.posted / 2**20
        if isinstance(error, _TooLarge):
            return (
                f"the upstream server at {self.url} refused this request: {size:.1f} MiB is more than it accepts (413)"
            )
        if cause == "ConnectError":  # it never reached the server (nothing ran): the server is gone
            self.connection_lost(error)
            return self.down or f"the upstream server at {self.url} is not reachable ({cause})"
        too_big = f"; the request was {size:.1f} MiB, perhaps more than it accepts" if size > 1 else ""
        return (
            f"the upstream server at {self.url} dropped this request before answering it ({cause}{too_big}); "
            "its outcome is unknown"
        )

    async def tools_changed(self) -> None:
        """Tell every downstream host that the tool list changed."""
        from mcp.server.subscriptions import ToolsListChanged

        await self.changed(ToolsListChanged())

    async def changed(self, event: Any) -> None:
        """Pass an upstream change (a ``ServerEvent``) on: 2026 hosts listen on ``bus``, 2025 ones are sent it."""
        from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated

        await self.bus.publish(event)
        if isinstance(event, ResourceUpdated):
            sessions = list(self.subscribed.get(event.uri, ()))
        else:
            sessions = list(self.sessions)
        for session in sessions:
            try:
                if isinstance(event, ResourceUpdated):
                    await session.send_resource_updated(event.uri)
                elif isinstance(event, ResourcesListChanged):
                    await session.send_resource_list_changed()
                elif isinstance(event, PromptsListChanged):
                    await session.send_prompt_list_changed()
                else:
                    await session.send_tool_list_changed()
            except Exception:  # that host is gone
                if session in self.sessions:
                    self.sessions.remove(session)
                for subscribers in self.subscribed.values():
                    subscribers.discard(session)

    async def on_upstream_message(self, message: Any) -> None:
        """A 2025-era upstream's notification, or the ack of a task listen stream opened for a host.

        A 2026 upstream's changes arrive on the listen stream ``follow_upstream`` reads;
        the SDK client copies those events here too, so here they are ignored (the host
        would be told twice). The SDK client routes no ack of a listen it did not open
        with ``Client.listen`` (the host's ``taskIds`` have no place there): those come
        here, and name their stream in ``_meta``.
        """
        if isinstance(message, types.SubscriptionsAcknowledgedNotification):
            listen = self._task_listen_of(message.params)
            if listen is not None:
                listen.acknowledged(message.params.notifications)
        elif isinstance(message, types.LoggingMessageNotification):
            await self.log_message(message.params)
        elif self.first is None or self.first.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated

            if isinstance(message, types.ToolListChangedNotification):
                await self.tools_changed()
            elif isinstance(message, types.ResourceListChangedNotification):
                await self.changed(ResourcesListChanged())
            elif isinstance(message, types.PromptListChangedNotification):
                await self.changed(PromptsListChanged())
            elif isinstance(message, types.ResourceUpdatedNotification):
                await self.changed(ResourceUpdated(uri=str(message.params.uri)))

    async def log_message(self, params: types.LoggingMessageNotificationParams) -> None:
        """An upstream log message: to the host whose request it came with, else to every 2025-era host."""
        forwarded = _downstream.get(None)
        targets = [(forwarded.ctx.session, forwarded.ctx.request_id)] if forwarded is not None else []
        targets = targets or [(session, None) for session in self.sessions]
        for session, request_id in targets:
            with contextlib.suppress(Exception):  # a host that is gone, or that set no level
                await session.send_log_message(params.level, params.data, params.logger, related_request_id=request_id)

    async def on_task_status(self, params: Any) -> None:
        """An upstream ``notifications/tasks`` (the bridge client's binding): queued on the host stream it is for."""
        listen = self._task_listen_of(params)
        task_id = (params.model_extra or {}).get("taskId")
        if listen is not None and isinstance(task_id, str):
            listen.stream.changed(task_id, params.model_dump(by_alias=True, mode="json", exclude_none=True))

    def _task_listen_of(self, params: Any) -> _UpstreamListen | None:
        """The host stream an upstream frame is for, by the subscription id in its ``_meta`` (if it is one of them)."""
        subscription_id = _subscription_of(params)
        return self.task_listens.get(subscription_id) if subscription_id is not None else None

    def modern_tasks(self) -> bool:
        """Whether the upstream speaks 2026-07-28 and advertises the tasks extension (so the bridge can too)."""
        if self.client is None or self.client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        declared = self.client.server_capabilities.extensions or {}
        return TASKS_EXTENSION in declared

    async def follow_upstream(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep a 2026-07-28 ``subscriptions/listen`` stream open upstream, for as long as the bridge runs.

        Reports started once the first stream is acknowledged (or could not be opened), so
        no change made after the host's first ``tools/list`` is missed. Never raises: a
        bridge that cannot follow changes still forwards calls.
        """
        from mcp.client.subscriptions import ListenNotSupportedError

        if self.client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            task_status.started()  # a 2025-era upstream notifies through on_upstream_message
            return
        started, failures = False, 0
        while True:
            try:
                offered = self.client.server_capabilities
                async with self.client.listen(
                    tools_list_changed=True,
                    prompts_list_changed=offered.prompts is not None,
                    resources_list_changed=offered.resources is not None,
                ) as subscription:
                    if not started:
                        started = True
                        task_status.started()
                    elif failures:
                        await self.lists_changed()  # changes while the stream was down are not replayed
                    failures = 0
                    async for event in subscription:
                        await self.changed(event)
                    failures = 1  # closed by the server: re-listen (and tell the host) after the first delay
            except ListenNotSupportedError:
                break
            except Exception as exc:
                if failures == 0:
                    log(f"upstream tools/list_changed stream lost ({type(exc).__name__}); re-opening it")
                failures += 1
            if not started:
                started = True
                task_status.started()
            await anyio.sleep(self.RELISTEN_DELAYS[min(failures, len(self.RELISTEN_DELAYS)) - 1])
        if not started:
            task_status.started()


class _Failure:
    """One downstream call's upstream failure: ``Watch`` fails it when a POST of that call failed."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()  # the call's wait for its upstream answer
        self.error: BaseException | None = None
        self.posted: int | None = None  # the failed POST's body size, when a POST of this call failed

    def fail(self, error: BaseException, posted: int | None = None) -> None:
        """Record ``error`` (the first one stays) and end the call's wait."""
        if self.error is None:
            self.error, self.posted = error, posted
        self.scope.cancel()


class _TooLarge(Exception):
    """The upstream answered a call's POST 413: its body is over the server's limit."""


def _watching_transport() -> Any:
    """The upstream HTTP transport of the bridge's client (``Watch``; httpx2 loads with the SDK, on first use)."""
    import httpx2

    class Watch(httpx2.AsyncBaseTransport):
        """The upstream HTTP transport, reporting a POST that fails before any answer to the call that sent it.

        The SDK's client sends a request's POST from a task running in the context of
        the call that asked (``_call_failure`` is visible there). When that POST fails
        before the response starts (connection refused or reset, the server gone), the
        SDK's client would leave the request unanswered and close itself, failing every
        other call in flight; instead the call is failed here (``_Relay.forward`` answers
        it in one sentence) and the SDK is given a 502 for that request alone. A 413 (the
        body over the server's limit) fails its call the same way. A failure later, on a
        streamed answer, is the SDK's to handle (it resumes or reports it).
        """

        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            failure = _call_failure.get(None) if request.method == "POST" else None
            try:
                response = await self.inner.handle_async_request(request)
            except httpx2.TransportError as exc:
                if failure is None:
                    raise
                failure.fail(exc, posted=len(request.content))
                return httpx2.Response(502, request=request)
            if failure is not None and response.status_code == 413:
                await response.aclose()
                failure.fail(_TooLarge(), posted=len(request.content))
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Watch()


def _bridge_server(relay: _Relay) -> Any:
    """The host's server: the upstream's identity, instructions and capabilities, each request forwarded."""
    from mcp.server.lowlevel.server import NotificationOptions, Server
    from mcp.server.subscriptions import ListenHandler

    upstream = relay.first
    assert upstream is not None  # (built once the upstream has answered)
    offered = upstream.capabilities

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        relay.remember(ctx.session)
        async with _forwarding(_Forwarded(ctx)):
            result: types.ListToolsResult = await relay.forward(
                lambda: relay.client.list_tools(cursor=params.cursor if params else None)
            )
        for tool in result.tools:
            relay.output_schemas[tool.name] = tool.output_schema is not None
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and relay.modern_tasks():
            result = await relay.with_task_support(result)
        return result

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        forwarded = _Forwarded(ctx, params.name)
        try:
            async with _forwarding(forwarded):
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    return await _modern_call(relay, ctx, params)
                progress = ProgressRelay(ctx.session.report_progress)
                result = await relay.forward(
                    lambda: relay.client.call_tool(
                        params.name, params.arguments, progress_callback=progress.on_progress
                    )
                )
                await progress.finish()  # the last value reaches the host before the result
                return result
        except MCPError as exc:
            if forwarded.failure is None and exc.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY:
                from ..engine import ELICITATION_UNSUPPORTED, ToolError

                # the 2026 upstream's refusal of what this 2025 host did not declare: the result it gets direct
                message, _, recovery = exc.error.message.partition(" Recovery: ")
                forwarded.failure = ToolError(ELICITATION_UNSUPPORTED, message, recovery=recovery or None)
            if forwarded.failure is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                raise  # the upstream's own error, with its code
        # asking the host failed: the result the upstream gives a client whose handler fails
        from ..engine import CallResult
        from ..mcp.convert import result_to_wire

        assert forwarded.failure is not None  # the only way here
        failed = CallResult.failure(forwarded.failure)
        return result_to_wire(failed, has_output_schema=relay.output_schemas.get(params.name, False), modern=False)

    class BridgeServer(Server[Any]):
        def create_initialization_options(self, *args: Any, **kwargs: Any) -> Any:
            changes = NotificationOptions(
                tools_changed=True,
                prompts_changed=offered.prompts is not None,
                resources_changed=offered.resources is not None,
            )
            return super().create_initialization_options(changes)

    info = upstream.info or types.Implementation(name="fusion-nb-connect", version="")
    with warnings.catch_warnings():
        # Relaying an upstream's logging is the point; the SDK's deprecation warning (SEP-2577)
        # would reach the host's stderr on every start, and nobody running the bridge can act on it.
        warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
        server = BridgeServer(
            info.name,
            version=info.version,
            title=info.title,
            instructions=upstream.instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_subscriptions_listen=_TaskListen(ListenHandler(relay.bus), relay),
            **_relayed_handlers(relay, offered),
        )
    if relay.modern_tasks():
        server.extensions[TASKS_EXTENSION] = {}  # declared to the host exactly when the upstream declares it
    # (the SDK's only default, its OpenTelemetry spans, off as in fusion_nb.mcp); params refused in one sentence
    server.middleware = [ParamsInOneSentence(), _TaskRelay(relay)]
    for method in ("tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update"):
        server.add_request_handler(method, _OpenParams, _task_request(relay, method))
    return server


def _relayed_handlers(relay: _Relay, offered: types.ServerCapabilities) -> dict[str, Any]:
    """Handlers for what the upstream offers besides tools: resources, prompts, completion, logging.

    Each is forwarded in the host's name (an upstream question during ``resources/read``
    or ``prompts/get`` reaches the host as a tool's does); a 2025-era host that lists or
    subscribes is remembered, to be told of changes.
    """

    async def forwarded(ctx: Any, request: Callable[[], Awaitable[Any]], what: str = "") -> Any:
        relay.remember(ctx.session)
        try:
            async with _forwarding(_Forwarded(ctx, what)):
                return await relay.forward(request)
        except MCPError as exc:
            modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            if exc.error.code != types.MISSING_REQUIRED_CLIENT_CAPABILITY or modern:
                raise
            said = " ".join(exc.error.message.partition(" Recovery: ")[::2]).strip()
            raise MCPError(types.INVALID_PARAMS, said) from None  # what a 2025 client gets direct

    def cursor(params: types.PaginatedRequestParams | None) -> str | None:
        return params.cursor if params else None

    handlers: dict[str, Any] = {}
    if offered.resources is not None:

        async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
            return await forwarded(ctx, lambda: relay.client.list_resources(cursor=cursor(params), cache_mode="bypass"))

        async def list_templates(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
            return await forwarded(
                ctx, lambda: relay.client.list_resource_templates(cursor=cursor(params), cache_mode="bypass")
            )

        async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # the host drives the input rounds, as for a tool
                request: Callable[[], Awaitable[Any]] = lambda: relay.client.session.read_resource(  # noqa: E731
                    str(params.uri), **_rounds(params)
                )
            else:
                request = lambda: relay.client.read_resource(str(params.uri))  # noqa: E731
            return await forwarded(ctx, request, str(params.uri))

        handlers.update(
            on_list_resources=list_resources, on_list_resource_templates=list_templates, on_read_resource=read_resource
        )
        if offered.resources.subscribe:

            async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> Any:
                relay.subscribed.setdefault(str(params.uri), set()).add(ctx.session)
                return await forwarded(ctx, lambda: relay.client.subscribe_resource(str(params.uri)))

            async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> Any:
                relay.subscribed.get(str(params.uri), set()).discard(ctx.session)
                return await forwarded(ctx, lambda: relay.client.unsubscribe_resource(str(params.uri)))

            handlers.update(on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe)
    if offered.prompts is not None:

        async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
            return await forwarded(ctx, lambda: relay.client.list_prompts(cursor=cursor(params), cache_mode="bypass"))

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                request: Callable[[], Awaitable[Any]] = lambda: relay.client.session.get_prompt(  # noqa: E731
                    params.name, params.arguments, **_rounds(params)
                )
            else:
                request = lambda: relay.client.get_prompt(params.name, params.arguments)  # noqa: E731
            return await forwarded(ctx, request, params.name)

        handlers.update(on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    if offered.completions is not None:

        async def complete(ctx: Any, params: types.CompleteRequestParams) -> Any:
            argument = {"name": params.argument.name, "value": params.argument.value}
            context = params.context.arguments if params.context is not None else None
            return await forwarded(ctx, lambda: relay.client.complete(params.ref, argument, context))

        handlers["on_completion"] = complete
    if offered.logging is not None:

        async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> Any:
            if relay.client is not None and relay.client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                _host_level.get()[0] = params.level  # a 2026 upstream has no setLevel: each request says it
                return types.EmptyResult()
            return await forwarded(ctx, lambda: relay.client.set_logging_level(params.level))

        handlers["on_set_logging_level"] = set_level
    return handlers


def _rounds(params: Any) -> dict[str, Any]:
    """A 2026 host's answers and sealed state, passed upstream byte for byte; its ``InputRequiredResult`` back."""
    return {
        "input_responses": params.input_responses,
        "request_state": params.request_state,
        "allow_input_required": True,
    }


class _OpenParams(types.RequestParams):
    """Params relayed as they came: every field the host sent, known to the SDK or not, goes upstream."""

    model_config = pydantic.ConfigDict(extra="allow", populate_by_name=True)


class _Relayed(types.Request[_OpenParams, str]):
    """A host's ``tasks/*`` request sent upstream unchanged (the SDK has no models of the 2026 draft's)."""

    method: str
    params: _OpenParams


class _TaskCreated(types.Result):
    """The upstream's ``resultType: "task"`` answer, every field kept, to hand to the host unchanged."""

    model_config = pydantic.ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = "task"


def _tasks_claim(on_status: Callable[[Any], Awaitable[None]]) -> Any:
    """The bridge client's tasks extension: it claims the upstream's task answer and returns it as it is.

    Without a registered claim the SDK client rejects a ``resultType: "task"`` answer;
    this one never polls (the host does, through the bridge's ``tasks/*`` handlers).
    Its binding hands each upstream ``notifications/tasks`` to ``on_status`` (the SDK
    client delivers an extension's notifications only through a binding).
    """
    from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim

    from ..mcp.task_listen import TaskStatusParams

    async def unresolved(created: _TaskCreated, ctx: ClaimContext) -> types.CallToolResult:
        raise RuntimeError("the bridge passes task answers to its host; it never resolves them itself")

    class PassThrough(ClientExtension):
        """``io.modelcontextprotocol/tasks``, declared upstream only for a host that declared it (``_restamped``)."""

        identifier = TASKS_EXTENSION

        def claims(self) -> list[ResultClaim[Any]]:
            return [ResultClaim(result_type="task", model=_TaskCreated, resolve=unresolved)]

        def notifications(self) -> list[NotificationBinding[Any]]:
            return [NotificationBinding(method="notifications/tasks", params_type=TaskStatusParams, handler=on_status)]

    return PassThrough()


#: the upstream's answer to a relayed request, kept as the JSON it was
_RAW_RESULT: pydantic.TypeAdapter[dict[str, Any]] = pydantic.TypeAdapter(dict[str, Any])


def _no_tasks(method: str) -> MCPError:
    """The refusal of a task request when the server behind the bridge has no tasks extension."""
    return MCPError(types.METHOD_NOT_FOUND, f"the server behind this bridge has no {method}")


def _host_opted_in(ctx: Any) -> bool:
    """Whether this 2026 request's own client capabilities carry the tasks extension."""
    declared = ctx.session.client_capabilities
    return TASKS_EXTENSION in ((declared.extensions if declared is not None else None) or {})


def _task_request(relay: _Relay, method: str) -> Any:
    """The bridge's handler of one ``tasks/*`` method: relayed, translated or refused in one sentence.

    A 2026 host's request goes upstream unchanged; a 2025-11-25 host's is served by
    ``LegacyTasks`` on the upstream's draft tasks (``tasks/update`` is not a 2025
    method, ``tasks/result`` not a 2026 one). No read timeout of the bridge's own:
    the SDK client's default is none, so a request waits as long as the upstream takes.
    """
    legacy_methods = {
        "tasks/get": relay.legacy.get,
        "tasks/result": relay.legacy.result,
        "tasks/list": relay.legacy.list,
        "tasks/cancel": relay.legacy.cancel,
    }

    async def handle(ctx: Any, params: _OpenParams) -> dict[str, Any]:
        if not relay.modern_tasks():
            raise _no_tasks(method)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            serve = legacy_methods.get(method)
            if serve is None:
                raise MCPError(
                    types.METHOD_NOT_FOUND,
                    f"{method} is not a 2025-11-25 method; a task's input is asked over tasks/result",
                )
            async with _forwarding(_Forwarded(ctx, tasks=True)):
                return await serve(ctx, params.model_dump(by_alias=True, mode="json", exclude_none=True))
        if method == "tasks/result":
            raise MCPError(
                types.METHOD_NOT_FOUND, "tasks/result is not in the 2026-07-28 tasks extension; poll tasks/get"
            )
        request = _Relayed(method=method, params=params)
        async with _forwarding(_Forwarded(ctx)):
            result: dict[str, Any] = await relay.forward(
                lambda: relay.client.session.send_request(request, _RAW_RESULT)
            )
        return result

    return handle


class _TaskRelay:
    """The bridge's middleware: a task-augmented ``tools/call`` goes upstream as an opted-in 2026 call.

    A 2026 host's task answer comes back as is; a 2025-11-25 host's comes back as the
    2025 ``{"task": ...}`` (``LegacyTasks.started``), and the 2025 handshake declares
    ``capabilities.tasks`` exactly when the upstream advertises the extension. A
    middleware, not the ``tools/call`` handler: a task answer is not a
    ``CallToolResult``, and the SDK sieves what that handler returns.
    """

    def __init__(self, relay: _Relay) -> None:
        self.relay = relay

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        """Relay an opted-in call with ``allow_claimed`` (translated for a 2025 host); pass the rest on."""
        if ctx.method == "initialize":
            result = await call_next(ctx)
            if self.relay.modern_tasks() and isinstance(result, dict) and isinstance(result.get("capabilities"), dict):
                result["capabilities"]["tasks"] = LEGACY_CAPABILITY
            return result
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            if params.get("task") is None:
                return await call_next(ctx)
            return await self._legacy_task(ctx, params)
        if not (_host_opted_in(ctx) and self.relay.modern_tasks()):
            return await call_next(ctx)
        call = types.CallToolRequestParams.model_validate(params, by_name=False)
        async with _forwarding(_Forwarded(ctx, call.name)):
            result = await _modern_call(self.relay, ctx, call, claimed=True)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _legacy_task(self, ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        """A 2025-11-25 ``params.task`` call: checked as the server checks it, then an opted-in call upstream.

        The host's ttl is checked but not passed on: the draft's call has no ttl (the
        task gets the tool's own, and its ``ttl`` says so).
        """
        name = params.get("name")
        if not self.relay.modern_tasks():
            raise _no_tasks("tasks")
        if not isinstance(name, str):
            raise MCPError(types.INVALID_PARAMS, "tools/call needs params.name, the name string of a tool.")
        requested_ttl(name, params["task"])
        if name not in self.relay.task_support:  # a host that calls before it lists: learn it now
            await self.relay.learn_task_support()
        if self.relay.task_support.get(name) == "forbidden":  # (unknown: the upstream judges it)
            raise MCPError(
                types.INVALID_PARAMS,
                f'Tool "{name}" does not run as a task (its taskSupport is "forbidden"); call it without params.task.',
            )
        plain = {key: value for key, value in params.items() if key != "task"}
        call = types.CallToolRequestParams.model_validate(plain, by_name=False)
        async with _forwarding(_Forwarded(ctx, name, tasks=True)):
            result = await _modern_call(self.relay, ctx, call, claimed=True)
        return self.relay.legacy.started(ctx, name, result.model_dump(by_alias=True, mode="json", exclude_none=True))


class _TaskListen:
    """The bridge's ``subscriptions/listen``: the SDK's handler on the relay's bus, plus a 2026 host's ``taskIds``.

    A host stream naming task ids (when the upstream advertises tasks; otherwise the
    SDK's handler ignores them, as a server without the extension does) gets an
    upstream listen stream of its own for them, opened in the host's name (so the
    upstream checks the host's own capabilities, ``-32003`` without the extension, and
    accepts only the bridge token's tasks, as it would direct). Malformed or too many
    ids are refused here, in the server's sentence (``requested_task_ids``, its bound).
    The host's ack, sent once the upstream acked, names the ids the upstream accepted;
    each upstream ``notifications/tasks`` is then sent on the host's stream stamped
    with the host's subscription id (``TaskStatusStream``, the server's own). Tool
    list changes travel on the same host stream as before. The upstream stream lives
    exactly as long as the host's: closed when the host's ends (closed by the host, or
    the host gone), closed at once when it accepted nothing, and its end (graceful or
    lost) ends the host's stream the same way (the host re-listens; nothing is replayed).
    """

    def __init__(self, core: Any, relay: _Relay) -> None:
        self.core = core
        self.relay = relay

    async def __call__(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        """Serve one host listen stream (with an upstream stream for its ``taskIds`` when there are any)."""
        from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY

        from ..mcp.task_listen import TaskStatusStream, requested_task_ids

        requested = requested_task_ids(params.notifications) if self.relay.modern_tasks() else None
        if not requested or ctx.request_id is None:
            return await self.core(ctx, params)  # (no request id: the SDK's handler refuses it)
        stream = TaskStatusStream(ctx.session, ctx.request_id, [], dict)
        upstream = _UpstreamListen(self.relay, stream)
        serving = anyio.CancelScope()
        result = None
        async with _forwarding(_Forwarded(ctx, listen=upstream)), anyio.create_task_group() as group:
            group.start_soon(upstream.run, requested)
            await upstream.acked.wait()
            if upstream.accepted is None:  # it ended before an ack: the upstream's refusal, as it came
                if upstream.error is not None:
                    raise upstream.error
                upstream.accepted = []
            stream.accepted = upstream.accepted
            if upstream.accepted:
                group.start_soon(stream.pump)
                group.start_soon(_end_with, upstream.ended, serving)
            else:
                upstream.scope.cancel()  # nothing to hear: no upstream stream for this host stream
            with serving:
                result = await self.core(dataclasses.replace(ctx, session=stream), params)
            group.cancel_scope.cancel()
        if result is None:  # the upstream stream ended first
            if upstream.error is not None:
                raise upstream.error
            result = types.SubscriptionsListenResult(_meta={SUBSCRIPTION_ID_META_KEY: ctx.request_id})
        return result


async def _end_with(ended: anyio.Event, serving: anyio.CancelScope) -> None:
    """End the host's stream (``serving``) once its upstream stream has ended."""
    await ended.wait()
    serving.cancel()


class _UpstreamListen:
    """The upstream listen stream the bridge opens for one host stream's ``taskIds``.

    The SDK client's ``send_request`` mints the request id, and that id is the
    subscription id naming the stream in every upstream frame; it is learnt as the
    request is written (``sent``, from ``_HostStamp``), before any answer can arrive.
    The relay then routes the upstream's ack (``acknowledged``) and task statuses (onto
    ``stream``, the host stream's ``TaskStatusStream``) by that id.
    """

    def __init__(self, relay: _Relay, stream: Any) -> None:
        self.relay = relay
        self.stream = stream
        self.id: types.RequestId | None = None
        self.accepted: list[str] | None = None  # the task ids the upstream's ack names, once it came
        self.acked = anyio.Event()  # the upstream's ack, or the stream's end before one
        self.ended = anyio.Event()
        self.error: MCPError | None = None  # how the upstream refused or lost the stream
        self.scope = anyio.CancelScope()  # cancelled: the stream is closed upstream

    def sent(self, message: Any) -> None:
        """``_HostStamp``: a request written upstream for this host stream; the listen request names the stream."""
        if self.id is None and isinstance(message, types.JSONRPCRequest) and message.method == "subscriptions/listen":
            self.id = message.id
            self.relay.task_listens[message.id] = self

    def acknowledged(self, honored: types.SubscriptionFilter) -> None:
        """The upstream's ack: the task ids it accepted (the first ack counts)."""
        if self.accepted is None:
            ids = (honored.model_extra or {}).get("taskIds")
            self.accepted = [task_id for task_id in ids if isinstance(task_id, str)] if isinstance(ids, list) else []
            self.acked.set()

    async def run(self, task_ids: list[str]) -> None:
        """Hold the upstream stream open until it ends or ``scope`` is cancelled; never raises (``error``)."""
        request = listen_request(task_ids)
        try:
            with self.scope:
                await self.relay.forward(
                    lambda: self.relay.client.session.send_request(request, types.SubscriptionsListenResult)
                )
        except MCPError as exc:
            self.error = exc
        except Exception as exc:
            self.error = _one_error(exc)
        finally:
            if self.id is not None:
                self.relay.task_listens.pop(self.id, None)
            self.ended.set()
            self.acked.set()


def _subscription_of(params: Any) -> types.RequestId | None:
    """The subscription id a listen stream's frame names in its ``_meta`` (``None``: it names none)."""
    from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY

    meta = getattr(params, "meta", None)
    value = meta.get(SUBSCRIPTION_ID_META_KEY) if isinstance(meta, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


async def _modern_call(relay: _Relay, ctx: Any, params: types.CallToolRequestParams, *, claimed: bool = False) -> Any:
    """A 2026 host's call upstream, its progress reported to the host.

    The host drives the input rounds; the upstream's sealed state passes through
    untouched. ``claimed``: a task answer comes back as the parsed claim, for a host
    that opted into tasks (otherwise the SDK client raises on it).
    """

    progress = ProgressRelay(ctx.session.report_progress)
    result = await relay.forward(
        lambda: relay.client.session.call_tool(
            params.name,
            params.arguments,
            progress_callback=progress.on_progress,
            input_responses=params.input_responses,
            request_state=params.request_state,
            allow_input_required=True,
            allow_claimed=claimed,
        )
    )
    await progress.finish()  # the last value reaches the host before the result
    return result


async def _forward_elicitation(context: Any, params: types.ElicitRequestParams) -> Any:
    """Ask the 2025-era host over its live session, in a mode it declared; a failure is noted for its result.

    Returns ``ErrorData`` rather than raising: the SDK client's input driver turns a
    raising callback into an ``ExceptionGroup``, and the host would see ``code 0``.
    """
    from ..engine import ELICITATION_UNSUPPORTED, ToolError
    from ..mcp.elicitation import declared_modes, handler_failed, malformed_answer

    forwarded = _downstream.get(None)
    if forwarded is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="the bridge has no host request to ask for")
    ctx = forwarded.ctx
    mode = "url" if isinstance(params, types.ElicitRequestURLParams) else "form"
    if mode not in declared_modes(ctx.session.client_capabilities):
        message = f"the connected host does not support {mode}-mode elicitation"
        forwarded.failure = ToolError(
            ELICITATION_UNSUPPORTED,
            f'Tool "{forwarded.tool}" needs input ({params.message[:80]!r}) but the connected host has no '
            f"{mode}-mode elicitation to ask for it.",
            recovery="Use a host that supports that elicitation mode.",
        )
        return types.ErrorData(code=types.INVALID_REQUEST, message=message)
    try:
        if isinstance(params, types.ElicitRequestURLParams):
            elicitation_id = getattr(params, "elicitation_id", None) or os.urandom(8).hex()
            return await ctx.session.elicit_url(
                params.message, params.url, elicitation_id, related_request_id=ctx.request_id
            )
        return await ctx.session.elicit_form(params.message, params.requested_schema, related_request_id=ctx.request_id)
    except MCPError as exc:
        forwarded.failure = handler_failed(forwarded.tool, exc.message)
        return exc.error
    except pydantic.ValidationError as exc:  # the host answered with no elicitation result
        forwarded.failure = malformed_answer(forwarded.tool, exc)
        return types.ErrorData(code=types.INVALID_REQUEST, message="the connected host's answer is malformed")


_SAMPLING_OPTIONS = (
    "system_prompt",
    "include_context",
    "temperature",
    "stop_sequences",
    "metadata",
    "model_preferences",
    "tools",
    "tool_choice",
)


async def _forward_sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
    """Ask the 2025-era host's model over its live session (an upstream ``sampling/createMessage``)."""
    forwarded = _downstream.get(None)
    declared = forwarded.ctx.session.client_capabilities if forwarded is not None else None
    if forwarded is None or declared is None or declared.sampling is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="the connected host does not support sampling")
    options = {key: value for key in _SAMPLING_OPTIONS if (value := getattr(params, key, None)) is not None}
    try:
        return await forwarded.ctx.session.create_message(
            params.messages, max_tokens=params.max_tokens, related_request_id=forwarded.ctx.request_id, **options
        )
    except MCPError as exc:
        return exc.error


async def _forward_roots(context: Any) -> Any:
    """Ask the 2025-era host for its roots over its live session (an upstream ``roots/list``)."""
    forwarded = _downstream.get(None)
    declared = forwarded.ctx.session.client_capabilities if forwarded is not None else None
    if forwarded is None or declared is None or declared.roots is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message="the connected host declares no roots")
    try:
        return await forwarded.ctx.session.list_roots()
    except MCPError as exc:
        return exc.error


@contextlib.asynccontextmanager
async def _forwarding(forwarded: _Forwarded) -> AsyncIterator[None]:
    """Forward one host request: upstream requests are made in the host's name, failures become one error.

    An upstream JSON-RPC error reaches the host with its code; anything else (an
    ``ExceptionGroup`` from the SDK's task groups, a lost connection) becomes one
    ``INTERNAL_ERROR`` sentence, never the SDK server's ``code 0`` and logged traceback.
    """
    token = _downstream.set(forwarded)
    try:
        yield
    except MCPError:
        raise
    except Exception as exc:
        raise _one_error(exc) from None
    finally:
        _downstream.reset(token)


def _one_error(exc: BaseException) -> Any:
    """The ``MCPError`` a failed forward reaches the host as: the only ``MCPError`` inside, or one sentence."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return MCPError(
        code=types.INTERNAL_ERROR, message=f"the bridge's upstream request failed: {type(exc).__name__}: {text}"
    )


class _HostStamp:
    """The upstream write stream: a request sent for a host declares the host's identity and elicitation modes.

    The SDK client stamps its own ``clientInfo`` and, having a callback, both
    elicitation modes into each 2026 request's envelope; the upstream must instead
    see who is really asking and what it can answer. The bridge's own requests
    (``server/discover``, its listen stream) keep the bridge's identity.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, item: Any) -> None:
        """Pass ``item`` on, restamped when it is a request made for a host."""
        forwarded = _downstream.get(None)
        if forwarded is not None:
            item = _restamped(item, forwarded)
            if forwarded.listen is not None:
                forwarded.listen.sent(item.message)
        await self.inner.send(item)

    async def aclose(self) -> None:
        """Close the upstream write stream."""
        await self.inner.aclose()

    async def __aenter__(self) -> _HostStamp:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self.inner.__aexit__(*exc_info)


def _restamped(item: Any, forwarded: _Forwarded) -> Any:
    """``item`` (a ``SessionMessage``) with a 2026 envelope naming the host and its elicitation modes.

    The tasks extension is declared when the host declared it, or when the request
    serves a 2025-11-25 host's task (``forwarded.tasks``: the bridge translates it).
    """
    ctx = forwarded.ctx
    message = item.message
    if not isinstance(message, types.JSONRPCRequest) or not isinstance(message.params, dict):
        return item
    params = message.params
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return item
    if types.CLIENT_CAPABILITIES_META_KEY not in meta:
        return item  # a handshake-era upstream: its capabilities were fixed at initialize
    meta = dict(meta)
    capabilities = dict(meta[types.CLIENT_CAPABILITIES_META_KEY])
    declared = ctx.session.client_capabilities
    elicitation = declared.elicitation if declared is not None else None
    if elicitation is None:
        capabilities.pop("elicitation", None)
    else:
        capabilities["elicitation"] = elicitation.model_dump(by_alias=True, mode="json", exclude_none=True)
    for kind in ("sampling", "roots"):  # (the bridge asks its host for them: declared exactly when the host does)
        offered = getattr(declared, kind, None) if declared is not None else None
        if offered is None:
            capabilities.pop(kind, None)
        else:
            capabilities[kind] = offered.model_dump(by_alias=True, mode="json", exclude_none=True)
    extensions = dict(capabilities.get("extensions") or {})
    extensions.pop(TASKS_EXTENSION, None)  # the bridge's claim: declared only for a host that declared it
    if declared is not None and TASKS_EXTENSION in (declared.extensions or {}):
        extensions[TASKS_EXTENSION] = declared.extensions[TASKS_EXTENSION]
    elif forwarded.tasks:
        extensions[TASKS_EXTENSION] = {}
    if extensions:
        capabilities["extensions"] = extensions
    else:
        capabilities.pop("extensions", None)
    meta[types.CLIENT_CAPABILITIES_META_KEY] = capabilities
    # Log lines: a 2026 host's own level, a 2025 host's setLevel (every line until it sets one, as direct).
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        level = (getattr(ctx, "meta", None) or {}).get(types.LOG_LEVEL_META_KEY)
    else:
        level = _host_level.get(["debug"])[0]
    if level is None:
        meta.pop(types.LOG_LEVEL_META_KEY, None)
    else:
        meta[types.LOG_LEVEL_META_KEY] = level
    client_params = ctx.session.client_params
    if client_params is not None:
        meta[types.CLIENT_INFO_META_KEY] = client_params.client_info.model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
    restamped = message.model_copy(update={"params": {**params, "_meta": meta}})
    return dataclasses.replace(item, message=restamped)


def _first_leaf(exc: BaseException) -> BaseException:
    """The first exception inside ``exc``'s groups, however nested (``exc`` itself when it is no group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _upstream_failure(url: str, headers: dict[str, str] | None, group: BaseExceptionGroup[Exception]) -> str:
    """One sentence for a bridge that could not reach or lost its server (the SDK hides HTTP statuses)."""
    import json
    import urllib.error
    import urllib.request

    probe = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "ping"}).encode()
    request_headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        **(headers or {}),
    }
    request = urllib.request.Request(url, data=probe, headers=request_headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status = response.status
    except urllib.error.HTTPError as answered:
        status = answered.code
    except (urllib.error.URLError, OSError) as exc:
        return f"cannot reach {url} ({type(exc).__name__}); is the server running?"
    if status == 401:
        return f"{url} refused the bearer token (401); pass --token or set {TOKEN_ENV}"
    if status in (403, 421):
        return f"{url} refused this client's Host or Origin ({status}); serve it with --allow-host"
    if status == 404:
        return f"{url} answered 404; the MCP endpoint is usually at /mcp"
    first = group.exceptions[0] if group.exceptions else group
    while isinstance(first, BaseExceptionGroup) and first.exceptions:
        first = first.exceptions[0]
    text = str(first).splitlines()[0] if str(first) else ""
    return f"the connection to {url} failed: {type(first).__name__}: {text}"


__all__ = ["bridge"]
