"""Multi-round input: a handler returns a request; the call is re-entered with the answers.

``require_input.elicit`` / ``require_input.url`` build the request a handler returns.
On re-entry ``read_input``, ``input_response`` and ``read_request_state`` read the
answers of every earlier round of the same call (held in a context variable, so
they also work in worker threads and in middleware).
"""

from __future__ import annotations

import contextvars
import hashlib
import ipaddress
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .ask import AskField, form_schema

ACCEPT, DECLINE, CANCEL, MISSING = "accept", "decline", "cancel", "missing"
ACTIONS = (ACCEPT, DECLINE, CANCEL)


@dataclass(frozen=True, slots=True)
class InputRequest:
    """What a handler asks for: a form (``fields``) or a URL visit (``url``).

    ``key`` names the request (a URL request's answer is read as ``read_input(key)``).
    """

    kind: str  # "elicit" or "url"
    message: str
    fields: dict[str, AskField] | None = None
    url: str | None = None
    state: Any = None
    key: str = "input"

    @property
    def schema(self) -> dict[str, Any] | None:
        return form_schema(self.fields) if self.fields is not None else None

    def keys(self) -> list[str]:
        return list(self.fields) if self.fields is not None else [self.key]


@dataclass(frozen=True, slots=True)
class InputResponse:
    """One answer: ``action`` is accept, decline, cancel or missing; ``content`` the form values."""

    action: str
    content: dict[str, Any] | None = None
    value: Any = None

    @property
    def accepted(self) -> bool:
        return self.action == ACCEPT


class _RequireInput:
    """``require_input.elicit(message, fields)`` and ``require_input.url(message, url)``."""

    @staticmethod
    def elicit(message: str, fields: dict[str, AskField], *, state: Any = None) -> InputRequest:
        if not fields or not all(isinstance(f, AskField) for f in fields.values()):
            raise ValueError("require_input.elicit needs a dict of ask.* fields")
        return InputRequest("elicit", message, fields=dict(fields), state=_json_checked(state), key="+".join(fields))

    @staticmethod
    def url(message: str, url: str, *, state: Any = None, key: str = "url") -> InputRequest:
        check_url(url)
        return InputRequest("url", message, url=url, state=_json_checked(state), key=key)


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
        for key in request.keys():
            value = (
                response.content.get(key)
                if response.content is not None and request.kind == "elicit"
                else (True if response.accepted else None)
            )
            self.answers[key] = {"action": response.action, "content": response.content, "value": value}
        self.state = request.state


_rounds: contextvars.ContextVar[Rounds | None] = contextvars.ContextVar("fusion_nb_rounds", default=None)


def read_input(key: str) -> Any:
    """The accepted answer for ``key`` from an earlier round of this call, else ``None``."""
    rounds = _rounds.get()
    answer = rounds.answers.get(key) if rounds is not None else None
    return answer["value"] if answer is not None and answer["action"] == ACCEPT else None


def input_response(key: str) -> InputResponse:
    """The full answer for ``key``: its action (``missing`` if never asked) and content."""
    rounds = _rounds.get()
    answer = rounds.answers.get(key) if rounds is not None else None
    if answer is None:
        return InputResponse(MISSING)
    return InputResponse(answer["action"], answer["content"], answer["value"])


def read_request_state() -> Any:
    """The ``state`` the previous round's request carried, as the same JSON value."""
    rounds = _rounds.get()
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
        "pending": {
            "kind": pending.kind,
            "key": pending.key,
            "message": pending.message,
            "schema": pending.schema,
            "url": pending.url,
            "state": pending.state,
        },
    }
