"""``.app()`` on the builder: a view name and who may call the tool are data on the tool (#49)."""

from __future__ import annotations

from typing import Any

import pytest

from fusion_nb.engine import App


async def handler(input: Any, ctx: Any) -> str:
    return "ok"


def test_app_records_the_view_and_visibility() -> None:
    app = App()
    plain = app.f.query("plain").handle(handler)
    shown = app.f.query("shown").app().handle(handler)
    table = app.f.query("table").app("table", visibility=["app"]).handle(handler)
    assert (plain.tool.view, plain.tool.visibility) == (None, ("model", "app"))
    assert (shown.tool.view, shown.tool.visibility) == ("auto", ("model", "app"))
    assert (table.tool.view, table.tool.visibility) == ("table", ("app",))
    assert app.f.action("train").app().task().handle(handler).tool.view == "job"  # (a task tool's auto)


@pytest.mark.parametrize(
    ("view", "visibility", "says"),
    [
        (
            "plotty",
            ["model"],
            "tool \"t\": .app() takes one of the views auto, table, image, plotly, job, not 'plotty'",
        ),
        (None, [], 'tool "t": .app() visibility is a list of "model" and "app", not []'),
        (None, ["agent"], 'tool "t": .app() visibility is a list of "model" and "app", not [\'agent\']'),
    ],
)
def test_a_bad_view_or_visibility_is_one_sentence(view: Any, visibility: Any, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        App().f.query("t").app(view, visibility=visibility)
    assert str(refused.value) == says
