"""The inline form for an elicitation request: the question, its fields, Submit / Decline / Dismiss.

Submit checks the answer with the engine's own ``validate_form`` and shows what is
wrong next to each field instead of answering. Once answered, the question stays on
top and the answer shows under it.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from fusion_nb.engine import InputRequest, InputResponse, validate_form

from .fields import LINE, FieldInput, problems_for
from .prompt import Prompt
from .status import ERROR, MUTED, colored, escape


class ElicitationForm(Prompt):
    """Question, one input per field (defaults filled), Submit / Decline / Dismiss.

    ``problems`` are the messages of a re-ask (the previous answer was refused) and
    show until the next Submit.
    """

    def __init__(self, request: InputRequest, problems: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__(request)
        self.inputs = {key: FieldInput(key, field) for key, field in (request.fields or {}).items()}
        self.problems = w.HTML("", layout=w.Layout(min_height=LINE))  # (its height kept: see FieldInput.error)
        self.submit_button = self._button("Submit", "primary", self.submit, "Answer with these values (or press Enter)")
        self.decline_button = self._button("Decline", "", self.decline, "Answer no: the tool is told you declined")
        self.dismiss_button = self._button("Dismiss", "", self.dismiss, "Close the form without answering at all")
        self.hint.value = colored("Decline answers no · Dismiss leaves without an answer", MUTED)
        for field in self.inputs.values():
            field.on_enter(self.submit)
        self.children = [
            self.question,
            *(field.box for field in self.inputs.values()),
            self.problems,
            w.HBox([*self.buttons, self.hint], layout=w.Layout(align_items="center", flex_flow="row wrap")),
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

    def show_problems(self, problems: list[str] | tuple[str, ...]) -> None:
        """Put each problem next to its field; the rest above the buttons."""
        for key, field in self.inputs.items():
            mine = problems_for(key, problems)
            field.show("; ".join(mine) if mine else None)
        others = [p for p in problems if not any(p.startswith(f'"{key}"') for key in self.inputs)]
        self.problems.value = colored(escape("; ".join(others)), ERROR) if others else ""

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
        response = InputResponse("accept", content)
        return self._resolve(response, self._shown(response))

    def _shown(self, response: InputResponse) -> str:
        content = response.content if response.accepted else None
        if not content:
            return ""
        return ": " + ", ".join(f"{self._label(key)} = {self._said(key, value)}" for key, value in content.items())

    def _said(self, key: str, value: Any) -> str:
        field = self.inputs.get(key)
        return field.shown(value) if field is not None else repr(value)

    def _snapshot_body(self) -> str:
        rows = "".join(
            f'<tr><td style="padding:0 12px 0 0">{escape(field.label)}</td>'
            f"<td><code>{escape(_current(field))}</code></td></tr>"
            for field in self.inputs.values()
        )
        return f"<table>{rows}</table>"

    def _fill(self, response: InputResponse) -> None:
        for key, value in (response.content or {}).items():
            field = self.inputs.get(key)
            if field is not None:
                field.fill(value)

    def _label(self, key: str) -> str:
        field = self.inputs.get(key)
        return field.for_person(f'"{key}"').strip('"') if field is not None else key

    def decline(self) -> bool:
        """Answer ``decline``: the person said no."""
        return self._resolve(InputResponse("decline"))

    def dismiss(self) -> bool:
        """Answer ``cancel``: the person closed the form without answering."""
        return self._resolve(InputResponse("cancel"))

    def _disable_inputs(self) -> None:
        for field in self.inputs.values():
            field.disable()

    def __repr__(self) -> str:
        return f"<ElicitationForm {self.request.message!r} fields={list(self.inputs)} {self.state_word}>"


def _current(field: FieldInput) -> str:
    """What the field holds now, for the saved notebook's static copy of the form."""
    value = field.widget.value
    if isinstance(value, tuple):
        return field.shown(list(value)) if field.field.titles else ", ".join(map(str, value))
    if value is None:
        return ""
    return field.shown(value) if field.field.titles else str(value)
