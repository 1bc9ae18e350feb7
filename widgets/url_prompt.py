"""The inline prompt for a URL request: open the page, then say Done or Cancel."""

from __future__ import annotations

import ipywidgets as w

from fusion_nb.engine import InputRequest, InputResponse

from .prompt import Prompt
from .status import escape


class UrlPrompt(Prompt):
    """Message, a link that opens the URL in a new tab, Done / Cancel.

    The engine only lets https (or loopback http) URLs through; the link is still
    escaped and opened with ``noopener`` so the page cannot reach back.
    """

    def __init__(self, request: InputRequest) -> None:
        super().__init__(request)
        url = request.url or ""
        self.link = w.HTML(
            f'<a href="{escape(url)}" target="_blank" rel="noopener noreferrer">Open {escape(url)} ↗</a>'
        )
        self.done_button = self._button("Done", "primary", self.done)
        self.cancel_button = self._button("Cancel", "", self.cancel)
        self.children = [w.HTML(f"<b>{escape(request.message)}</b>"), self.link, w.HBox(self.buttons), self.outcome]

    def done(self) -> bool:
        return self._resolve(InputResponse("accept"))

    def cancel(self) -> bool:
        return self._resolve(InputResponse("cancel"))

    def __repr__(self) -> str:
        return f"<UrlPrompt {self.request.message!r} {self.request.url} {self.state_word}>"
