"""helpers.widget_pictures: the explorers' HTML panes and static SVG snapshots."""

import xml.etree.ElementTree as ET

import pytest

from helpers import widget_pictures
from helpers.explorers import explore_graph, optimizer_run
from helpers.widget_pictures import compact_png, graph_html, snapshot_svg


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
    with pytest.raises(TypeError, match="cannot draw a int"):
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
