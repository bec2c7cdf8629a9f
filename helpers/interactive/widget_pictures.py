"""The explorers' pictures: HTML for the widgets' panes, and one SVG for a static snapshot.

- `graph_html`, `table_html` and `figure_html`: a graph, a table or a figure as an HTML string for
  a widget's HTML pane (a graph without `dot` as preformatted text; figures palette-compressed
  with `compact_png`).
- `snapshot_svg`: graphs, figures, tables and text stacked into one SVG picture: what GitHub,
  nbviewer and nbconvert show for a widget, which they cannot run.

Nothing here computes what the explorers show (`helpers.interactive.explorers` and
`helpers.interactive.backward_recorder` do); this module only draws it.
"""

from __future__ import annotations

import base64
import functools
import html
import io
import re
import struct
from dataclasses import dataclass

from helpers.display import Figure, Table, data_fingerprint, figure_fonts, text_columns
from helpers.graph import AutogradGraph, dot_available
from helpers.naming import a_type

__all__ = [
    "compact_png",
    "figure_html",
    "graph_html",
    "snapshot_svg",
    "table_html",
    "widget_png",
]


def _img(mime: str, payload: bytes, alt: str) -> str:
    data = base64.b64encode(payload).decode("ascii")
    return (
        f'<img alt="{html.escape(alt)}" style="max-width: 100%; height: auto" '
        f'src="data:{mime};base64,{data}"/>'
    )


def graph_html(graph: AutogradGraph, alt: str = "autograd graph") -> str:
    """The graph as an <img> of its SVG, or as preformatted text when `dot` is missing."""
    if dot_available():
        bundle = graph._repr_mimebundle_()
        if "image/svg+xml" in bundle:
            return _img("image/svg+xml", bundle["image/svg+xml"].encode("utf-8"), alt)
        text = bundle["text/plain"]
    else:
        text = graph._repr_mimebundle_()["text/plain"]
    return f'<pre style="font-size: 11px">{html.escape(text)}</pre>'


def table_html(table: Table) -> str:
    """A Table as HTML with padded, ruled cells (widget panes get no notebook table styling)."""
    cell = 'style="text-align: left"'
    padded = 'style="text-align: left; padding: 2px 10px; border-bottom: 1px solid #e1e4e8"'
    return table._repr_html_().replace(cell, padded)


@functools.lru_cache(maxsize=16)  # the live picture and the static snapshot share one figure
def compact_png(png: bytes, colors: int = 64) -> bytes:
    """The PNG with at most `colors` colours (no dithering): heatmaps stay exact, bytes shrink."""
    from PIL import Image

    data = Image.open(io.BytesIO(png)).text.get("Data")
    return _palette_png(Image.open(io.BytesIO(png)).convert("RGB"), colors, data)


def _palette_png(image, colors: int = 64, data: str | None = None) -> bytes:
    """A PIL RGB image as a PNG of at most `colors` colours.

    Fast octree quantization takes a few milliseconds where median cut takes tens: a widget
    redraws on every change of a control, so the fast one it is.
    """
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    small = image.quantize(
        colors=colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
    )
    info = PngInfo()
    if data is not None:  # the figure's data fingerprint (helpers.display.data_fingerprint)
        info.add_text("Data", data)
    out = io.BytesIO()
    small.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def widget_png(figure: Figure) -> bytes:
    """The figure as a palette PNG for a widget pane or a snapshot, drawn once per figure.

    A figure with fixed margins (`tight=False`) is drawn straight onto an Agg canvas, which skips
    what `savefig` adds around the drawing (a new renderer, a second pass for a tight crop); the
    picture is the same figure at the same DPI. A tight figure goes through `Figure.png()`.
    """
    cached = figure.__dict__.get("_widget_png")
    if cached is not None:
        return cached
    if figure.tight:
        cached = compact_png(figure.png())
    else:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from PIL import Image

        figure.figure.set_dpi(figure.dpi)
        canvas = figure.__dict__.get("_canvas") or FigureCanvasAgg(figure.figure)
        figure.__dict__["_canvas"] = canvas  # kept: a redrawn figure draws on the same canvas
        with figure_fonts(figure.language):
            canvas.draw()
        rgba = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba())
        cached = _palette_png(rgba.convert("RGB"), data=data_fingerprint(figure.figure))
    figure.__dict__["_widget_png"] = cached
    return cached


def figure_html(figure: Figure) -> str:
    """A helpers.display.Figure as an <img> of its PNG (palette-compressed)."""
    return _img("image/png", widget_png(figure), figure.description)


# A static snapshot is one SVG picture: pictures and text blocks stacked top to bottom. It is what
# GitHub, nbviewer and nbconvert show for a widget (nbval does not compare SVG; the text/plain
# beside it carries the same content as text, and that is compared).

_FONT = 11  # px, monospace text blocks
#: The snapshot's text, in a monospace font first, then a Simplified Chinese one for the Chinese
#: edition's titles and tables (Noto CJK on Linux, Binder and Colab; PingFang and YaHei on macOS
#: and Windows). Without the Chinese names a browser picks any CJK face it has, Japanese
#: included, whose forms of some characters are not the Chinese ones.
TEXT_FONTS = (
    "DejaVu Sans Mono, Menlo, Consolas, Noto Sans Mono CJK SC, Noto Sans CJK SC, "
    "PingFang SC, Microsoft YaHei, monospace"
)
_CHAR = 6.7  # px per monospace character at that size (DejaVu Sans Mono and similar)
_LINE = 14  # px per text line
_GAP = 10  # px between parts


@dataclass(frozen=True)
class _Part:
    width: float
    height: float
    body: str  # SVG fragment drawn at the origin; moved into place with a transform


def _graph_part(svg: str) -> _Part:
    match = re.search(r"<svg\b[^>]*>", svg)
    if match is None:
        raise ValueError("not an SVG document")
    head = match.group(0)
    size = {k: float(v) for k, v in re.findall(r'\b(width|height)="([0-9.]+)pt"', head)}
    view = re.search(r'viewBox="([^"]+)"', head)
    width, height = size.get("width", 300.0) * 4 / 3, size.get("height", 200.0) * 4 / 3
    inner = svg[match.end() : svg.rindex("</svg>")]
    view_box = f' viewBox="{view.group(1)}"' if view else ""
    return _Part(
        width,
        height,
        f'<svg width="{width:.0f}" height="{height:.0f}"{view_box}>{inner}</svg>',
    )


def _png_part(png: bytes) -> _Part:
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    data = base64.b64encode(png).decode("ascii")
    return _Part(
        width,
        height,
        f'<image width="{width}" height="{height}" href="data:image/png;base64,{data}" '
        f'xlink:href="data:image/png;base64,{data}"/>',
    )


def _text_part(text: str, heading: bool = False) -> _Part:
    lines = text.splitlines() or [""]
    rows = []
    for i, line in enumerate(lines):
        weight = ' font-weight="bold"' if heading else ""
        rows.append(
            f'<text x="0" y="{(i + 1) * _LINE - 3}"{weight} xml:space="preserve">'
            f"{html.escape(line)}</text>"
        )
    width = max(text_columns(line) for line in lines) * _CHAR
    return _Part(
        width,
        len(lines) * _LINE,
        f'<g font-family="{TEXT_FONTS}" font-size="{_FONT}">{"".join(rows)}</g>',
    )


def snapshot_svg(*parts: object, title: str | None = None) -> str:
    """One SVG stacking the parts: graphs (AutogradGraph or SVG text), figures, tables, text."""
    made: list[_Part] = []
    if title:
        made.append(_text_part(title, heading=True))
    for part in parts:
        if isinstance(part, AutogradGraph):
            if dot_available():
                made.append(_graph_part(part.pipe(format="svg", encoding="utf-8")))
            else:
                made.append(_text_part(part.text()))
        elif isinstance(part, Figure):
            made.append(_png_part(widget_png(part)))
        elif isinstance(part, bytes):
            made.append(_png_part(part))
        elif isinstance(part, str) and part.lstrip().startswith(("<?xml", "<svg")):
            made.append(_graph_part(part))
        elif isinstance(part, (Table, str)):
            made.append(_text_part(repr(part) if isinstance(part, Table) else part))
        else:
            raise TypeError(f"snapshot_svg() cannot draw {a_type(part)}")
    width = max((p.width for p in made), default=0) + 2 * _GAP
    y = _GAP
    placed = []
    for p in made:
        placed.append(f'<g transform="translate({_GAP},{y:.0f})">{p.body}</g>')
        y += p.height + _GAP
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        f'width="{width:.0f}" height="{y:.0f}" viewBox="0 0 {width:.0f} {y:.0f}">'
        f'<rect width="100%" height="100%" fill="white"/>{"".join(placed)}</svg>'
    )
