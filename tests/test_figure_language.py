"""Figures speak the learner's language: Chinese words in a Chinese face, the same data."""

import re
import struct
import warnings

import pytest
import torch

from helpers import display, language, leakage, module_hooks, precision
from helpers.params import diff_figure, param_diff
from helpers.ranks import schedule_display, split_display, split_ranks


def _heatmap():
    before = {"w": torch.zeros(2, 3), "b": torch.zeros(3)}
    after = {"w": torch.zeros(2, 3), "b": torch.tensor([0.0, 1.5, 0.0])}
    return diff_figure(param_diff(before, after))


def _sequence():
    records = [
        split_ranks.WireRecord(1, "forward", 0, 1, "activation f1", (1, 5, 6), "float32", 120),
        split_ranks.WireRecord(1, "backward", 1, 0, "gradient ff1.grad", (1, 5, 6), "float32", 120),
    ]
    return split_display.sequence_figure(records, step=1)


GPIPE = {r: [("F", m) for m in range(2)] + [("B", m) for m in range(2)] for r in range(2)}
SWEEP = [
    {"loss weight": w, "float16: zeros": z, "float16: error": 0.1 + z}
    for w, z in ((1.0, 0.0), (1e-7, 1.0))
]
LAYERS = [
    {"layer": "0 (Linear)", "activation std": 1.0, "output gradient norm": 0.01},
    {"layer": "2 (Linear)", "activation std": 0.5, "output gradient norm": 0.3},
]

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

#: Every kind of figure the course draws, built from small results.
FIGURES = {
    "heatmap": _heatmap,
    "losses": lambda: split_display.loss_figure([1.0, 0.5], [1.0, 0.5]),
    "sequence": _sequence,
    "attacks": lambda: leakage.auc_figure({"plain": [(0.5, 0.6), (0.7, 0.9)]}),
    "schedule": lambda: schedule_display.schedule_figure({"GPipe": GPIPE}),
    "memory": lambda: schedule_display.memory_figure({"GPipe": {0: [1, 2, 0], 1: [1, 0, 0]}}),
    "buckets": lambda: schedule_display.bucket_figure(
        [[{"bucket": 0, "parameters": ["w", "b"], "numbers": 3, "bytes": 12}]]
    ),
    "sweep": lambda: precision.sweep_figure(SWEEP),
    "hooks": lambda: module_hooks.statistics_figure(LAYERS),
}


@pytest.fixture
def chinese():
    language.set_language("zh")
    yield
    language.set_language("en")


def png_text(png: bytes) -> dict[str, str]:
    """A PNG's tEXt chunks."""
    found, at = {}, 8
    while at < len(png):
        (length,), kind = struct.unpack(">I", png[at : at + 4]), png[at + 4 : at + 8]
        if kind == b"tEXt":
            key, _, value = png[at + 8 : at + 8 + length].partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return found


def drawn_words(figure) -> str:
    return " ".join(t.get_text() for t in figure.figure.findobj(display._is_text))


def test_a_font_with_chinese_glyphs_is_installed():
    assert display.chinese_font() is not None, (
        "no font with Chinese glyphs for matplotlib: install one (Debian/Ubuntu: "
        "`sudo apt-get install fonts-noto-cjk`, which `make install` does)"
    )


@pytest.mark.parametrize("kind", FIGURES)
def test_a_chinese_figure_draws_every_glyph_and_shows_the_english_data(kind, chinese):
    zh = FIGURES[kind]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        zh_png = zh.png()
    assert CJK.search(drawn_words(zh)), drawn_words(zh)
    assert CJK.search(repr(zh)) and repr(zh).startswith("[图：")
    language.set_language("en")
    en = FIGURES[kind]()
    en_png = en.png()
    assert not CJK.search(drawn_words(en) + repr(en))
    assert zh_png != en_png
    assert (
        png_text(zh_png)["Data"] == png_text(en_png)["Data"] == display.data_fingerprint(en.figure)
    )


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (
            lambda: split_display.loss_figure([1.0, 0.5], [1.0, 0.5]),
            lambda: split_display.loss_figure([1.0, 0.5], [1.0, 0.6]),
        ),
        (
            lambda: schedule_display.memory_figure({"GPipe": {0: [1, 2, 0]}}),
            lambda: schedule_display.memory_figure({"GPipe": {0: [1, 3, 0]}}),
        ),
        (
            lambda: diff_figure(param_diff({"w": torch.zeros(2)}, {"w": torch.tensor([0.0, 1.0])})),
            lambda: diff_figure(param_diff({"w": torch.zeros(2)}, {"w": torch.tensor([1.0, 0.0])})),
        ),
        (
            lambda: schedule_display.schedule_figure({"GPipe": GPIPE}),
            lambda: schedule_display.schedule_figure({"GPipe": {0: GPIPE[0]}}),
        ),
        (
            lambda: module_hooks.statistics_figure(LAYERS),
            lambda: module_hooks.statistics_figure([LAYERS[0], {**LAYERS[1], "activation std": 2}]),
        ),
    ],
)
def test_other_data_give_another_fingerprint(one, other):
    assert display.data_fingerprint(one().figure) != display.data_fingerprint(other().figure)


def test_without_a_chinese_font_a_figure_is_drawn_in_english_and_says_why(
    chinese, monkeypatch, capsys
):
    monkeypatch.setattr(display, "chinese_font", lambda: None)
    monkeypatch.setattr(display, "_said_no_font", [])
    first, second = FIGURES["losses"](), FIGURES["memory"]()
    said = capsys.readouterr().out
    assert said.count("fonts-noto-cjk") == 1 and "matplotlib" in said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first.png(), second.png()
    assert not CJK.search(drawn_words(first) + drawn_words(second))
    assert repr(first).startswith("[图：")  # its text form is still the learner's language


def test_a_font_installed_after_matplotlib_cached_its_list_is_found(monkeypatch):
    from matplotlib import font_manager

    if display.chinese_font() is None:
        pytest.skip("no Chinese font here (test_a_font_with_chinese_glyphs_is_installed fails)")
    fresh = font_manager.FontManager.__new__(font_manager.FontManager)
    fresh.__dict__ = {**font_manager.fontManager.__dict__}
    fresh.ttflist = [f for f in fresh.ttflist if f.name not in display.CHINESE_FONTS]
    monkeypatch.setattr(font_manager, "fontManager", fresh)
    display.chinese_font.cache_clear()
    try:
        assert display.chinese_font() in display.CHINESE_FONTS
    finally:
        display.chinese_font.cache_clear()


def test_a_long_chinese_title_wraps_within_the_heatmap(chinese):
    from helpers.params import _title_lines

    lines = _title_lines("改" * 60, 4.0)
    assert len(lines) > 1 and all(len(line) <= 4.0 * 11 // 2 for line in lines)
    english = _title_lines("word " * 12, 4.0)
    assert len(english) == 2 and all(len(line) <= 4.0 * 11 for line in english)
