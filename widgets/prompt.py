"""What every input prompt shares: one answer, awaited once, never given twice.

The answer may come (a click) before anyone awaits it, and the prompt must work on
whichever loop runs, so it keeps the response and a lazily made ``anyio.Event``.
Once answered a prompt freezes: the question stays on top and the answer shows under
it; ``compact()`` (a later round of the same call arrived) folds it to that one pair.
Button labels never collide with the call view's Stop: Submit / Decline / Dismiss,
Open / Done / Dismiss.
"""

from __future__ import annotations

from typing import Any

import anyio
import ipywidgets as w

from fusion_nb.engine import InputRequest, InputResponse

from .status import ANSWERED, BORDER, CANCEL, MUTED, colored, escape


class Prompt(w.VBox):
    """Base of ``ElicitationForm`` and ``UrlPrompt``: ``await prompt.answer()``."""

    def __init__(self, request: InputRequest, **kwargs: Any) -> None:
        super().__init__(
            layout=w.Layout(border_left=f"3px solid {BORDER}", padding="2px 0 2px 8px", margin="4px 0"), **kwargs
        )
        self.request = request
        self.response: InputResponse | None = None
        self.abandoned: str | None = None
        self._event: anyio.Event | None = None
        self.question = w.HTML(f"<b>{escape(request.message)}</b>")
        self.outcome = w.HTML("")
        self.hint = w.HTML("")  # a word about the buttons, next to them, gone once answered
        self.buttons: list[w.Button] = []
        self.summary = ""  # the answer in words, for the compact form

    @property
    def answered(self) -> bool:
        """True once a person answered."""
        return self.response is not None

    @property
    def finished(self) -> bool:
        """True once answered or abandoned: no more answers are taken."""
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
        icon, word, color = ANSWERED.get(response.action, ("•", response.action, CANCEL))
        self.summary = f"{word}{shown}"
        self._freeze(colored(f"{icon} {escape(word)}", color, bold=True) + escape(shown))
        if self._event is not None:
            self._event.set()
        return True

    def answer_by_script(self, response: InputResponse) -> None:
        """Show ``response`` as this prompt's answer, marked as scripted (nobody clicked)."""
        self._fill(response)
        self._resolve(response, self._shown(response) + " (answered by script)")

    def _fill(self, response: InputResponse) -> None:
        pass

    def snapshot_html(self) -> str:
        """The prompt as self-contained HTML: question, what was asked, and the answer (stored outputs)."""
        body = self._snapshot_body()
        return (
            f'<div style="border-left:3px solid {BORDER};padding:2px 0 2px 8px;margin:4px 0">'
            f"<b>{escape(self.request.message)}</b>{body}<div>{self.outcome.value}</div></div>"
        )

    def _snapshot_body(self) -> str:
        return ""

    def _shown(self, response: InputResponse) -> str:
        return ""

    def abandon(self, why: str = "cancelled") -> None:
        """The call stopped waiting (aborted): no answer will be taken any more."""
        if self.finished:
            return
        self.abandoned = why
        self.summary = f"not answered (the call was {why})"
        self._freeze(colored(f"■ Not answered: the call was {escape(why)}.", CANCEL))

    def compact(self) -> None:
        """Fold a finished prompt to its question and answer on one line (a later round is shown)."""
        if not self.finished:
            return
        self.children = [
            w.HTML(
                f'<div style="white-space:nowrap;overflow:hidden;text-overflow:ellipsis" '
                f'title="{escape(self.request.message)} {escape(self.summary)}">'
                f"{escape(self.request.message)} "
                f"{colored('→ ' + escape(self.summary), MUTED)}</div>"
            )
        ]

    def _freeze(self, html: str) -> None:
        for button in self.buttons:
            button.disabled = True
            button.layout.display = "none"  # answered: the buttons have nothing left to say
        self.hint.value = ""
        self._disable_inputs()
        self.outcome.value = html

    def _disable_inputs(self) -> None:
        pass

    def _button(self, description: str, style: str, on_click: Any, tooltip: str = "") -> w.Button:
        button = w.Button(description=description, button_style=style, tooltip=tooltip)
        button.on_click(lambda _: on_click())
        self.buttons.append(button)
        return button

    @property
    def state_word(self) -> str:
        """``open``, the answer's action, or why it was abandoned."""
        if self.response is not None:
            return self.response.action
        return self.abandoned or "open"
