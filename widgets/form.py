"""The inline form for an elicitation request: fields, inline checks, three answers."""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from fusion_nb.engine import InputRequest, InputResponse
from fusion_nb.engine import validate_form

from .fields import FieldInput, problems_for
from .prompt import Prompt
from .status import escape


class ElicitationForm(Prompt):
    """Message, one input per field (defaults filled), Submit / Decline / Cancel.

    Submit checks every field with the engine's own rules first and shows what is
    wrong next to each field instead of answering. ``problems`` are the messages of
    a re-ask (the previous answer was refused) and show until the next Submit.
    """

    def __init__(self, request: InputRequest, problems: list[str] | None = None) -> None:
        super().__init__(request)
        self.inputs = {key: FieldInput(key, field) for key, field in (request.fields or {}).items()}
        self.problems = w.HTML("")
        self.submit_button = self._button("Submit", "primary", self.submit)
        self.decline_button = self._button("Decline", "", self.decline)
        self.cancel_button = self._button("Cancel", "", self.cancel)
        self.children = [
            w.HTML(f"<b>{escape(request.message)}</b>"),
            *(field.box for field in self.inputs.values()),
            self.problems,
            w.HBox(self.buttons),
            self.outcome,
        ]
        if problems:
            self.show_problems(problems)

    def values(self) -> tuple[dict[str, Any], list[str]]:
        """The answered (non-blank) values and the problems found reading them."""
        content: dict[str, Any] = {}
        problems: list[str] = []
        for key, field in self.inputs.items():
            try:
                value = field.read()
            except ValueError as exc:
                problems.append(str(exc))
                continue
            if value is not None:
                content[key] = value
        return content, problems

    def show_problems(self, problems: list[str]) -> None:
        for key, field in self.inputs.items():
            mine = problems_for(key, problems)
            field.show("; ".join(mine) if mine else None)
        others = [p for p in problems if not any(p.startswith(f'"{key}"') for key in self.inputs)]
        self.problems.value = f'<span style="color:#c62828">{escape("; ".join(others))}</span>' if others else ""

    def submit(self) -> bool:
        """Answer ``accept`` if every field is valid; else show why and keep the form open."""
        if self.finished:
            return False
        content, problems = self.values()
        if not problems:
            content, problems = validate_form(self.request.fields or {}, content)
        if problems:
            self.show_problems(problems)
            return False
        self.show_problems([])
        shown = ": " + ", ".join(f"{key} = {value!r}" for key, value in content.items()) if content else ""
        return self._resolve(InputResponse("accept", content), shown)

    def decline(self) -> bool:
        return self._resolve(InputResponse("decline"))

    def cancel(self) -> bool:
        return self._resolve(InputResponse("cancel"))

    def _disable_inputs(self) -> None:
        for field in self.inputs.values():
            field.disable()

    def __repr__(self) -> str:
        return f"<ElicitationForm {self.request.message!r} fields={list(self.inputs)} {self.state_word}>"
