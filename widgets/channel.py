"""The notebook's input channel: a person answers through an inline form.

The form appears inside the call's ``CallView``s when there are any, else it is
displayed on its own (in the output of the cell that started the call: the
engine's worker runs in that cell's context). Where no widget frontend exists the
channel answers ``None`` and the call fails at once with ``ELICITATION_UNSUPPORTED``
rather than waiting for a click that can never come.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fusion_nb.engine import Call, InputChannel, InputRequest, InputResponse

from .call_view import views_for
from .form import ElicitationForm
from .frontend import has_widget_frontend
from .prompt import Prompt
from .url_prompt import UrlPrompt


def make_prompt(request: InputRequest, problems: list[str] | None = None) -> Prompt:
    """The prompt widget for ``request``: a URL prompt or a form."""
    return UrlPrompt(request) if request.kind == "url" else ElicitationForm(request, problems)


def _display(prompt: Prompt) -> None:
    from IPython.display import display

    display(prompt)


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
        return has_widget_frontend() if self.frontend is None else self.frontend

    async def ask(self, request: InputRequest, call: Call, problems: list[str] | None = None) -> InputResponse | None:
        if not self.available:
            return None
        prompt = make_prompt(request, problems)
        self.prompts.append(prompt)
        views = views_for(call)
        for view in views:
            view.host(prompt)
        if not views:
            self.show(prompt)
        try:
            return await prompt.answer()
        except BaseException:  # the call was aborted while the person looked at the form
            prompt.abandon(call.status if call.settled else "cancelled")
            raise
