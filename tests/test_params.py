"""helpers.params: snapshots, diffs and their pictures."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.params import ParamDiff, param_diff, show_param_diff, snapshot


def model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)


def test_snapshot_is_a_detached_copy():
    m = model()
    snap = snapshot(m)
    with torch.no_grad():
        m.weight.add_(1.0)
    assert not torch.equal(snap["weight"], m.weight)
    assert not snap["weight"].requires_grad


def test_diff_reports_changed_elements_and_sizes():
    m = model()
    before = snapshot(m)
    with torch.no_grad():
        m.weight[0, 1] -= 0.5
    diff = param_diff(before, m)
    assert diff.changed == ["weight"] and diff.unchanged == ["bias"]
    assert diff["weight"].n_changed == 1
    assert diff["weight"].max_abs == pytest.approx(0.5)
    assert diff.row("weight")["elements changed"] == "1 / 6"


@settings(max_examples=25, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(1, 4), min_size=0, max_size=3), min_size=1, max_size=4),
    seed=st.integers(0, 1000),
)
def test_diff_of_a_snapshot_with_itself_is_all_unchanged(shapes, seed):
    gen = torch.Generator().manual_seed(seed)
    params = {f"p{i}": torch.randn(s, generator=gen) for i, s in enumerate(shapes)}
    diff = param_diff(snapshot(params), params)
    assert diff.changed == [] and all(c.norm == 0 for c in diff.changes)


def test_figure_and_table_are_shown_together():
    m = model()
    before = snapshot(m)
    with torch.no_grad():
        m.bias.mul_(2)
    report = show_param_diff(before, m, title="bias doubled")
    png = report.items[0].png()
    assert png.startswith(b"\x89PNG") and len(png) < 100_000
    assert report.diff.changed == ["bias"]
    assert "changed: bias" in repr(report)


def test_mismatched_models_are_named():
    with pytest.raises(ValueError, match=r"only in before: \['bias'\]; only in after: none"):
        param_diff(snapshot(model()), torch.nn.Linear(3, 2, bias=False))
    with pytest.raises(ValueError, match="has shape"):
        param_diff({"w": torch.zeros(2)}, {"w": torch.zeros(3)})


@pytest.mark.parametrize("bad", [None, 3, "weights"])
def test_snapshot_rejects_what_is_not_parameters(bad):
    with pytest.raises(TypeError, match="snapshot"):
        snapshot(bad)


def test_empty_model_is_explained():
    with pytest.raises(ValueError, match="no parameters"):
        snapshot(torch.nn.ReLU())


# --- what a learner passes in, and the messages when it is wrong ---------------------------


def test_a_tensor_a_list_and_named_pairs_are_all_accepted():
    t = torch.tensor([1.0, 2.0])
    assert list(snapshot(t)) == ["tensor"]
    assert list(snapshot([t, t])) == ["0", "1"]
    assert list(snapshot(model().named_parameters())) == ["weight", "bias"]
    assert list(snapshot([("w", t), ("b", t)])) == ["w", "b"]
    assert list(snapshot({"w": t})) == ["w"]


def test_bad_arguments_are_named_in_the_message():
    with pytest.raises(TypeError) as none:
        param_diff(None, model())
    assert str(none.value) == (
        "before is None; pass a model (nn.Module), a dict of name -> tensor, "
        "or model.named_parameters()"
    )
    with pytest.raises(TypeError) as number:
        param_diff(model(), 3)
    assert str(number.value) == (
        "after is an int; pass a model (nn.Module), a dict of name -> tensor, "
        "or model.named_parameters()"
    )
    with pytest.raises(TypeError) as text:
        snapshot("weights")
    assert str(text.value).startswith("snapshot() is a str; pass a model")
    with pytest.raises(TypeError) as element:
        param_diff({"w": torch.zeros(2)}, {"w": 0.5})
    assert str(element.value) == "after['w'] is a float, not a tensor"


def test_different_parameter_names_are_listed_on_both_sides():
    with pytest.raises(ValueError) as err:
        param_diff(
            {"w": torch.zeros(1), "b": torch.zeros(1)}, {"w": torch.zeros(1), "v": torch.zeros(1)}
        )
    assert str(err.value) == (
        "before and after name different parameters "
        "(only in before: ['b']; only in after: ['v']). "
        "Take the snapshot of the same model you compare with."
    )
    with pytest.raises(ValueError, match=r"only in before: none; only in after: \['v'\]"):
        param_diff({"w": torch.zeros(1)}, {"w": torch.zeros(1), "v": torch.zeros(1)})


def test_an_unknown_parameter_lists_the_known_ones():
    diff = param_diff(snapshot(model()), model())
    with pytest.raises(KeyError) as err:
        diff["weights"]
    assert err.value.args[0] == "no parameter 'weights'; parameters are: weight, bias"


# --- the numbers and the table ---------------------------------------------------------------


def test_table_rows_show_shape_counts_and_rounded_sizes():
    before = {"w": torch.zeros(2, 3), "s": torch.tensor(1.0)}
    after = {"w": torch.tensor([[0.0, 0.123456, 0.0], [-2.0, 0.0, 0.0]]), "s": torch.tensor(1.0)}
    diff = param_diff(before, after, title="one step")
    assert diff.title == "one step" and repr(diff).splitlines()[0] == "one step"
    assert diff.row("w") == {
        "parameter": "w",
        "shape": "[2, 3]",
        "changed": True,
        "elements changed": "2 / 6",
        "max |Δ|": 2.0,
        "norm of Δ": 2.0,
    }
    assert diff.row("s")["shape"] == "scalar" and diff.row("s")["changed"] is False


def test_an_empty_parameter_changes_nothing():
    diff = param_diff({"e": torch.zeros(0)}, {"e": torch.zeros(0)})
    assert diff["e"].max_abs == 0.0 and diff["e"].norm == 0.0 and diff.unchanged == ["e"]


def test_changes_are_measured_in_float64():
    # in float16 the difference 60000 - (-60000) overflows to inf
    before = {"h": torch.tensor([-60000.0], dtype=torch.float16)}
    after = {"h": torch.tensor([60000.0], dtype=torch.float16)}
    assert param_diff(before, after)["h"].max_abs == 120000.0


# --- the heatmaps --------------------------------------------------------------------------


def _inches(fig, bbox_in_pixels):
    return bbox_in_pixels.transformed(fig.dpi_scale_trans.inverted())


def _layout(figure):
    """The figure's parts in inches from its bottom-left corner: (heatmaps, labels, bar, title)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox

    fig = figure.figure
    renderer = FigureCanvasAgg(fig).get_renderer()
    grid = fig.axes[0]
    grid.apply_aspect()
    to_inches = grid.transData + fig.dpi_scale_trans.inverted()
    heatmaps = []
    for image in grid.images:
        left, right, bottom, top = image.get_extent()
        heatmaps.append(Bbox(to_inches.transform([(left, bottom), (right, top)])))
    labels = [_inches(fig, t.get_window_extent(renderer)) for t in grid.texts]
    bar = fig.axes[1].get_position().transformed(fig.transFigure)
    title = _inches(fig, fig._suptitle.get_window_extent(renderer))
    everything = _inches(fig, fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans))
    return heatmaps, labels, _inches(fig, bar), title, everything


def five_parameters():
    before = {f"p{i}": torch.zeros(2, 3) for i in range(5)}
    after = {name: t.clone() for name, t in before.items()}
    after["p1"][0, 0] = 0.5
    after["p4"][1, 2] = -2.0
    return param_diff(before, after)


def test_heatmaps_fill_rows_of_four_without_overlapping():
    from helpers.params import diff_figure

    figure = diff_figure(five_parameters())
    heatmaps, labels, bar, title, everything = _layout(figure)
    width, height = figure.figure.get_size_inches()
    assert len(heatmaps) == 5
    first_row, second_row = heatmaps[:4], heatmaps[4:]
    assert len({round(h.y0, 6) for h in first_row}) == 1 and second_row[0].y1 < first_row[0].y0
    assert round(first_row[0].x0, 6) == round(second_row[0].x0, 6)  # columns line up
    for k, h in enumerate(heatmaps):
        assert 0 < h.x0 < h.x1 < width and 0 < h.y0 < h.y1 < height
        assert (round(h.width, 6), round(h.height, 6)) == (
            round(first_row[0].width, 6),
            round(first_row[0].height, 6),
        )
        assert all(not h.overlaps(other) for other in heatmaps[k + 1 :])
        # its label is centred just above it and clear of every heatmap
        assert labels[k].x0 + labels[k].x1 == pytest.approx(h.x0 + h.x1)
        assert h.y1 < labels[k].y0 < h.y1 + 0.1
        assert all(not labels[k].overlaps(other) for other in heatmaps)
    # the colour bar stands right of the heatmaps, centred on their height, 85% as tall
    assert max(h.x1 for h in heatmaps) < bar.x0 < bar.x1 < width
    lowest, highest = min(h.y0 for h in heatmaps), max(h.y1 for h in heatmaps)
    assert (bar.y0 + bar.y1) / 2 == pytest.approx((lowest + highest) / 2)
    assert bar.height == pytest.approx(0.85 * (highest - lowest))
    # the title is above every label, and nothing is cut off or leaves an empty band
    assert title.y0 > max(label.y1 for label in labels) and title.y1 < height
    assert 0 <= everything.x0 and everything.x1 <= width
    assert 0 <= everything.y0 and everything.y1 <= height
    assert max(everything.x0, everything.y0, width - everything.x1, height - everything.y1) < 0.35


def test_heatmap_labels_count_the_changed_elements():
    from helpers.params import diff_figure

    figure = diff_figure(five_parameters(), columns=2)
    texts = [t.get_text() for t in figure.figure.axes[0].texts]
    assert texts == [f"p{i}\n{int(i in (1, 4))}/6 changed" for i in range(5)]
    heatmaps, *_ = _layout(figure)
    assert len({round(h.x0, 6) for h in heatmaps}) == 2  # two columns, three rows
    assert len({round(h.y0, 6) for h in heatmaps}) == 3
    assert repr(figure) == "[figure: Δ heatmaps; changed: p1, p4]"


def test_every_heatmap_shares_one_symmetric_colour_scale_with_white_at_zero():
    from helpers.params import diff_figure

    fig = diff_figure(five_parameters()).figure
    grid, bar = fig.axes
    assert {(im.norm.vmin, im.norm.vmax) for im in grid.images} == {(-2.0, 2.0)}
    assert bar.get_ylim() == (-2.0, 2.0) and bar.get_ylabel() == "Δ = after − before"
    image = grid.images[0]
    white, red, blue = (image.cmap(image.norm(v)) for v in (0.0, 2.0, -2.0))
    assert min(white[:3]) > 0.95
    assert red[0] > 2 * red[2] and blue[2] > 2 * blue[0]  # Δ > 0 red, Δ < 0 blue
    # each heatmap has a thin unfilled frame exactly around it
    for image, frame in zip(grid.images, grid.patches, strict=True):
        left, right, bottom, top = image.get_extent()
        assert not frame.get_fill()
        assert frame.get_bbox().bounds == pytest.approx((left, bottom, right - left, top - bottom))


def test_nothing_changed_gives_a_scale_of_plus_minus_one():
    from helpers.params import diff_figure

    m = model()
    figure = diff_figure(param_diff(snapshot(m), m))
    assert figure.figure.axes[1].get_ylim() == (-1.0, 1.0)
    assert repr(figure) == "[figure: Δ heatmaps; changed: none]"


def test_a_heatmap_has_one_row_per_output_unit():
    from helpers.params import diff_figure

    shapes = {"scalar": [], "bias": [3], "weight": [2, 3], "conv": [2, 1, 3, 3]}
    params = {name: torch.zeros(shape) for name, shape in shapes.items()}
    fig = diff_figure(param_diff(params, params)).figure
    assert [im.get_array().shape for im in fig.axes[0].images] == [(1, 1), (1, 3), (2, 3), (2, 9)]


def test_one_heatmap_gets_a_narrow_figure_and_a_wrapped_title():
    from helpers.params import diff_figure

    one = param_diff({"w": torch.zeros(2)}, {"w": torch.ones(2)})
    assert diff_figure(one).figure._suptitle.get_text() == "Parameter change (white: unchanged)"
    long_title = "after one step of SGD with a learning rate of 0.1 on the squared error loss"
    figure = diff_figure(one, title=long_title)
    lines = figure.figure._suptitle.get_text().split("\n")
    assert " ".join(lines) == long_title and len(lines) == 2
    heatmaps, labels, bar, title, everything = _layout(figure)
    width, height = figure.figure.get_size_inches()
    assert 0 < title.x0 < title.x1 < width and title.y0 > labels[0].y1
    assert max(everything.x0, everything.y0, height - everything.y1) < 0.35
    # no room kept for a second row or column: the heatmap sits by the bottom and the bar
    assert heatmaps[0].y0 < 0.5 and bar.x0 - heatmaps[0].x1 < 0.5
    assert 0 < width - everything.x1 < 0.5  # room for the colour bar's widest tick label


def test_an_empty_diff_draws_only_the_title():
    from helpers.params import ParamDiff, diff_figure

    figure = diff_figure(ParamDiff([]))
    assert len(figure.figure.axes) == 1 and not figure.figure.axes[0].images
    assert repr(figure) == "[figure: Δ heatmaps; changed: none]"


def test_the_png_is_the_figure_at_72_dpi_without_a_crop():
    import struct

    from helpers.params import diff_figure

    figure = diff_figure(five_parameters())
    png = figure.png()
    size = struct.unpack(">II", png[16:24])
    width, height = figure.figure.get_size_inches()
    assert size == (int(width * 72), int(height * 72))


def test_the_report_passes_the_title_to_figure_and_table():
    m = model()
    before = snapshot(m)
    report = show_param_diff(before, m, title="nothing moved")
    assert report.diff.title == "nothing moved"
    assert report.items[0].figure._suptitle.get_text() == "nothing moved"
    assert report.items[1] is report.diff


def test_a_redrawn_heatmap_figure_is_the_picture_a_new_one_would_be():
    """The optimizer lab redraws its heatmaps in place; the pixels must be a fresh figure's."""
    from helpers.interactive.explorers import optimizer_run
    from helpers.interactive.widget_pictures import widget_png
    from helpers.params import redraw_diff_figure

    first, second = optimizer_run("SGD", 0.01), optimizer_run("Adam", 0.1, False)
    shown = first.figure()
    widget_png(shown)  # drawn once, as the lab shows it
    assert redraw_diff_figure(shown, second.diff, second.figure_title())
    fresh = optimizer_run("Adam", 0.1, False).figure()
    assert widget_png(shown) == widget_png(fresh)
    assert shown.description == fresh.description


def test_a_redraw_moves_the_shared_colour_scale_once():
    """The norm is shared by every heatmap and the colour bar; each change of it makes the colour
    bar recompute itself, so a redraw changes both limits in one step."""
    from helpers.params import diff_figure, param_diff, redraw_diff_figure

    before = {"w": torch.zeros(2, 3)}
    shown = diff_figure(param_diff(before, {"w": torch.ones(2, 3)}))
    norm = shown.figure.axes[0].images[0].norm
    changes = []
    norm.callbacks.connect("changed", lambda *_: changes.append((norm.vmin, norm.vmax)))
    assert redraw_diff_figure(shown, param_diff(before, {"w": 3 * torch.ones(2, 3)}))
    assert changes == [(-3.0, 3.0)]
    assert shown.figure.axes[1].get_ylim() == (-3.0, 3.0)


def test_a_figure_of_other_parameters_is_not_redrawn_in_place():
    from helpers.interactive.explorers import optimizer_run
    from helpers.params import diff_figure, param_diff, redraw_diff_figure

    shown = optimizer_run().figure()
    other = param_diff({"w": torch.zeros(2, 2)}, {"w": torch.ones(2, 2)})
    assert not redraw_diff_figure(shown, other)
    long_title = "a title long enough to need more lines than the lab's own title does " * 3
    assert not redraw_diff_figure(shown, optimizer_run().diff, long_title)
    small = diff_figure(other)
    doubled = param_diff({"w": torch.zeros(2, 2)}, {"w": 2 * torch.ones(2, 2)})
    assert redraw_diff_figure(small, doubled)


def test_a_redraw_keeps_the_default_title_and_says_when_nothing_changed():
    from helpers.interactive.widget_pictures import widget_png
    from helpers.params import diff_figure, param_diff, redraw_diff_figure

    before = {"w": torch.zeros(2, 3), "b": torch.zeros(3)}
    moved = param_diff(before, {"w": torch.ones(2, 3), "b": torch.zeros(3)})
    still = param_diff(before, {k: v.clone() for k, v in before.items()})
    shown = diff_figure(moved)
    widget_png(shown)
    assert redraw_diff_figure(shown, still)  # default title, nothing changed
    fresh = diff_figure(still)
    assert widget_png(shown) == widget_png(fresh)
    assert shown.description == fresh.description == "Δ heatmaps; changed: none"


def test_a_redraw_refuses_other_shapes_and_an_empty_diff():
    from helpers.params import diff_figure, param_diff, redraw_diff_figure

    shown = diff_figure(param_diff({"w": torch.zeros(2, 3)}, {"w": torch.ones(2, 3)}))
    other_shape = param_diff({"w": torch.zeros(3, 2)}, {"w": torch.ones(3, 2)})
    assert not redraw_diff_figure(shown, other_shape)
    empty = ParamDiff([], title=None)
    assert not redraw_diff_figure(diff_figure(empty), empty)


def test_a_redraw_keeps_a_title_of_several_lines():
    from helpers.interactive.widget_pictures import widget_png
    from helpers.params import diff_figure, param_diff, redraw_diff_figure

    title = "a long title that the figure wraps onto more than one line, " * 2
    before = {"w": torch.zeros(2, 3)}
    shown = diff_figure(param_diff(before, {"w": torch.ones(2, 3)}), title=title)
    widget_png(shown)
    later = param_diff(before, {"w": -torch.ones(2, 3)})
    assert redraw_diff_figure(shown, later, title)
    assert widget_png(shown) == widget_png(diff_figure(later, title=title))


def test_a_figure_title_wraps_at_its_width_a_chinese_one_at_half():
    """TITLE_CHARS_PER_INCH Latin characters an inch; a title that is mostly Chinese (over a
    third of its characters wide) gets half as many, and never fewer than 8."""
    from helpers import params

    per_inch = params.TITLE_CHARS_PER_INCH
    english = "how far each parameter moved in one optimizer step " * 2
    assert max(map(len, params._title_lines(english, 5))) <= 5 * per_inch
    assert max(map(len, params._title_lines(english, 5))) > 5 * per_inch // 2
    chinese = "每个参数在一次优化器更新中移动了多少" * 3
    assert len(params._title_lines(chinese, 5)[0]) == 5 * per_inch // 2
    assert len(params._title_lines(chinese, 1)[0]) == 8  # the floor
    third = "中ab" * 10  # exactly a third wide: still Latin's width
    assert len(params._title_lines(third, 1)[0]) == per_inch
    between = "中中abcde" * 6  # wide, but under a third
    assert len(params._title_lines(between, 1)[0]) == per_inch
