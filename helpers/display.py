"""Display objects: tables and figures that render as HTML/PNG in Jupyter and as stable text."""

from __future__ import annotations

import hashlib
import html
import io
import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache, wraps
from typing import Any

from helpers.language import heading, language, phrase, say, say_in

__all__ = [
    "FIGURE_FONTS",
    "Figure",
    "Stack",
    "Table",
    "chinese_font",
    "data_fingerprint",
    "figure_language",
    "figure_phrase",
    "figure_words",
    "text_columns",
]

#: Fonts with Simplified Chinese glyphs, the first one installed is used: Debian's and Ubuntu's
#: fonts-noto-cjk, Adobe's name for the same face, then macOS's and Windows' own.
CHINESE_FONTS = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "Noto Sans SC",
    "WenQuanYi Zen Hei",
    "PingFang SC",
    "Heiti SC",
    "Microsoft YaHei",
    "SimHei",
)
#: Font files that hold them, for a font installed after matplotlib made its font cache.
_CHINESE_FONT_FILES = re.compile(
    r"NotoSansCJK|SourceHanSans|NotoSansSC|wqy-zenhei|PingFang|STHeiti|msyh|simhei", re.I
)
#: A Chinese figure's font family: matplotlib's own face for Latin, Greek and the digits (as in
#: the English figures), then a Chinese face for what it lacks.
FIGURE_FONTS = ["DejaVu Sans"]


@cache
def chinese_font() -> str | None:
    """The installed font matplotlib can draw Chinese with, or None."""
    from matplotlib import font_manager

    def installed() -> str | None:
        names = {f.name for f in font_manager.fontManager.ttflist}
        return next((n for n in CHINESE_FONTS if n in names), None)

    found = installed()
    if found is None:  # installed after matplotlib cached its font list: add the files
        for path in font_manager.findSystemFonts():
            if _CHINESE_FONT_FILES.search(path):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    continue
        found = installed()
    return found


_said_no_font: list[bool] = []


def figure_language() -> str:
    """The language a figure's words are drawn in: the learner's, except that a Chinese figure
    falls back to English (saying so once) where no font has Chinese glyphs."""
    code = language()
    if code == "zh" and chinese_font() is None:
        if not _said_no_font:
            _said_no_font.append(True)
            print(say("common", "figures.no_chinese_font"))
        return "en"
    return code


@contextmanager
def figure_fonts(code: str | None = None) -> Iterator[None]:
    """Inside, matplotlib makes text in the fonts of language `code` (default: the one figures
    are drawn in now): for Chinese FIGURE_FONTS, then the Chinese face; for English, its
    defaults, untouched."""
    if (code or figure_language()) != "zh" or chinese_font() is None:
        yield
        return
    import matplotlib

    with matplotlib.rc_context({"font.family": [*FIGURE_FONTS, chinese_font()]}):
        yield


def drawn_in_language(build: Callable[..., Figure]) -> Callable[..., Figure]:
    """Decorates a function that builds a Figure: its text is made in `figure_fonts`, so that
    what measures text while building (tight_layout) measures the face that draws it."""

    @wraps(build)
    def built(*args: Any, **kwargs: Any) -> Figure:
        with figure_fonts():
            return build(*args, **kwargs)

    return built


def figure_words(key: str, /, **values: Any) -> str:
    """The words `figures.<key>` of a figure (`helpers/text/*/common.toml`), in the language
    the figure is drawn in (`figure_language`)."""
    return say_in(figure_language(), "common", f"figures.{key}", **values)


def figure_phrase(english: str) -> str:
    """A label a figure is handed in English (a run's name in its legend), in the language the
    figure is drawn in: a phrase of the text files (`[phrases]`), unchanged when there is none."""
    return english if figure_language() == "en" else phrase(None, english)


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def data_fingerprint(figure: Any) -> str:
    """A short hash of what a figure shows, its words aside: every axes' limits, scales and
    ticks; the data of its lines, images, patches and collections; and the numbers its texts
    say. Two editions' pictures of one result have the same fingerprint."""
    parts: list[Any] = []
    for ax in figure.axes:
        parts.append([ax.get_xlim(), ax.get_ylim(), ax.get_xscale(), ax.get_yscale()])
        parts.append([list(ax.get_xticks()), list(ax.get_yticks())])
        parts += [line.get_xydata().tolist() for line in ax.lines]
        parts += [image.get_array().tolist() for image in ax.images]
        parts += [
            patch.get_patch_transform().transform(patch.get_path().vertices).tolist()
            for patch in ax.patches
        ]
        parts += [c.get_offsets().tolist() for c in ax.collections]
    parts.append(sorted(n for w in _words(figure) for n in _NUMBER.findall(w)))
    text = json.dumps(parts, default=str, sort_keys=True, allow_nan=True)
    text = re.sub(r"(\d+\.\d{6})\d+", r"\1", text)  # 6 decimals: the same on every machine
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _words(figure: Any) -> list[str]:
    """The words a figure's code gave it: titles, axis labels, texts, legends (tick labels,
    which matplotlib writes while drawing, are left out; the ticks' places are data)."""
    words = [t.get_text() for t in figure.texts]
    for ax in figure.axes:
        words += [ax.get_title(loc) for loc in ("left", "center", "right")]
        words += [ax.get_xlabel(), ax.get_ylabel(), *(t.get_text() for t in ax.texts)]
        legend = ax.get_legend()
        words += [t.get_text() for t in legend.get_texts()] if legend else []
    return words


def _is_text(artist: Any) -> bool:
    from matplotlib.text import Text

    return isinstance(artist, Text)


def _cell_text(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, float):
        return format(value, ".4g")
    if isinstance(value, str):
        return phrase(None, value)
    return str(value)


def _shown(text: str | None) -> str | None:
    """A heading, caption or note in the learner's language (the key in code stays English)."""
    return None if text is None else phrase(None, text)


class Table:
    """Rows of named values; HTML in Jupyter, aligned plain text elsewhere.

    Columns are named in English in code (`table.row("y")["is leaf"]`); what is shown (headings,
    title, note and text cells) is looked up in the learner's language (`helpers.language`).

    A `folded` table (one that holds answers) shows only that summary line until it is opened:
    HTML `<details>`, and in plain text the summary alone, since plain text cannot fold."""

    def __init__(
        self,
        columns: Sequence[str],
        rows: Sequence[dict[str, Any]],
        *,
        title: str | None = None,
        note: str | None = None,
        folded: str | None = None,
    ) -> None:
        self.columns = list(columns)
        self.folded = folded
        self.rows = [dict(r) for r in rows]
        self.title = title
        self.note = note
        for r in self.rows:
            missing = [c for c in self.columns if c not in r]
            if missing:
                raise ValueError(f"row {r!r} lacks the column(s) {missing}")

    def row(self, key: str) -> dict[str, Any]:
        """The row whose first column equals `key`."""
        first = self.columns[0]
        for r in self.rows:
            if r[first] == key:
                return r
        known = ", ".join(str(r[first]) for r in self.rows)
        raise KeyError(f"no row {key!r}; rows are: {known}")

    def column(self, name: str) -> list[Any]:
        """All values of one column, top to bottom."""
        if name not in self.columns:
            raise KeyError(f"no column {name!r}; columns are: {', '.join(self.columns)}")
        return [r[name] for r in self.rows]

    def select(self, *columns: str) -> Table:
        """A narrower table with only these columns (the first column is always kept)."""
        unknown = [c for c in columns if c not in self.columns]
        if unknown:
            raise KeyError(f"no column(s) {unknown}; columns are: {', '.join(self.columns)}")
        keep = [self.columns[0], *(c for c in columns if c != self.columns[0])]
        return Table(
            keep,
            [{c: r[c] for c in keep} for r in self.rows],
            title=self.title,
            note=self.note,
            folded=self.folded,
        )

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        if self.folded is not None:
            return "\n".join(t for t in (_shown(self.title), self.folded, _shown(self.note)) if t)
        headings = [heading(c) for c in self.columns]
        cells = [headings] + [[_cell_text(r[c]) for c in self.columns] for r in self.rows]
        widths = [max(text_columns(row[i]) for row in cells) for i in range(len(self.columns))]
        title, note = _shown(self.title), _shown(self.note)
        lines = [title] if title else []
        for k, row in enumerate(cells):
            lines.append("  ".join(_pad(v, w) for v, w in zip(row, widths, strict=True)).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        if note:
            lines.append(note)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        headings = [html.escape(heading(c)) for c in self.columns]
        head = "".join(f'<th style="text-align: left">{h}</th>' for h in headings)
        body = "".join(
            "<tr>"
            + "".join(
                f'<td style="text-align: left">{html.escape(_cell_text(r[c]))}</td>'
                for c in self.columns
            )
            + "</tr>"
            for r in self.rows
        )
        title, note_text = _shown(self.title), _shown(self.note)
        caption = f"<caption>{html.escape(title)}</caption>" if title else ""
        note = f"<p><small>{html.escape(note_text)}</small></p>" if note_text else ""
        table = (
            '<table style="font-family: monospace; border-collapse: collapse">'
            f"{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"
        )
        if self.folded is None:
            return table
        return f"<details><summary>{html.escape(self.folded)}</summary>{table}</details>"


def text_columns(text: str) -> int:
    """Columns a text takes in a monospace font: a CJK character takes two (symbols such as ✅
    are counted as one, as the course's tables always have)."""
    return sum(2 if _is_cjk(ch) else 1 for ch in text)


def _is_cjk(ch: str) -> bool:
    return ord(ch) >= 0x2E80 and unicodedata.east_asian_width(ch) in "WF"


def _pad(text: str, width: int) -> str:
    return text + " " * (width - text_columns(text))


class Figure:
    """A matplotlib figure shown as a PNG at a modest DPI, with a short stable text form.

    Build it from `matplotlib.figure.Figure` directly (no pyplot): nothing leaks into global state.
    `tight=True` crops the picture to what is drawn, which costs a second drawing pass; a figure
    laid out with fixed margins passes `tight=False` and is drawn once.
    """

    def __init__(self, figure: Any, *, description: str, dpi: int = 72, tight: bool = True) -> None:
        self.figure = figure
        self.description = description
        self.dpi = dpi
        self.tight = tight
        self.language = figure_language()
        self._png: bytes | None = None

    def png(self) -> bytes:
        """The figure as PNG bytes (no version metadata, so re-runs give equal bytes), carrying
        its `data_fingerprint` as the text chunk "Data".

        Drawn once and kept: a figure shown in several places is rendered only once. A Chinese
        figure's words are drawn in FIGURE_FONTS and the installed Chinese face.
        """
        if self._png is None:
            buffer = io.BytesIO()
            with figure_fonts(self.language):
                if self.language == "zh":  # text made outside figure_fonts (a redraw's)
                    family = [*FIGURE_FONTS, chinese_font()]
                    for text in self.figure.findobj(_is_text):
                        text.set_fontfamily(family)
                self.figure.savefig(
                    buffer,
                    format="png",
                    dpi=self.dpi,
                    bbox_inches="tight" if self.tight else None,
                    metadata={"Software": None, "Data": data_fingerprint(self.figure)},
                )
            self._png = buffer.getvalue()
        return self._png

    def forget_drawing(self) -> None:
        """Drop what was drawn (the PNG and any picture made from it): the figure changed."""
        self._png = None
        self.__dict__.pop("_widget_png", None)

    def __repr__(self) -> str:
        return say("common", "figures.shown", description=self.description)

    def _repr_mimebundle_(self, include=None, exclude=None, **_) -> dict[str, Any]:
        return {"image/png": self.png(), "text/plain": repr(self)}


class Stack:
    """Several display objects shown one after another as separate outputs (e.g. figure, table)."""

    def __init__(self, *items: Any) -> None:
        self.items = list(items)

    def __repr__(self) -> str:
        return "\n".join(repr(i) for i in self.items)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        for item in self.items:
            display(item)
