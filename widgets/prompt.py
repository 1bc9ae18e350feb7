"""What every input prompt shares: one answer, awaited once, never given twice.

The answer may come (a click) before anyone awaits it, and the prompt must work on
whichever loop runs, so it keeps the response and a lazily made ``anyio.Event``.
"""

from __future__ import annotations

from typing import Any

import anyio
import ipywidgets as w

from fusion_nb.engine import InputRequest, InputResponse

from .status import escape

_SAID = {
    "accept": ("✔", "Submitted", "#2e7d32"),
    "decline": ("✖", "Declined", "#c62828"),
    "cancel": ("⊘", "Cancelled", "#424242"),
}


class Prompt(w.VBox):
    """Base of ``ElicitationForm`` and ``UrlPrompt``: ``await prompt.answer()``."""

    def __init__(self, request: InputRequest, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.request = request
        self.response: InputResponse | None = None
        self.abandoned: str | None = None
        self._event: anyio.Event | None = None
        self.outcome = w.HTML("")
        self.buttons: list[w.Button] = []

    @property
    def answered(self) -> bool:
        return self.response is not None

    @property
    def finished(self) -> bool:
        return self.response is not None or self.abandoned is not None

    async def answer(self) -> InputResponse:
        """Wait for the person's answer (returns at once if it was already given)."""
        if self.response is None:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        assert self.response is not None
        return self.response

    def _resolve(self, response: InputResponse, shown: str = "") -> bool:
        """Record the one answer; later clicks do nothing."""
        if self.finished:
            return False
        self.response = response
        icon, word, color = _SAID.get(response.action, ("•", response.action, "#424242"))
        self._freeze(f'<span style="color:{color}">{icon} {word}</span>{escape(shown)}')
        if self._event is not None:
            self._event.set()
        return True

    def abandon(self, why: str = "cancelled") -> None:
        """The call stopped waiting (aborted): no answer will be taken any more."""
        if self.finished:
            return
        self.abandoned = why
        self._freeze(
            f'<span style="color:#424242">⊘ The call was {escape(why)}; this request no longer applies.</span>'
        )

    def _freeze(self, html: str) -> None:
        for button in self.buttons:
            button.disabled = True
        self._disable_inputs()
        self.outcome.value = html

    def _disable_inputs(self) -> None:
        pass

    def _button(self, description: str, style: str, on_click: Any) -> w.Button:
        button = w.Button(description=description, button_style=style)
        button.on_click(lambda _: on_click())
        self.buttons.append(button)
        return button

    @property
    def state_word(self) -> str:
        if self.response is not None:
            return self.response.action
        return self.abandoned or "open"
