"""Rich values as MCP content: a figure as an image, a table as structured content.

Two halves. A *formatter* turns a value into a mime bundle (``{"image/png": ..., "text/plain":
...}``): in a kernel IPython's display formatter (what the notebook would show, the agent
gets; the notebook layer plugs it in), elsewhere ``builtin_bundle`` (the ``_repr_*_``
protocol). ``to_content`` turns a bundle into MCP content, bounded. Values whose useful form is
data rather than a picture (a pandas DataFrame or Series, a numpy array) and those that need
rendering (a matplotlib figure, a PIL image) are handled by kind before any formatter.

Nothing here imports matplotlib, pandas, numpy or Pillow unless the value brought it: a kind
is recognised only when its module is already in ``sys.modules`` (Pillow is also used, when
installed, to downscale raster images from a bundle).

This lives in the MCP layer because it produces MCP content; the engine only asks it through
``use_presenter`` for values it has no rule for (a ``str`` answer never gets here).
"""

from __future__ import annotations

import base64
import functools
import io
import json
import math
import re
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..engine import AnswerLimits, Presented, answer_limits, use_presenter

#: a mime bundle: mime type -> data (bytes or base64 text for images, text, or JSON)
Bundle = Mapping[str, Any]
#: a value -> its bundle (or ``None`` when it has nothing to show)
Formatter = Callable[[Any], Bundle | None]

_RASTER = ("image/png", "image/jpeg", "image/gif", "image/webp")
_REPRS = (
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_json_", "application/json"),
    ("_repr_latex_", "text/latex"),
    ("_repr_html_", "text/html"),
)
_DEFAULT_REPR = re.compile(r"^<[\w.]+ object at 0x[0-9a-fA-F]+>$")
_STYLE_SCRIPT = re.compile(r"<(style|script)\b.*?</\1>", re.S | re.I)


@dataclass(frozen=True, slots=True)
class Limits:
    """How large an answer may get: ``max_bytes`` for the whole answer (base64 counted),
    ``max_side`` px for an image's longest side, ``rows`` of a table and ``items`` of an
    array in the sample, ``columns`` of a table."""

    max_bytes: int = 1 << 20
    max_side: int = 1568
    rows: int = 20
    columns: int = 50
    items: int = 100
    cell_chars: int = 80

    def answer(self) -> AnswerLimits:
        """The engine's bound these limits carry (what ``present`` takes)."""
        return AnswerLimits(self.max_bytes, self.max_side)


@functools.lru_cache(maxsize=16)
def limits_for(answer: AnswerLimits) -> Limits:
    """The presenter's limits for an app's ``answer_limits`` (samples at their defaults)."""
    return Limits(max_bytes=answer.max_bytes, max_side=answer.max_side)


def builtin_bundle(value: Any) -> dict[str, Any]:
    """The mime bundle of ``value`` outside a kernel: ``_repr_mimebundle_`` and ``_repr_*_``, plus its repr."""
    bundle: dict[str, Any] = {}
    mimebundle = getattr(value, "_repr_mimebundle_", None)
    if callable(mimebundle):
        try:
            got = mimebundle(include=None, exclude=None)
        except Exception:
            got = None
        if isinstance(got, tuple):
            got = got[0]
        if isinstance(got, Mapping):
            bundle.update(got)
    for method, mime in _REPRS:
        if mime in bundle:
            continue
        render = getattr(value, method, None)
        if not callable(render):
            continue
        try:
            rendered = render()
        except Exception:
            continue
        if isinstance(rendered, tuple):
            rendered = rendered[0]
        if rendered is not None:
            bundle[mime] = rendered
    bundle.setdefault("text/plain", repr(value))
    return bundle


class Presenter:
    """The rich presenter ``use_presenter`` installs: by kind first, then through ``formatter``.

    A value whose bundle holds nothing but ``text/plain`` is declined (the engine then sends its
    ``str``, as it always has). Without ``limits`` it bounds each answer by the calling app's
    ``answer_limits`` (``answer_limits()``, read per call).
    """

    def __init__(self, formatter: Formatter = builtin_bundle, limits: Limits | None = None) -> None:
        self.formatter = formatter
        self.limits = limits

    def __call__(self, value: Any) -> Presented | None:
        limits = self.limits or limits_for(answer_limits())
        kind = by_kind(value, limits)
        if kind is not None:
            return kind
        bundle = self.formatter(value)
        if not bundle or set(bundle) <= {"text/plain"}:
            return None
        return to_content(bundle, limits)


_default: list[Callable[[], None]] = []


def install_default() -> None:
    """Install the built-in presenter once per process (serving an app does it)."""
    if not _default:
        _default.append(use_presenter(Presenter()))


# -- by kind -------------------------------------------------------------------------


def by_kind(value: Any, limits: Limits) -> Presented | None:
    """A DataFrame/Series, array, figure or PIL image, each only if its module is loaded."""
    module = type(value).__module__.partition(".")[0]
    if module == "pandas":
        pandas = sys.modules.get("pandas")
        if pandas is not None:
            if isinstance(value, pandas.Series):
                value = value.to_frame()
            if isinstance(value, pandas.DataFrame):
                return table(value, limits)
    elif module == "numpy":
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, numpy.ndarray):
            return array(value, limits)
    elif module == "matplotlib":
        figure = sys.modules.get("matplotlib.figure")
        if figure is not None:
            if not isinstance(value, figure.Figure) and isinstance(getattr(value, "figure", None), figure.Figure):
                value = value.figure  # an Axes: its figure
            if isinstance(value, figure.Figure):
                return [figure_png(value, limits), _text(figure_text(value))], None
    elif module == "PIL":
        image = sys.modules.get("PIL.Image")
        if image is not None and isinstance(value, image.Image):
            return [pil_image(value, limits, f"image {value.width}x{value.height} px")], None
    return None


def table(frame: Any, limits: Limits) -> Presented:
    """Columns, dtypes, the first rows, the total row count and whether it was cut; a markdown table."""
    total, width = frame.shape
    shown = frame.iloc[: limits.rows, : limits.columns]
    columns = [str(column) for column in shown.columns]
    rows = json.loads(shown.to_json(orient="values", date_format="iso", default_handler=str))
    cut = total > len(shown) or width > len(columns)
    structured = {
        "columns": columns,
        "dtypes": {str(column): str(dtype) for column, dtype in shown.dtypes.items()},
        "rows": rows,
        "total_rows": total,
        "total_columns": width,
        "cut": cut,
    }
    lines = [
        "| " + " | ".join(_cell(c, limits) for c in columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(_cell(v, limits) for v in row) + " |" for row in rows),
    ]
    summary = f"{total} rows x {width} columns"
    kept = []  # (only what was cut)
    if total > len(rows):
        kept.append(f"the first {len(rows)} rows")
    if width > len(columns):
        kept.append(f"the first {len(columns)} columns")
    if kept:
        summary += f"; {' and '.join(kept)} shown"
    return [_text("\n".join(lines) + "\n\n" + summary)], structured


def array(values: Any, limits: Limits) -> Presented:
    """Shape, dtype and a bounded sample (the leading corner of the array)."""
    shape = list(values.shape)
    side = max(1, int(limits.items ** (1 / max(1, len(shape)))))
    corner = values[tuple(slice(0, side) for _ in shape)] if shape else values
    sample = _finite(corner.tolist())
    cut = corner.size < values.size
    structured = {"shape": shape, "dtype": str(values.dtype), "size": int(values.size), "sample": sample, "cut": cut}
    line = f"array of shape {tuple(shape)}, dtype {values.dtype}"
    if cut:
        line += f"; sample of the first {corner.size} of {values.size} items"
    sample_text = json.dumps(sample, default=str)
    return [_text(f"{line}\n{_bounded(sample_text, limits.max_bytes // 4)}")], structured


def figure_png(fig: Any, limits: Limits) -> dict[str, Any]:
    """A matplotlib figure as PNG image content, its longest side at most ``max_side`` px (Agg, no display)."""
    inches = max(fig.get_size_inches())
    dpi = min(float(fig.dpi), limits.max_side / inches) if inches > 0 else fig.dpi
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return _image(buffer.getvalue(), "image/png", limits)


def figure_text(fig: Any) -> str:
    """What a reader without the image learns of a figure: its size and each plot's title and axis labels.

    ``repr`` says only ``<Figure size 600x300 with 1 Axes>``; the titles and labels are
    what a person would read off the picture first (cut to 500 characters).
    """
    width, height = (round(side * fig.dpi) for side in fig.get_size_inches())
    plots = []
    for axes in fig.axes:
        title = axes.get_title() or "untitled plot"
        labels = [f"{name}: {label}" for name, label in (("x", axes.get_xlabel()), ("y", axes.get_ylabel())) if label]
        plots.append(f'"{title}"' + (f" ({', '.join(labels)})" if labels else ""))
    heading = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    count = f"{len(plots)} plot" + ("s" if len(plots) != 1 else "")
    text = f"Figure{f' {heading!r}' if heading else ''}, {width}x{height} px, {count}"
    text += ": " + "; ".join(plots) if plots else ""
    return text if len(text) <= 500 else text[:497] + "..."


def pil_image(image: Any, limits: Limits, label: str) -> dict[str, Any]:
    """A PIL image downscaled to ``max_side`` (aspect kept), as PNG, else JPEG, within the byte bound."""
    budget = limits.max_bytes * 3 // 4 - 1024
    shown = image.copy()
    shown.thumbnail((limits.max_side, limits.max_side))
    while True:
        buffer = io.BytesIO()
        shown.save(buffer, format="PNG", optimize=False)
        data, mime = buffer.getvalue(), "image/png"
        if len(data) > budget:
            buffer = io.BytesIO()
            shown.convert("RGB").save(buffer, format="JPEG", quality=85)
            data, mime = buffer.getvalue(), "image/jpeg"
        if len(data) <= budget or max(shown.size) <= 64:
            break
        shown = shown.resize((max(1, shown.width // 2), max(1, shown.height // 2)))
    if len(data) > budget:
        return _text(f"({label}: too large to send within {limits.max_bytes} bytes)")
    return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime}


# -- bundles ---------------------------------------------------------------------------


def to_content(bundle: Bundle, limits: Limits) -> Presented:
    """MCP content for a mime bundle: the best representation, bounded, saying what was cut.

    Raster images become image content (downscaled), SVG an embedded resource, markdown,
    LaTeX and plain text text, JSON structured content; HTML only when nothing better exists
    (and never its ``<style>``/``<script>``).
    """
    content: list[dict[str, Any]] = []
    structured: dict[str, Any] | None = None
    for mime in _RASTER:
        if mime in bundle:
            data = bundle[mime]
            raw = base64.b64decode(data) if isinstance(data, str) else bytes(data)
            content.append(_image(raw, mime, limits))
            break
    if "image/svg+xml" in bundle and not content:
        svg = str(bundle["image/svg+xml"])
        if len(svg.encode()) <= limits.max_bytes // 2:
            content.append(
                {
                    "type": "resource",
                    "resource": {"uri": "data:image/svg+xml", "mimeType": "image/svg+xml", "text": svg},
                }
            )
        else:
            content.append(_text(f"(an SVG image of {len(svg)} characters, too large to send)"))
    if "application/json" in bundle:
        data = bundle["application/json"]
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError:
                data = None
        if data is not None:
            # (what the image took leaves the rest: the text and the structured content share it)
            left = limits.max_bytes - sum(len(block.get("data", "")) for block in content) - 1024
            dumped = json.dumps(data, default=str, ensure_ascii=False)
            if len(dumped.encode()) <= left // 2:
                structured = data if isinstance(data, dict) else {"result": data}
                content.append(_text(dumped))
            else:
                cut = _bounded(dumped, max(0, left // 2))  # (its quotes are escaped again on the wire)
                content.append(_text(f"{cut}\n(the JSON is over the answer bound: its structured content is left out)"))
    for mime in ("text/markdown", "text/latex"):
        if mime in bundle and not structured:
            content.append(_text(_bounded(str(bundle[mime]), limits.max_bytes // 2)))
            break
    plain = bundle.get("text/plain")
    if not content:
        if "text/html" in bundle and (plain is None or _DEFAULT_REPR.match(str(plain))):
            html = _STYLE_SCRIPT.sub("", str(bundle["text/html"]))
            content.append(_text(_bounded(html, limits.max_bytes // 2)))
        elif plain is not None:
            content.append(_text(_bounded(str(plain), limits.max_bytes // 2)))
    elif plain is not None and content[0]["type"] != "text" and not _DEFAULT_REPR.match(str(plain)):
        content.append(_text(_bounded(str(plain), 2000)))  # (a bare <X object at 0x...> tells a reader nothing)
    return content, structured


def _image(data: bytes, mime: str, limits: Limits) -> dict[str, Any]:
    """Image content within bounds: downscaled with Pillow when it is installed, else passed or described."""
    budget = limits.max_bytes * 3 // 4 - 1024
    size = _png_size(data) if mime == "image/png" else None
    if len(data) <= budget and size is not None and max(size) <= limits.max_side:
        return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime}
    try:
        from PIL import Image
    except ImportError:
        if len(data) <= budget and size is None:
            return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime}
        shape = f"{size[0]}x{size[1]} px, " if size else ""
        return _text(f"(an {mime} image, {shape}{len(data)} bytes: too large to send without Pillow to downscale it)")
    with Image.open(io.BytesIO(data)) as opened:
        opened.load()
        return pil_image(opened, limits, f"{mime} image {opened.width}x{opened.height} px")


def _png_size(data: bytes) -> tuple[int, int] | None:
    if len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    return None


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _bounded(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` UTF-8 bytes, saying how much was cut."""
    encoded = value.encode()
    if len(encoded) <= limit:
        return value
    kept = encoded[: max(0, limit - 80)].decode(errors="ignore")
    return f"{kept}\n… (cut: {len(kept)} of {len(value)} characters shown)"


def _cell(value: Any, limits: Limits) -> str:
    shown = "" if value is None else str(value)
    shown = shown.replace("|", "\\|").replace("\n", " ")
    return shown if len(shown) <= limits.cell_chars else shown[: limits.cell_chars - 1] + "…"


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: those become their names."""
    if isinstance(value, list):
        return [_finite(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, complex):
        return str(value)
    return value
