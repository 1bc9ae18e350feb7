"""The inline prompt for a URL request: a real link (styled as a button), then Done or Dismiss."""

from __future__ import annotations

import ipywidgets as w

from fusion_nb.engine import InputRequest, InputResponse

from .prompt import Prompt
from .status import MUTED, colored, escape


class UrlPrompt(Prompt):
    """Question, an Open link that opens the URL in a new tab, Done / Dismiss.

    The engine only lets https (or loopback http) URLs through; the link is still
    escaped and opened with ``noopener`` so the page cannot reach back.
    """

    def __init__(self, request: InputRequest) -> None:
        super().__init__(request)
        url = escape(request.url or "")
        self.link = w.HTML(
            f'<a href="{url}" target="_blank" rel="noopener noreferrer" title="{url}" '
            f'class="jupyter-button widget-button mod-info" '
            f'style="display:inline-flex;align-items:center;text-decoration:none;padding:0 12px">Open page ↗</a> '
            + colored(f"<small>{url}</small>", MUTED)
        )
        self.done_button = self._button("Done", "primary", self.done, "I have finished on that page")
        self.dismiss_button = self._button("Dismiss", "", self.dismiss, "Close without visiting the page")
        self.children = [self.question, self.link, w.HBox(self.buttons), self.outcome]

    def done(self) -> bool:
        """Answer ``accept``: the person finished on the page."""
        return self._resolve(InputResponse("accept"))

    def dismiss(self) -> bool:
        """Answer ``cancel``: the person closed the prompt."""
        return self._resolve(InputResponse("cancel"))

    def _snapshot_body(self) -> str:
        url = escape(self.request.url or "")
        return f"<div>{colored(f'<small>{url}</small>', MUTED)}</div>"

    def _freeze(self, html: str) -> None:
        super()._freeze(html)
        self.link.layout.display = "none"  # answered: the link no longer applies

    def __repr__(self) -> str:
        return f"<UrlPrompt {self.request.message!r} {self.request.url} {self.state_word}>"
