"""Multi-round input: a handler returns a request; the call is re-entered with the answers.

``require_input.elicit`` / ``require_input.url`` build the request a handler returns (a
person answers); ``require_input.sample`` / ``require_input.roots`` ask the client itself
(its model, its roots), answered only by an MCP client that declared them.
On re-entry ``read_input``, ``input_response`` and ``read_request_state`` read the
answers of every earlier round of the same call (held in a context variable, so
they also work in worker threads and in middleware).
"""

from __future__ import annotations

import contextvars
import hashlib
import inspect
import ipaddress
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from ._ask import AskField, fields_from_schema, form_schema, validate_form
from ._errors import (
    INVALID_INPUT,
    NoWayToAsk,
    ToolError,
    bad_action,
    invalid_answer,
    no_way_to_ask,
    refused_again,
    rounds_exceeded,
)
from ._signal import AbortSignal


class InputAction(StrEnum):
    """How a person (or client) answered an input request; ``MISSING``: never asked."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"
    MISSING = "missing"


ACCEPT, DECLINE, CANCEL, MISSING = InputAction.ACCEPT, InputAction.DECLINE, InputAction.CANCEL, InputAction.MISSING
ACTIONS = (ACCEPT, DECLINE, CANCEL)


@dataclass(frozen=True, slots=True)
class InputRequest:
    """What a handler asks for: a form (``fields``), a URL visit (``url``), a reply of the client's
    model (``sample``, its MCP ``params``) or the client's roots (``roots``).

    ``key`` names the request (a URL, sampling or roots answer is read as ``read_input(key)``).
    """

    kind: str  # "elicit", "url", "sample", "roots"; "all" (its ``parts`` in one round) or "first" (one of them)
    message: str
    fields: dict[str, AskField] | None = None
    url: str | None = None
    state: Any = None
    key: str = "input"
    params: dict[str, Any] | None = None
    parts: tuple[InputRequest, ...] = ()

    @property
    def for_person(self) -> bool:
        """Whether a person answers it (a form or a URL), not the client itself (sampling, roots)."""
        return self.kind in ("elicit", "url")

    @property
    def schema(self) -> dict[str, Any] | None:
        """The form's JSON Schema for an elicitation; ``None`` for a URL request (it has no form)."""
        return form_schema(self.fields) if self.fields is not None else None

    def keys(self) -> list[str]:
        """The answer keys this request fills: its form's field names, its single ``key``, or its parts' keys."""
        if self.parts:
            return [key for part in self.parts for key in part.keys()]  # noqa: SIM118 (a method, not a dict view)
        return list(self.fields) if self.fields is not None else [self.key]


@dataclass(frozen=True, slots=True)
class InputResponse:
    """One answer: ``action`` is accept, decline, cancel or missing; ``content`` the form values."""

    action: str
    content: dict[str, Any] | None = None
    value: Any = None

    def __post_init__(self) -> None:
        if self.action in InputAction.__members__.values() and type(self.action) is not InputAction:
            object.__setattr__(self, "action", InputAction(self.action))

    @property
    def accepted(self) -> bool:
        """Whether the person (or client) accepted, as opposed to declining, cancelling or not answering."""
        return self.action == ACCEPT


@dataclass(frozen=True, slots=True)
class InputQuestion:
    """What an input channel is asked: one request of one call, and how to know it was dropped.

    A channel sees this, never the call itself (as a transport sees a request, not its
    client). ``problems`` is non-empty when the previous answer was refused and the
    channel may ask again (``InputChannel.can_reask``); ``signal`` is aborted when the
    call is, so a channel waiting for a person can take its form down.
    """

    request: InputRequest
    tool: str
    call_id: str
    signal: AbortSignal
    problems: tuple[str, ...] = ()


class _RequireInput:
    """``require_input.elicit``, ``.url``, ``.sample``, ``.roots``, ``.all``, ``.first``: what a handler returns."""

    @staticmethod
    def elicit(message: str, fields: dict[str, AskField], *, state: Any = None, key: str | None = None) -> InputRequest:
        """Ask for a form: ``return require_input.elicit("Refund?", {"confirm": ask.boolean("Approve")})``.

        ``state`` (JSON-compatible) travels with the request and comes back to the re-run handler
        through ``read_request_state()``, so a handler resumed by a stateless client keeps nothing
        itself; the answers are read with ``read_input(field)``. ``key`` names the request on the
        2026 wire (its ``inputRequests`` key; default: the field names joined by ``+``).
        """
        if not fields or not all(isinstance(f, AskField) for f in fields.values()):
            raise ValueError("require_input.elicit needs a dict of ask.* fields")
        named = key if key is not None else "+".join(fields)
        return InputRequest("elicit", message, fields=dict(fields), state=_json_checked(state), key=named)

    @staticmethod
    def url(message: str, url: str, *, state: Any = None, key: str = "url") -> InputRequest:
        """Send the person to ``url`` (a sign-in, a payment page) and resume when they are done.

        The URL is checked at once (https, or http to a loopback host; else ``ValueError``); the
        answer is read with ``read_input(key)``; ``state`` comes back as with ``elicit``.
        """
        check_url(url)
        return InputRequest("url", message, url=url, state=_json_checked(state), key=key)

    @staticmethod
    def sample(
        messages: str | list[Any],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        state: Any = None,
        key: str = "sample",
    ) -> InputRequest:
        """Ask the client's model (MCP sampling): ``messages`` a prompt, or ``{"role", "content"}`` dicts.

        ``read_input(key)`` is then the client's ``CreateMessageResult`` as a dict (``role``,
        ``content``, ``model``...). Only a client that declared sampling can answer.
        """
        listed = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
        wire = []
        for message in listed:
            role, content = (message.get("role"), message.get("content")) if isinstance(message, dict) else (None, None)
            if role not in ("user", "assistant") or content is None:
                raise ValueError(
                    "require_input.sample needs a prompt or {'role': 'user' or 'assistant', 'content': ...}"
                )
            wire.append(
                {"role": role, "content": {"type": "text", "text": content} if isinstance(content, str) else content}
            )
        if type(max_tokens) is not int or max_tokens < 1:
            raise ValueError(f"require_input.sample needs max_tokens, a whole number of at least 1, not {max_tokens!r}")
        params: dict[str, Any] = {"messages": wire, "maxTokens": max_tokens}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        content = wire[0]["content"] if wire else {}
        first = content.get("text", "") if isinstance(content, dict) else ""
        return InputRequest("sample", first, state=_json_checked(state), key=key, params=_json_checked(params))

    @staticmethod
    def all(*requests: InputRequest, state: Any = None) -> InputRequest:
        """Several requests in one round (a form, the client's model, its roots...), each read by its keys.

        A 2026 client gets them in one ``InputRequiredResult`` and answers them together; a
        2025 client and a person are asked one after the other. Their keys must not overlap.
        """
        if not requests or not all(isinstance(r, InputRequest) and not r.parts for r in requests):
            raise ValueError("require_input.all needs one or more require_input.* requests (not nested)")
        answered = [key for r in requests for key in r.keys()]  # noqa: SIM118 (a method, not a dict view)
        if len(set(answered)) != len(answered) or len({r.key for r in requests}) != len(requests):
            raise ValueError(f"require_input.all needs requests whose keys differ, got {answered}")
        message = "; ".join(r.message for r in requests)
        key = "+".join(r.key for r in requests)
        return InputRequest("all", message, state=_json_checked(state), key=key, parts=tuple(requests))

    @staticmethod
    def first(*requests: InputRequest) -> InputRequest:
        """The first of ``requests`` this caller can answer (a form for a person, else the client's
        model...), asked alone; a caller that can answer none is refused as for one request."""
        if not requests or not all(isinstance(r, InputRequest) and not r.parts for r in requests):
            raise ValueError("require_input.first needs one or more require_input.* requests (not nested)")
        return InputRequest("first", requests[0].message, key=requests[0].key, parts=tuple(requests))

    @staticmethod
    def roots(*, state: Any = None, key: str = "roots") -> InputRequest:
        """Ask the client for its roots (the folders it works in); ``read_input(key)`` is ``{"roots": [...]}``."""
        return InputRequest("roots", "the client's roots", state=_json_checked(state), key=key)


require_input = _RequireInput()


def check_url(url: str) -> None:
    """Only https, or http to a loopback host, may be sent to a person to open."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return
    if parts.scheme == "http" and _is_loopback(host):
        return
    raise ValueError(
        f"require_input.url refuses {url!r}: only https:// URLs (or http:// to localhost) may be shown to a person"
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _json_checked(state: Any) -> Any:
    try:
        json.dumps(state)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"request state must be JSON-compatible (it travels through the client): {exc}") from None
    return state


# -- what the handler reads on re-entry ---------------------------------------------------


@dataclass(slots=True)
class Rounds:
    """The answers and state of one call so far; what a stateless client carries for us."""

    round: int = 0
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    state: Any = None

    def record(self, request: InputRequest, response: InputResponse) -> None:
        if request.parts:  # (its answer holds one answer per part, by the part's key)
            answers = response.content or {}
            for part in request.parts:
                self.record(part, answers.get(part.key) or InputResponse(CANCEL))
            self.state = request.state
            return
        for key in request.keys():  # noqa: SIM118 (InputRequest.keys() is a method, not a dict view)
            if request.kind == "elicit":
                value = response.content.get(key) if response.content is not None else None
            elif request.kind == "url":
                value = True if response.accepted else None
            else:  # the client's own answer (a sampling result, its roots), whole
                value = response.content if response.accepted else None
            self.answers[key] = {"action": response.action, "content": response.content, "value": value}
        self.state = request.state

    def refusal(self, request: InputRequest) -> str | None:
        """``decline`` or ``cancel`` when an earlier round of this call refused one of ``request``'s keys."""
        for key in request.keys():  # noqa: SIM118 (InputRequest.keys() is a method, not a dict view)
            answer = self.answers.get(key)
            if answer is not None and answer["action"] in (DECLINE, CANCEL):
                return str(answer["action"])
        return None


current_rounds: contextvars.ContextVar[Rounds | None] = contextvars.ContextVar("fusion_nb_rounds", default=None)


def read_input(key: str) -> Any:
    """The accepted answer for ``key`` from an earlier round of this call, else ``None``."""
    rounds = current_rounds.get()
    answer = rounds.answers.get(key) if rounds is not None else None
    return answer["value"] if answer is not None and answer["action"] == ACCEPT else None


def input_response(key: str) -> InputResponse:
    """The full answer for ``key``: its action (``missing`` if never asked) and content."""
    rounds = current_rounds.get()
    answer = rounds.answers.get(key) if rounds is not None else None
    if answer is None:
        return InputResponse(MISSING)
    return InputResponse(answer["action"], answer["content"], answer["value"])


def read_request_state() -> Any:
    """The ``state`` the previous round's request carried, as the same JSON value."""
    rounds = current_rounds.get()
    return rounds.state if rounds is not None else None


# -- continuation for stateless transports ------------------------------------------------


def arguments_digest(args: Any) -> str:
    canonical = json.dumps(args or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def continuation(tool: str, args: Any, rounds: Rounds, pending: InputRequest) -> dict[str, Any]:
    """One JSON value carrying a call between rounds; the MCP layer seals it."""
    return {
        "v": 1,
        "tool": tool,
        "args": arguments_digest(args),
        "round": rounds.round,
        "answers": rounds.answers,
        "state": rounds.state,
        "pending": _pending(pending),
    }


def _pending(request: InputRequest) -> dict[str, Any]:
    return {
        "kind": request.kind,
        "key": request.key,
        "message": request.message,
        "schema": request.schema,
        "url": request.url,
        "state": request.state,
        "params": request.params,
        "parts": [_pending(part) for part in request.parts],
    }


def _request(pending: Mapping[str, Any]) -> InputRequest:
    schema = pending.get("schema")
    return InputRequest(
        pending["kind"],
        pending["message"],
        fields=fields_from_schema(schema) if schema else None,
        url=pending.get("url"),
        state=pending.get("state"),
        key=pending["key"],
        params=pending.get("params"),
        parts=tuple(_request(part) for part in pending.get("parts") or ()),
    )


def restore(tool_name: str, args: Any, resume: Mapping[str, Any]) -> tuple[Rounds, InputRequest]:
    """Rebuild a call's rounds and pending request from its continuation, or refuse it."""
    try:
        foreign = resume.get("tool") != tool_name or resume.get("args") != arguments_digest(args)
        rounds = Rounds(int(resume["round"]), dict(resume["answers"]), resume.get("state"))
        request = _request(resume["pending"])
    except (KeyError, TypeError, ValueError, AttributeError):
        foreign = True
    if foreign:
        raise ToolError(
            INVALID_INPUT,
            f'The request state sent to tool "{tool_name}" does not belong to this call '
            "(another tool or other arguments).",
            recovery="Start the call again without a request state.",
        )
    return rounds, request


class Reask(Exception):
    """An answer was refused and the channel can ask again, showing ``problems``."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def checked_answer(tool_name: str, request: InputRequest, response: InputResponse, can_reask: bool) -> InputResponse:
    """The answer validated against its form: ``Reask`` or ``INVALID_ANSWER`` when it does not fit."""
    if response.action not in ACTIONS:
        raise bad_action(tool_name, response.action)
    if request.parts and response.action == ACCEPT:
        answers = response.content or {}
        checked = {}
        for part in request.parts:
            answer = answers.get(part.key)
            checked[part.key] = (
                CANCEL_RESPONSE if answer is None else checked_answer(tool_name, part, answer, can_reask)
            )
        return InputResponse(ACCEPT, checked)
    if response.action != ACCEPT or request.fields is None:
        return response
    content, problems = validate_form(request.fields, response.content)
    if not problems:
        return InputResponse(ACCEPT, content)
    if can_reask:
        raise Reask(problems)
    raise invalid_answer(tool_name, problems)


#: the answer of a part nobody answered
CANCEL_RESPONSE = InputResponse(CANCEL)


async def with_input(
    name: str,
    args: Any,
    produce: Callable[[], Any],
    channel: Any,
    *,
    resume: Mapping[str, Any] | None = None,
    response: InputResponse | None = None,
    max_rounds: int = 8,
    noun: str = "Tool",
) -> tuple[Any, dict[str, Any] | None]:
    """Run ``produce()`` (sync or async) as a tool's handler runs: re-entered with the answers of the
    input requests it returns, asked of ``channel``. Its last value and ``None``, or ``None`` and the
    payload of the question deferred to the client (``{"request", "continuation"}``).

    For what is not a tool call but may ask (a prompt, a resource read): a ``ToolError`` says why
    not, naming it as ``noun`` ("Prompt", "Resource").
    """
    try:
        return await _with_input(name, args, produce, channel, resume, response, max_rounds)
    except ToolError as error:
        said = f'Tool "{name}"'
        if noun == "Tool" or not error.message.startswith(said):
            raise
        message = f'{noun} "{name}"' + error.message[len(said) :]
        if isinstance(error, NoWayToAsk):
            raise NoWayToAsk(error.kind, message, error.recovery or "") from None
        raise ToolError(error.code, message, recovery=error.recovery, details=error.details) from None


async def _with_input(
    name: str,
    args: Any,
    produce: Callable[[], Any],
    channel: Any,
    resume: Mapping[str, Any] | None,
    response: InputResponse | None,
    max_rounds: int,
) -> tuple[Any, dict[str, Any] | None]:
    from ._channel import DEFER  # (the channels import this module)

    rounds: Rounds | None = None
    if resume is not None:
        rounds, pending = restore(name, args, resume)
        rounds.record(pending, checked_answer(name, pending, response or CANCEL_RESPONSE, False))
    signal = AbortSignal()
    while True:
        token = current_rounds.set(rounds)
        try:
            value = produce()
            if inspect.isawaitable(value):
                value = await value
        finally:
            current_rounds.reset(token)
        if type(value) is not InputRequest:
            return value, None
        if rounds is None:
            rounds = Rounds()
        refused = rounds.refusal(value)
        if refused is not None:
            raise refused_again(name, value.message, refused)
        rounds.round += 1
        if rounds.round > max_rounds:
            raise rounds_exceeded(name, max_rounds)
        answers: dict[str, InputResponse] = {}
        part_id = f"{name}#{id(rounds):x}"  # (what a person's view of the question is keyed by)
        chosen: Any = None
        if value.kind == "first":  # the first this caller can answer stands for the round
            for choice in value.parts:
                chosen = await channel.ask(InputQuestion(choice, name, part_id, signal))
                if chosen is not None:
                    value = choice
                    break
            else:
                raise no_way_to_ask(name, value.parts[0].message, value.parts[0].kind)
        for part in value.parts or (value,):
            reply = chosen if chosen is not None else await channel.ask(InputQuestion(part, name, part_id, signal))
            if reply is None:
                raise no_way_to_ask(name, part.message, part.kind)
            if reply is DEFER:  # every part goes to the client at once: each must be one it answers
                for other in value.parts:
                    if await channel.ask(InputQuestion(other, name, part_id, signal)) is None:
                        raise no_way_to_ask(name, other.message, other.kind)
                return None, {"request": value, "continuation": continuation(name, args, rounds, value)}
            answers[part.key] = checked_answer(name, part, reply, False)
        rounds.record(value, InputResponse(ACCEPT, answers) if value.parts else answers[value.key])
