"""Input channels: whoever drives a call collects the answers to its input requests.

A transport or the notebook implements ``InputChannel.ask``. It returns the answer,
``None`` when this caller has no way to ask anybody (the call fails at once with
``ELICITATION_UNSUPPORTED``, it never hangs), or ``DEFER`` when the client itself
will retry with the answers (stateless MCP): the call then ends as input-required,
carrying a continuation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .interactive import ACCEPT, ACTIONS, InputRequest, InputResponse

if TYPE_CHECKING:
    from .call import Call

DEFER: Any = object()


class InputChannel:
    """Base channel. ``can_reask`` says whether an invalid answer may be asked again."""

    can_reask = False

    async def ask(self, request: InputRequest, call: Call, problems: list[str] | None = None) -> InputResponse | None:
        return None


class NoChannel(InputChannel):
    """Nobody to ask: every request fails at once with ``ELICITATION_UNSUPPORTED``."""


class DeferToClient(InputChannel):
    """The client answers by calling again (MCP 2026 ``InputRequiredResult``)."""

    async def ask(self, request: InputRequest, call: Call, problems: list[str] | None = None) -> Any:
        return DEFER


class ScriptedAnswers(InputChannel):
    """Answers from a mapping of field key to value, or from a callable.

    A mapping accepts a form with the values it has for the form's fields; a value
    ``"decline"`` or ``"cancel"`` under the request's key (or any of its fields)
    answers with that action. A callable receives the ``InputRequest`` and returns an
    ``InputResponse``, a dict of field values (accepted) or an action name.
    A request the mapping has nothing for gets ``None``: no channel, no hang.
    """

    def __init__(self, answers: Mapping[str, Any] | Callable[[InputRequest], Any]) -> None:
        self.answers = answers

    async def ask(self, request: InputRequest, call: Call, problems: list[str] | None = None) -> InputResponse | None:
        if callable(self.answers):
            reply = self.answers(request)
            if hasattr(reply, "__await__"):
                reply = await reply
            return as_response(request, reply)
        keys = [request.key, *request.keys()]
        for key in keys:
            if self.answers.get(key) in ("decline", "cancel") and not (
                request.fields and request.fields.get(key) and request.fields[key].values
            ):
                return InputResponse(self.answers[key])
        if request.kind == "url":
            return as_response(request, self.answers.get(request.key))
        content = {key: self.answers[key] for key in request.keys() if key in self.answers}
        return InputResponse(ACCEPT, content) if content else None


def as_response(request: InputRequest, reply: Any) -> InputResponse | None:
    """Normalise what a script or a person gave into an ``InputResponse``."""
    if reply is None or isinstance(reply, InputResponse):
        return reply
    if isinstance(reply, str) and reply in ACTIONS:
        return InputResponse(reply)
    if request.kind == "url":
        return InputResponse(ACCEPT if reply else "decline")
    if isinstance(reply, Mapping):
        return InputResponse(ACCEPT, dict(reply))
    raise TypeError(
        f"an input answer must be an InputResponse, a dict of field values or one of {ACTIONS}, got {reply!r}"
    )
