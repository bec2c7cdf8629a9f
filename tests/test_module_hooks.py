"""helpers.module_hooks: the table of hooks in the order they ran, and per-layer statistics."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.module_hooks import event_table, layer_statistics, statistics_figure


def test_the_event_table_numbers_the_hooks_and_names_the_pass():
    table = event_table([("forward hook", "0 (Linear)"), ("tensor hook", "0 (Linear)")])
    assert table.columns == ["#", "pass", "hook", "on"]
    assert [r["pass"] for r in table.rows] == ["forward", "backward"] and table.rows[1]["#"] == 2


def test_layer_statistics_come_from_the_hooks():
    torch.manual_seed(0)
    deep = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    rows = layer_statistics(deep, x, y)
    assert [r["layer"] for r in rows] == ["0 (Linear)", "2 (Linear)"]
    hidden = deep[0](x).detach()
    assert rows[0]["activation std"] == pytest.approx(float(hidden.std()))
    out = deep(x).detach().requires_grad_()
    nn.functional.mse_loss(out, y).backward()
    assert rows[1]["output gradient norm"] == pytest.approx(float(out.grad.norm()))
    assert not deep[0]._forward_hooks
    figure = statistics_figure(rows)
    assert repr(figure).startswith("[figure: per-layer statistics from hooks")


def test_the_figure_shows_both_statistics_per_layer():
    rows = [
        {"layer": "0 (Linear)", "activation std": 0.5, "output gradient norm": 0.01},
        {"layer": "2 (Linear)", "activation std": 0.3, "output gradient norm": 0.2},
        {"layer": "4 (Linear)", "activation std": 0.1, "output gradient norm": 0.4},
    ]
    figure = statistics_figure(rows)
    assert repr(figure) == (
        "[figure: per-layer statistics from hooks: output gradient norm 0.01 at layer 0, "
        "0.4 at layer 4]"
    )
    left, right = figure.figure.axes
    assert (left.get_ylabel(), right.get_ylabel()) == ("activation std", "output gradient norm")
    assert right.get_yscale() == "log" and left.get_yscale() == "linear"
    assert left.get_xlabel() == right.get_xlabel() == "layer (module name)"
    assert [t.get_text() for t in left.get_xticklabels()] == ["0", "2", "4"]
    assert [p.get_height() for p in left.patches] == [0.5, 0.3, 0.1]
    assert [p.get_height() for p in right.patches] == [0.01, 0.2, 0.4]
    assert left.get_position().x0 < right.get_position().x0  # side by side
