"""Input channels: whoever drives a call collects the answers to its input requests.

A transport or the notebook implements ``InputChannel.ask``. It gets an
``InputQuestion`` (the request, the tool, the call id, the call's abort signal) and
never the call itself, so a channel cannot depend on how calls run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ._interactive import ACCEPT, ACTIONS, DECLINE, InputQuestion, InputRequest, InputResponse

#: What a deferring channel returns: the call ends input-required with a continuation.
DEFER: Final[Any] = object()


class InputChannel:
    """Collects answers to a handler's input requests. Subclass it and override ``ask``.

    ``ask(question)`` returns:

    - an ``InputResponse`` (accept with form content, decline or cancel);
    - ``None`` when this caller has no way to ask anybody: the call fails at once with
      ``ELICITATION_UNSUPPORTED`` (it never hangs waiting for an answer that cannot come);
    - ``DEFER`` when the client answers by calling again (stateless MCP): the call ends
      as input-required, carrying a continuation.

    ``ask`` may wait as long as it likes; when the call is aborted the waiting task is
    cancelled (``question.signal`` is aborted first), so clean up in ``finally``.
    Set ``can_reask = True`` if the channel can show ``question.problems`` and ask
    again after an invalid answer; otherwise an invalid answer fails the call with
    ``INVALID_ANSWER``. Set ``asks_together = True`` if the channel puts every part of a
    ``require_input.all`` request to its client at once (an MCP task's ``inputRequests``):
    it then gets the whole request in one question and answers ``InputResponse("accept",
    {part.key: InputResponse})``; otherwise it is asked part by part. Example, a channel
    that approves everything::

        class AlwaysYes(InputChannel):
            async def ask(self, question):
                fields = question.request.fields or {}
                return InputResponse("accept", {key: True for key in fields})
    """

    can_reask = False
    asks_together = False

    async def ask(self, question: InputQuestion) -> InputResponse | None:
        """Answer ``question.request`` (see the class for the contract); the base class has nobody to ask.

        Return an ``InputResponse``, ``None`` (nobody to ask: the call fails with
        ``ELICITATION_UNSUPPORTED``) or ``DEFER``; expect to be cancelled when the call is aborted.
        """
        return None


class NoChannel(InputChannel):
    """Nobody to ask: every request fails at once with ``ELICITATION_UNSUPPORTED``."""


class DeferToClient(InputChannel):
    """The client answers by calling again (MCP 2026 ``InputRequiredResult``)."""

    async def ask(self, question: InputQuestion) -> Any:
        """Always ``DEFER``: the round ends and the client carries the call onward."""
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

    async def ask(self, question: InputQuestion) -> InputResponse | None:
        """The scripted answer to ``question.request``, or ``None`` when the script has none."""
        request, answers = question.request, self.answers
        if callable(answers):
            reply = answers(request)
            if hasattr(reply, "__await__"):
                reply = await reply
            return as_response(request, reply)
        for key in [request.key, *request.keys()]:
            field = request.fields.get(key) if request.fields else None
            if answers.get(key) in ACTIONS[1:] and not (field is not None and field.values):
                return InputResponse(answers[key])
        if request.kind != "elicit":
            return as_response(request, answers.get(request.key))
        content = {key: answers[key] for key in request.keys() if key in answers}  # noqa: SIM118 (InputRequest, not a dict)
        return InputResponse(ACCEPT, content) if content else None


def as_response(request: InputRequest, reply: Any) -> InputResponse | None:
    """Normalise what a script or a person gave into an ``InputResponse``."""
    if reply is None or isinstance(reply, InputResponse):
        return reply
    if isinstance(reply, str) and reply in ACTIONS:
        return InputResponse(reply)
    if request.kind == "url":
        return InputResponse(ACCEPT if reply else DECLINE)
    if not request.for_person and isinstance(reply, Mapping):  # the client's own answer (sampling, roots), whole
        return InputResponse(ACCEPT, dict(reply))
    if isinstance(reply, Mapping):
        return InputResponse(ACCEPT, dict(reply))
    raise TypeError(
        f"an input answer must be an InputResponse, a dict of field values or one of {ACTIONS}, got {reply!r}"
    )
