"""What presenting costs per kind of value, and what the agent receives (type, size).

``present(value)`` is the engine's presenter with the built-in rich presenter installed (as
serving an app installs it): a ``str`` must stay as cheap as without it (the rich presenter
is asked only for values the engine has no rule for). Also the time to encode a figure at
1568 px. Machines here are noisy: read the ratios, not the times.
Then the MCP Apps views (#49): each ``ui://`` resource's bytes, and the page tool's server time
for a 1,000,000-row frame (the first page, and the first sorted one, which sorts once per order).
Time to first paint per view is measured in chromium by ``tests/browser/test_apps_host.py``.
Run: ``.venv/bin/python benchmarks/rich.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

# (this folder's mcp.py would shadow the SDK the MCP Apps rows import)
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import matplotlib

matplotlib.use("Agg")
import anyio
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from PIL import Image

from fusion_nb.engine import App, present
from fusion_nb.mcp.apps import PAGE_TOOL, Views, view_html, view_tools
from fusion_nb.mcp.convert import ui_uri
from fusion_nb.mcp.rich import Limits, figure_png, install_default


class OnlyHtml:
    def _repr_html_(self) -> str:
        return "<style>td {}</style>" + "<td>cell</td>" * 20_000


class OnlySvg:
    def _repr_svg_(self) -> str:
        return '<svg xmlns="http://www.w3.org/2000/svg">' + '<circle r="1"/>' * 2_000 + "</svg>"


class OnlyJson:
    def _repr_json_(self) -> dict[str, Any]:
        return {"rows": [{"id": n, "name": f"row {n}"} for n in range(1_000)]}


def timed(fn: Callable[[], Any], rounds: int) -> float:
    """Median seconds of ``fn()`` over ``rounds`` runs (after one warm-up)."""
    fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def received(presented: Any) -> str:
    content, structured = presented
    kinds = "+".join(block["type"] for block in content) + ("+structured" if structured is not None else "")
    return f"{kinds}, {len(json.dumps({'content': content, 'structuredContent': structured})) / 1024:.1f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    fig, ax = plt.subplots(figsize=(16, 8))
    ax.plot(np.random.default_rng(0).normal(size=5000))
    values: dict[str, Any] = {
        "str": "hello",
        "dict": {"a": 1, "b": [1, 2, 3]},
        "DataFrame 100,000 x 3": pd.DataFrame({"a": range(100_000), "b": ["x"] * 100_000, "c": 0.5}),
        "ndarray 1000 x 1000": np.zeros((1000, 1000)),
        "figure 16x8 in (1568 px)": fig,
        "PIL image 6000x4000": Image.effect_noise((6000, 4000), 64).convert("RGB"),
        "HTML-only value": OnlyHtml(),
        "SVG-only value": OnlySvg(),
        "JSON-only value (_repr_json_)": OnlyJson(),
    }
    quick = {
        name: timed(functools.partial(present, value), rounds * 1000)
        for name, value in values.items()
        if name in ("str", "dict")
    }
    install_default()
    print("| value | present() | without the rich presenter | the agent receives |")
    print("|---|---|---|---|")
    for name, value in values.items():
        big = name not in quick
        seconds = timed(functools.partial(present, value), rounds if big else rounds * 1000)
        before = f"{quick[name] * 1e6:.2f} us" if name in quick else "(text only)"
        shown = f"{seconds * 1e3:.2f} ms" if big else f"{seconds * 1e6:.2f} us"
        print(f"| {name} | {shown} | {before} | {received(present(value))} |")
    encode = timed(lambda: figure_png(fig, Limits()), rounds)
    print(f"\nencoding a 1568 px figure as PNG: {encode * 1e3:.1f} ms (median of {rounds})")
    apps(rounds)


def apps(rounds: int) -> None:
    """The MCP Apps rows: resource bytes per view, the page tool's server time on 1,000,000 rows."""
    print("\n| MCP Apps view | resource bytes |\n|---|---|")
    for view in ("auto", "table", "image", "job", "plotly"):
        html = view_html(ui_uri(view))
        print(f"| {ui_uri(view)} | {len(html.encode()) if html else 0:,} |")
    frame = pd.DataFrame({"id": range(1_000_000), "name": [f"row {n % 7}" for n in range(1_000_000)]})
    frame["score"] = np.random.default_rng(0).normal(size=len(frame))
    views = Views()
    handle = views.remember(None, frame)
    tools = view_tools(views, App())

    async def page(**arguments: Any) -> int:
        result = await tools.call(PAGE_TOOL, {"handle": handle, "limit": 50, **arguments})
        assert not result.is_error, result.content
        return len(json.dumps({"content": result.content, "structuredContent": result.structured_content}))

    def once(**arguments: Any) -> tuple[float, int]:
        start = time.perf_counter()
        size = anyio.run(functools.partial(page, **arguments))
        return time.perf_counter() - start, size

    first, size = once()
    sort_first, _ = once(sort="score")
    later = timed(lambda: once(sort="score", offset=500_000), rounds)
    print("\n| page tool, 1,000,000 x 3 frame | server time | bytes |\n|---|---|---|")
    print(f"| first page (50 rows) | {first * 1e3:.1f} ms | {size:,} |")
    print(f"| first page sorted by a float column (sorts once) | {sort_first * 1e3:.1f} ms | |")
    print(f"| a later page of that order (median of {rounds}) | {later * 1e3:.1f} ms | |")


if __name__ == "__main__":
    main()
