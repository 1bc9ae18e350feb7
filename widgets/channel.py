"""The notebook's input channel: a person answers through an inline form.

The channel is asked an ``InputQuestion`` (request, tool, call id, abort signal,
problems of a refused answer) and never sees the call. The form appears inside the
views of that call id when there are any (earlier rounds stay above it, compact),
else it is displayed on its own (in the output of the cell that started the call:
the engine's worker runs in that cell's context). Where no widget frontend exists the
channel answers ``None`` and the call fails at once with ``ELICITATION_UNSUPPORTED``
rather than waiting for a click that can never come.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fusion_nb.engine import AbortSignal, InputChannel, InputQuestion, InputRequest, InputResponse, ScriptedAnswers

from .frontend import has_widget_frontend
from .live_views import ask_in, views_for

if TYPE_CHECKING:
    from .prompt import Prompt

# The channel is made wherever the extension loads, a headless run included; the widget
# modules (ipywidgets) are imported by the first prompt shown, which only a frontend sees.


def make_prompt(request: InputRequest, problems: list[str] | tuple[str, ...] = ()) -> Prompt:
    """The prompt widget for ``request``: a URL prompt or a form."""
    from .form import ElicitationForm
    from .url_prompt import UrlPrompt

    return UrlPrompt(request) if request.kind == "url" else ElicitationForm(request, problems)


def _display(prompt: Prompt) -> None:
    from IPython.display import display

    display(prompt)  # type: ignore[no-untyped-call]


class WidgetInputChannel(InputChannel):
    """Ask with widgets; re-ask (with the problems shown) when an answer is refused.

    ``frontend``: ``None`` detects a kernel (see ``frontend.has_widget_frontend``),
    ``True``/``False`` force it. ``show(prompt)`` displays a prompt that has no
    call view to live in (default: IPython ``display``).
    """

    can_reask = True

    def __init__(self, *, frontend: bool | None = None, show: Callable[[Prompt], Any] | None = None) -> None:
        self.frontend = frontend
        self.show = show or _display
        self.prompts: list[Prompt] = []  # every prompt shown, newest last (tests, tooling)

    @property
    def available(self) -> bool:
        """Whether a person can see a form here."""
        return has_widget_frontend() if self.frontend is None else self.frontend

    async def ask(self, question: InputQuestion) -> InputResponse | None:
        """Show the question's prompt in its call's views (or on its own) and wait for the answer."""
        if not self.available or not question.request.for_person:
            return None  # (sampling and roots: only an MCP client answers those)
        prompt = make_prompt(question.request, question.problems)
        self.prompts.append(prompt)
        place(prompt, question.call_id, self.show)
        ask_in(question.call_id, prompt)  # views made later show it too
        try:
            return await prompt.answer()
        except BaseException:  # the call was aborted while the person looked at the form
            prompt.abandon(_status_of(question.signal))
            raise
        finally:
            ask_in(question.call_id, None)


def place(prompt: Prompt, call_id: str, show: Callable[[Prompt], Any]) -> None:
    """Put ``prompt`` in every live view of its call, or ``show`` it on its own when there is none."""
    views = views_for(call_id)
    for view in views:
        view.host(prompt)
    if not views:
        show(prompt)


def _status_of(signal: AbortSignal) -> str:
    """How an aborted call reads: ``timed out`` or ``cancelled``."""
    return "timed out" if getattr(signal, "reason", None) == "TIMEOUT" else "cancelled"


class ShownScriptedAnswers(InputChannel):
    """Scripted answers that still show their form, filled in and submitted "by script".

    An unattended run (nbval, ``make notebooks``, a CI job) answers from a script, and a
    notebook stored from it would otherwise show no form at all: the headline feature
    would be invisible in every committed notebook. Here each answered question leaves
    the form a person would have seen, frozen with the scripted answer. Without a widget
    frontend the answers are given as by plain ``ScriptedAnswers``.
    """

    def __init__(self, script: ScriptedAnswers, *, frontend: bool | None = None) -> None:
        self.script = script
        self.frontend = frontend

    async def ask(self, question: InputQuestion) -> InputResponse | None:
        """The script's answer, shown in the call's views as an answered prompt."""
        response = await self.script.ask(question)
        visible = has_widget_frontend() if self.frontend is None else self.frontend
        if response is None or not visible or not question.request.for_person:
            return response
        prompt = make_prompt(question.request)
        prompt.answer_by_script(response)
        place(prompt, question.call_id, _display)
        return response
