"""helpers.params: snapshots, diffs and their pictures."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.params import param_diff, show_param_diff, snapshot


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
