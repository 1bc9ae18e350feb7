"""A test app whose tools answer with rich values: a figure, a huge image, a big table, an array, HTML, SVG, JSON."""

from __future__ import annotations

from typing import Any

from fusion_nb import Fusion


class OnlyHtml:
    """A value that shows itself only as HTML (with a style block the agent must not get)."""

    def _repr_html_(self) -> str:
        return "<style>td {color: red}</style><b>bold</b>" + "<i>x</i>" * 400_000


SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10"><rect width="20" height="10"/></svg>'


class Vector:
    """A value that shows itself only as SVG (as a diagram library's does)."""

    def _repr_svg_(self) -> str:
        return SVG


class Described:
    """HTML beside a repr that says something: the repr is sent (HTML only when nothing better exists)."""

    def _repr_html_(self) -> str:
        return "<table><tr><td>3 rows</td></tr></table>"

    def __repr__(self) -> str:
        return "Described(3 rows)"


class Documented:
    """Markdown beside HTML: the markdown is sent."""

    def _repr_markdown_(self) -> str:
        return "**3 rows**"

    def _repr_html_(self) -> str:
        return "<b>3 rows</b>"


class Measured:
    """A value that shows itself as JSON: structured content."""

    def _repr_json_(self) -> dict[str, Any]:
        return {"rows": 3, "columns": ["a", "b"]}


def answering(kind: type) -> Any:
    """A handler answering with a new ``kind()`` (a value that shows itself through ``_repr_*_``)."""

    async def handler(input: Any, ctx: Any) -> Any:
        return kind()

    return handler


def rich_app(name: str = "rich-test") -> Fusion:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    from PIL import Image

    app = Fusion(name)

    @app.f.query("figure").handle
    async def figure(input: Any, ctx: Any) -> Any:
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot([1, 3, 2])
        ax.set(title="Loss", xlabel="epoch", ylabel="loss")
        plt.close(fig)
        return fig

    @app.f.query("poster").handle
    async def poster(input: Any, ctx: Any) -> Any:
        fig = plt.figure(figsize=(60, 40))  # 6000x4000 px at its 100 dpi
        fig.add_subplot().plot([1, 2])
        plt.close(fig)
        return fig

    @app.f.query("photo").handle
    async def photo(input: Any, ctx: Any) -> Any:
        return Image.effect_noise((6000, 4000), 64).convert("RGB")

    @app.f.query("table").handle
    async def table(input: Any, ctx: Any) -> Any:
        n = 100_000
        return pd.DataFrame({"id": range(n), "name": ["row"] * n, "score": np.linspace(0, 1, n)})

    @app.f.query("grid").handle
    async def grid(input: Any, ctx: Any) -> Any:
        return np.zeros((300, 200, 3))

    for name, kind in (
        ("html", OnlyHtml),
        ("vector", Vector),
        ("described", Described),
        ("documented", Documented),
        ("measured", Measured),
    ):
        app.f.query(name).handle(answering(kind))

    @app.f.query("presented").present(lambda frame: f"{len(frame)} rows, as the tool presents them").handle
    async def presented(input: Any, ctx: Any) -> Any:
        return pd.DataFrame({"a": [1, 2, 3]})

    return app
