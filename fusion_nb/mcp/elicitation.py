"""Interactive input over MCP, per protocol era (SPEC 4).

* 2026-07-28: the call ends with ``InputRequiredResult`` (the engine's ``DEFER``),
  in a mode the client declared (form, URL; a bare ``elicitation: {}`` is form only,
  as the spec and the SDK read it); the engine's continuation travels as ``requestState``, sealed
  by the SDK's ``RequestStateBoundary`` installed as server middleware (AES-GCM,
  expiry, bound to tool, arguments, audience and the authenticated client). The
  client retries with the answer and the engine resumes from the continuation.
* 2025-11-25: a connection whose client declared elicitation is asked live
  (``elicitation/create``, form or URL mode); the handler is re-entered in-process.
* Neither: a client without the capability gets ``ELICITATION_UNSUPPORTED``; a server
  whose HTTP mode leaves no back channel says so and names the setting to change; a
  client whose own elicitation handler fails gets ``ELICITATION_FAILED`` with its
  message.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.methods import is_input_required
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..engine import (
    DEFER,
    ELICITATION_UNSUPPORTED,
    InputChannel,
    InputQuestion,
    InputRequest,
    InputResponse,
    NoChannel,
    NoWayToAsk,
    ToolError,
    validation_sentence,
)

ELICITATION_FAILED = "ELICITATION_FAILED"
"""The client declared elicitation, but its handler failed while answering (its message follows)."""

_CLIENT_MESSAGE_LIMIT = 300
_NO_CHANNEL = NoChannel()


def declared_modes(capabilities: types.ClientCapabilities | None) -> frozenset[str]:
    """The elicitation modes (``"form"``, ``"url"``) a client declared.

    The spec: "Servers MUST NOT send elicitation requests with modes that are not
    supported by the client", and a bare ``elicitation: {}`` (the shape from before
    modes existed) means form only; the SDK's own resolver reads it the same way.
    """
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return frozenset()
    if elicitation.form is None and elicitation.url is None:
        return frozenset({"form"})
    return frozenset(
        mode for mode, given in (("form", elicitation.form), ("url", elicitation.url)) if given is not None
    )


_MODES = {"url": "url", "elicit": "form", "sample": "sampling", "roots": "roots"}


def mode_of(request: InputRequest) -> str:
    """What a client must declare to answer an engine request: ``form``, ``url``, ``sampling`` or ``roots``."""
    return _MODES.get(request.kind, request.kind)


def answerable(capabilities: types.ClientCapabilities | None) -> frozenset[str]:
    """Every kind of request a client declared it answers: its elicitation modes, sampling, roots."""
    modes = declared_modes(capabilities)
    if capabilities is not None:
        given = (("sampling", capabilities.sampling), ("roots", capabilities.roots))
        modes = modes | {mode for mode, declared in given if declared is not None}
    return modes


def client_can_answer(session: ServerSession, request: InputRequest) -> bool:
    """Did the client declare what this request needs (an elicitation mode, sampling, roots)?"""
    return mode_of(request) in answerable(session.client_capabilities)


class DeferInDeclaredModes(InputChannel):
    """2026 era: the client answers by calling again, but only requests in a mode it declared.

    A request in any other mode gets ``None``, so the tool fails at once with the
    same ``ELICITATION_UNSUPPORTED`` a 2025 client without that mode gets, instead of
    an ``InputRequiredResult`` the client must refuse (the TypeScript client throws).
    """

    def __init__(self, modes: frozenset[str]) -> None:
        self.modes = modes

    async def ask(self, question: InputQuestion) -> Any:
        """``DEFER`` when the client declared this request's mode, else ``None`` (nobody to ask)."""
        return DEFER if mode_of(question.request) in self.modes else None


_DEFERRING: dict[frozenset[str], DeferInDeclaredModes] = {}


def form_schema(request: InputRequest) -> dict[str, Any]:
    """The ``requestedSchema`` of a form request (an empty object form if it names no fields)."""
    return request.schema or {"type": "object", "properties": {}}


def no_back_channel(tool: str, server_mode: str) -> ToolError:
    """The refusal when this server's HTTP mode, not the client, rules out a live question."""
    return ToolError(
        ELICITATION_UNSUPPORTED,
        f'Tool "{tool}" needs input, but this server {server_mode}, '
        "which leaves no way to ask a 2025-11-25 client during a call.",
        recovery="Serve with http_app(json_response=False, stateless=False), "
        "or connect with a 2026-07-28 client (it answers by calling again).",
    )


def handler_failed(tool: str, client_message: object, handler: str = "elicitation") -> ToolError:
    """``ELICITATION_FAILED``: the client's own ``handler`` failed (its message, bounded, quoted).

    Shared with ``fusion-nb connect``, which gives its host the sentence this server would.
    """
    message = " ".join(str(client_message).split())[:_CLIENT_MESSAGE_LIMIT]
    return ToolError(
        ELICITATION_FAILED,
        f'Tool "{tool}" asked for input and the client\'s {handler} handler failed: {message!r}.',
        recovery=f"Fix or retry the client's {handler} handler; the tool did not run past its question.",
    )


def malformed_answer(tool: str, error: ValidationError) -> ToolError:
    """``ELICITATION_FAILED``: the client answered with no elicitation result (field, expected, sent; bounded).

    Its handler's fault, not the tool's: no ``INTERNAL_ERROR``, no traceback in the log.
    """
    head = f'Tool "{tool}" asked for input and the client\'s answer is malformed: '
    return ToolError(
        ELICITATION_FAILED,
        validation_sentence(head, error),
        recovery="Fix the client's elicitation handler; the tool did not run past its question.",
    )


class LiveElicitation(InputChannel):
    """2025 era: ask over the live session; protocol clients are not re-asked.

    ``http_mode`` names the HTTP mode that leaves no way to ask (``None`` when
    there is one): a question that fails for that reason says so, naming the setting.
    """

    def __init__(self, ctx: ServerRequestContext[Any, Any], http_mode: str | None = None) -> None:
        self.ctx = ctx
        self.http_mode = http_mode

    async def ask(self, question: InputQuestion) -> InputResponse | None:
        """Send ``elicitation/create`` and wait for the person's answer (or explain why not).

        Protocol clients are not re-asked, so ``question.problems`` is never used.
        """
        return await self._elicit(question.request, question.tool)

    async def _elicit(self, request: InputRequest, tool: str) -> InputResponse | None:
        ctx = self.ctx
        session = ctx.session
        mode = self.http_mode
        if session.client_capabilities is None and mode is not None:
            raise no_back_channel(tool, mode)  # stateless 2025: the capabilities never arrive
        if not client_can_answer(session, request):
            return None  # the engine's ELICITATION_UNSUPPORTED: the client declared no such capability
        try:
            if not request.for_person:
                return InputResponse("accept", await self._ask_client(request))
            if request.kind == "url":
                assert request.url is not None
                result = await session.elicit_url(
                    request.message, request.url, uuid.uuid4().hex, related_request_id=ctx.request_id
                )
            else:
                result = await session.elicit_form(
                    request.message, form_schema(request), related_request_id=ctx.request_id
                )
        except NoBackChannelError:
            if mode is not None:
                raise no_back_channel(tool, mode) from None
            return None
        except MCPError as exc:
            raise handler_failed(tool, exc.message, _HANDLERS[request.kind]) from None
        except ValidationError as exc:  # an answer the protocol's ElicitResult refuses: the client's fault, said so
            raise malformed_answer(tool, exc) from None
        return InputResponse(result.action, result.content)

    async def _ask_client(self, request: InputRequest) -> dict[str, Any]:
        """Sampling or roots, asked of the client over the live session: its result, whole, as a dict."""
        related = ServerMessageMetadata(related_request_id=self.ctx.request_id)
        result: Any
        if request.kind == "roots":
            result = await self.ctx.session.send_request(
                types.ListRootsRequest(), types.ListRootsResult, metadata=related
            )
        else:  # (the request itself, not the SDK's create_message helper: it warns that 2026 deprecates sampling)
            asked = types.CreateMessageRequest(params=types.CreateMessageRequestParams.model_validate(request.params))
            result = await self.ctx.session.send_request(asked, types.CreateMessageResult, metadata=related)
        dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped


_HANDLERS = {"elicit": "elicitation", "url": "elicitation", "sample": "sampling", "roots": "roots"}


#: what a client must declare to answer each kind of engine request, as ``requiredCapabilities`` says it
_REQUIRED: dict[str, dict[str, Any]] = {
    "elicit": {"elicitation": {"form": {}}},
    "url": {"elicitation": {"url": {}}},
    "sample": {"sampling": {}},
    "roots": {"roots": {}},
}


def requires(sentence: str, capabilities: dict[str, Any]) -> MCPError:
    """SEP-2575's ``-32021``: this request needs ``capabilities`` (a ``ClientCapabilities`` object) undeclared."""
    return MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, sentence, data={"requiredCapabilities": capabilities})


def missing_capability(error: Any) -> MCPError | None:
    """2026 (SEP-2575): a request that needs what the client did not declare is ``-32021`` naming it,
    not a result (a 2025 caller keeps the ``ELICITATION_UNSUPPORTED`` result); ``None`` for other errors."""
    if not isinstance(error, NoWayToAsk):
        return None
    sentence = f"{error.message} Recovery: {error.recovery}" if error.recovery else error.message
    return requires(sentence, _REQUIRED.get(error.kind, _REQUIRED["elicit"]))


def is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request speaks the 2026-07-28 era (no server-to-client requests)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def channel_for(ctx: ServerRequestContext[Any, Any], modern: bool, http_mode: str | None = None) -> InputChannel:
    """The engine channel answering this request's input: defer (2026), ask live (2025), or nobody.

    ``http_mode``: see ``LiveElicitation``.

    On 2026 the declared modes are read per request (they travel in each request's envelope).
    """
    if modern:
        modes = answerable(ctx.session.client_capabilities)
        if not modes:
            return _NO_CHANNEL
        channel = _DEFERRING.get(modes)
        if channel is None:
            channel = _DEFERRING[modes] = DeferInDeclaredModes(modes)
        return channel
    return LiveElicitation(ctx, http_mode)


def resumption(params: types.CallToolRequestParams, plaintext: str) -> tuple[dict[str, Any], InputResponse | None]:
    """The continuation and the client's answer carried by a 2026 retry (state already unsealed)."""
    try:
        state = json.loads(plaintext)
        pending = state["pending"]
        responses = params.input_responses or {}
        if pending["kind"] != "all":
            return state, _answer(pending, responses)
        answers = {part["key"]: _answer(part, responses) for part in pending["parts"]}
    except (ValueError, KeyError, TypeError):
        return {}, None  # the engine refuses it with a clear sentence
    return state, InputResponse("accept", {key: answer for key, answer in answers.items() if answer is not None})


def _answer(pending: dict[str, Any], responses: dict[str, Any]) -> InputResponse | None:
    """The client's answer to one pending request, or ``None`` when it sent none of that request's kind."""
    answer = responses.get(pending["key"])
    if not isinstance(answer, _ANSWERS.get(pending["kind"], types.ElicitResult)):
        return None  # no answer (or not one of this request's kind): the engine asks again or refuses
    if isinstance(answer, types.ElicitResult):
        return InputResponse(answer.action, dict(answer.content) if answer.content is not None else None)
    return InputResponse("accept", answer.model_dump(mode="json", by_alias=True, exclude_none=True))


_ANSWERS: dict[str, Any] = {
    "sample": (types.CreateMessageResult, types.CreateMessageResultWithTools),
    "roots": types.ListRootsResult,
}


def _asked(request: InputRequest) -> types.ElicitRequest | types.CreateMessageRequest | types.ListRootsRequest:
    """One engine request as the request a 2026 client answers in its retry."""
    if request.kind == "url":
        assert request.url is not None
        return types.ElicitRequest(params=types.ElicitRequestURLParams(message=request.message, url=request.url))
    if request.kind == "sample":
        return types.CreateMessageRequest(params=types.CreateMessageRequestParams.model_validate(request.params))
    if request.kind == "roots":
        return types.ListRootsRequest()
    params = types.ElicitRequestFormParams(message=request.message, requested_schema=form_schema(request))
    return types.ElicitRequest(params=params)


def input_required(payload: dict[str, Any]) -> types.InputRequiredResult:
    """The wire form of an engine input request plus its continuation (sealed by the boundary)."""
    request: InputRequest = payload["request"]
    return types.InputRequiredResult(
        input_requests={part.key: _asked(part) for part in request.parts or (request,)},
        request_state=json.dumps(payload["continuation"], separators=(",", ":")),
    )


class FusionRequestStateBoundary(RequestStateBoundary):
    """The SDK's ``RequestStateBoundary`` (server middleware, as its docs install it), refusing in one sentence.

    The SDK's boundary seals and checks the state exactly as it always does; it
    refuses a tampered, expired or foreign state with a bare JSON-RPC ``-32602``
    (its documented wire shape, ``data={"reason": "invalid_request_state"}``). Here
    that refusal keeps its code and data (SEP-2322: a JSON-RPC error, never a result
    or a new question) and gets one sentence naming the tool and what to do.
    Subclassing only wraps the public ``__call__``.
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Run the SDK's boundary; word its refusal of a tools/call state in one sentence.

        A request without state whose result needs no sealing (most calls) passes
        straight through; a result that does is handed to the boundary's own
        ``__call__`` to seal, so the SDK still owns every byte of the envelope.
        """
        params = ctx.params
        if params is None or params.get("requestState") is None:
            result = await call_next(ctx)
            if type(result) is dict and result.get("resultType") != "input_required":
                return result  # the runner's wire dict of an ordinary result: nothing to seal
            if not is_input_required(result):
                return result
            return await super().__call__(ctx, _returning(result))
        try:
            return await super().__call__(ctx, call_next)
        except MCPError as exc:
            if not (
                ctx.method == "tools/call"
                and exc.code == INVALID_PARAMS
                and exc.data == {"reason": "invalid_request_state"}
                and params is not None
                and params.get("requestState") is not None
            ):
                raise
            raise MCPError(INVALID_PARAMS, refused_state(str(params.get("name"))), data=exc.data) from None


def _returning(result: HandlerResult) -> CallNext:
    """A ``call_next`` that hands back a result already computed (for the boundary to seal)."""

    async def done(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return result

    return done


def state_boundary(server_name: str, *, keys: Sequence[bytes | str] | None, ttl: float) -> FusionRequestStateBoundary:
    """The request-state middleware for a server named ``server_name`` (its audience)."""
    security = RequestStateSecurity(keys=list(keys), ttl=ttl) if keys else RequestStateSecurity.ephemeral(ttl=ttl)
    return FusionRequestStateBoundary(security, default_audience=server_name)


def refused_state(name: str) -> str:
    """Why a tampered, expired or foreign ``requestState`` was refused, and what to do."""
    return (
        f'The request state sent to tool "{name}" was altered, has expired, or belongs to another call; '
        "call the tool again without a request state to start over."
    )
