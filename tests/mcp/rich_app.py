"""A test app whose tools answer with rich values: a figure, a huge image, a big table, an array, HTML."""

from __future__ import annotations

from typing import Any

from fusion_nb import Fusion


class OnlyHtml:
    """A value that shows itself only as HTML (with a style block the agent must not get)."""

    def _repr_html_(self) -> str:
        return "<style>td {color: red}</style><b>bold</b>" + "<i>x</i>" * 400_000


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

    @app.f.query("html").handle
    async def html(input: Any, ctx: Any) -> Any:
        return OnlyHtml()

    return app
