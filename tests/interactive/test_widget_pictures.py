"""helpers.interactive.widget_pictures: the explorers' HTML panes and static SVG snapshots."""

import xml.etree.ElementTree as ET

import pytest

from helpers.interactive import widget_pictures
from helpers.interactive.explorers import explore_graph, optimizer_run
from helpers.interactive.widget_pictures import compact_png, graph_html, snapshot_svg


def test_snapshot_svg_is_one_valid_picture_with_the_text():
    result = explore_graph(detach=True)
    svg = snapshot_svg(result.code, result.graph, result.table, title="a title")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    texts = "".join(root.itertext())
    assert "a title" in texts and "h_cut = h.detach()" in texts and "shares storage with" in texts
    assert svg == snapshot_svg(result.code, result.graph, result.table, title="a title")


def test_snapshot_svg_embeds_figures_and_rejects_other_things():
    run = optimizer_run()
    svg = snapshot_svg(run.figure(), run.moves_table())
    assert "data:image/png;base64," in svg
    ET.fromstring(svg)
    with pytest.raises(TypeError, match="cannot draw an int"):
        snapshot_svg(3)


def test_compact_png_keeps_the_size_and_shrinks_the_bytes():
    png = optimizer_run().figure().png()
    small = compact_png(png)
    assert small[:8] == b"\x89PNG\r\n\x1a\n" and small[16:24] == png[16:24]
    assert len(small) < len(png) / 2


def test_without_dot_the_pictures_fall_back_to_text(monkeypatch):
    monkeypatch.setattr(widget_pictures, "dot_available", lambda: False)
    result = explore_graph()
    assert graph_html(result.graph).startswith("<pre")
    svg = snapshot_svg(result.graph)
    assert "autograd graph:" in "".join(ET.fromstring(svg).itertext())


def test_a_chinese_title_is_as_wide_as_it_is_drawn_and_set_in_a_chinese_font():
    import re

    from helpers.interactive import widget_pictures

    latin, chinese = snapshot_svg("abcd", title="abcd"), snapshot_svg("abcd", title="计算图探索器")
    width = [float(re.search(r'<svg[^>]*\bwidth="([0-9.]+)"', s)[1]) for s in (latin, chinese)]
    assert width[1] > width[0]  # six characters of two columns each: twelve columns, not six
    fonts = [f.strip() for f in widget_pictures.TEXT_FONTS.split(",")]
    assert fonts.index("Noto Sans CJK SC") < fonts.index("monospace")
    assert f'font-family="{widget_pictures.TEXT_FONTS}"' in chinese


def test_a_widgets_snapshot_carries_its_text_form_as_its_title():
    from types import SimpleNamespace

    from helpers.interactive.live import LiveWidget

    live = LiveWidget(SimpleNamespace(model_id="m"), text="Lab: lr=0.1", svg=snapshot_svg("a"))
    svg = live._repr_mimebundle_()["image/svg+xml"]
    assert svg.startswith("<svg") and "><title>Lab: lr=0.1</title><rect" in svg
