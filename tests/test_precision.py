"""helpers.precision: the formats' ranges, gradients under autocast, and GradScaler's traps."""

from __future__ import annotations

import pytest
import torch

from helpers.precision import (
    LOSS_WEIGHTS,
    SCALE,
    autocast_dtypes,
    autocast_grads,
    clip_in_order,
    format_table,
    precision_sweep,
    relative_error,
    scaler_steps,
    small_network,
    sweep_figure,
    underflow_share,
)


def test_the_format_table_is_torch_finfo():
    table = format_table()
    assert [r["dtype"] for r in table.rows] == ["float32", "float16", "bfloat16"]
    half = table.row("float16")
    assert half["bits"] == 16 and half["largest"] == "6.55e+04"
    assert half["smallest normal"] == "6.1e-05" and half["smallest subnormal"] == "5.96e-08"
    assert table.row("bfloat16")["smallest subnormal"] == "9.18e-41"
    assert table.row("float32")["eps (precision)"] == "1.19e-07"


def test_the_network_and_batch_are_seeded():
    a, b = small_network(), small_network()
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
    assert all(torch.equal(p, q) for p, q in zip(a[0].parameters(), b[0].parameters(), strict=True))
    assert a[1].shape == (64, 16) and not torch.equal(a[1], small_network(seed=1)[1])


def test_autocast_grads_divide_the_scale_out_and_keep_float32_grads():
    net, x, y = small_network()
    plain = autocast_grads(net, x, y)
    scaled = autocast_grads(net, x, y, scale=SCALE)
    for name, g in plain.items():
        torch.testing.assert_close(scaled[name], g)  # float32: scaling is exact, and divided out
    half = autocast_grads(net, x, y, dtype=torch.float16)
    assert all(g.dtype == torch.float32 for g in half.values())
    assert 0 < relative_error(half, plain) < 0.01  # float16: close, not equal
    weighted = autocast_grads(net, x, y, loss_weight=0.5)
    torch.testing.assert_close(weighted["0.weight"], 0.5 * plain["0.weight"])


def test_underflow_share_and_relative_error_count_what_they_say():
    ref = {"a": torch.tensor([1.0, 2.0, 0.0, 4.0])}
    assert underflow_share({"a": torch.tensor([1.0, 0.0, 0.0, 0.0])}, ref) == 0.5
    assert underflow_share(ref, ref) == 0 and relative_error(ref, ref) == 0
    two = {"a": ref["a"], "b": torch.tensor([3.0, 4.0])}
    off = {"a": ref["a"], "b": torch.tensor([3.0, 4.0]) * 1.5}
    assert relative_error(off, two) == pytest.approx(0.5)
    assert underflow_share({"a": ref["a"], "b": torch.zeros(2)}, two) == pytest.approx(2 / 6)


def test_the_sweep_shows_float16_underflow_and_the_cures():
    rows = precision_sweep()
    assert [r["loss weight"] for r in rows] == list(LOSS_WEIGHTS)
    zeros = [r["float16: zeros"] for r in rows]
    assert zeros[0] == 0 and zeros[-1] == 1.0 and zeros == sorted(zeros)
    assert all(r["float16 × scale: zeros"] == 0 == r["bfloat16: zeros"] for r in rows)
    assert all(r["float16 × scale: error"] < 0.01 for r in rows)
    assert rows[-1]["float16: error"] == pytest.approx(1.0)  # all zero: 100% error
    figure = sweep_figure(rows)
    assert "float16 100% zeros" in repr(figure) and "bfloat16 0% zeros" in repr(figure)


def test_clipping_before_unscale_shrinks_the_step_by_the_scale():
    right, wrong = clip_in_order("unscale_, then clip"), clip_in_order("clip, then unscale_")
    assert right["norm stepped with"] == pytest.approx(0.25, rel=1e-4)
    assert right["weights moved"] == pytest.approx(0.1 * 0.25, rel=1e-4)  # lr × the clipped norm
    assert wrong["norm the clip saw"] == pytest.approx(right["norm the clip saw"] * SCALE, rel=1e-2)
    assert wrong["norm stepped with"] == pytest.approx(0.25 / SCALE, rel=1e-3)
    unclipped = clip_in_order("unscale_, then clip", max_norm=10.0)
    assert unclipped["norm stepped with"] == pytest.approx(unclipped["norm the clip saw"])
    with pytest.raises(ValueError, match="order must be one of"):
        clip_in_order("clip")


def test_an_overflowing_step_is_skipped_and_the_scale_halves():
    _, x, y = small_network()
    outlier = x.clone()
    outlier[0, 0] = 1e5
    run = scaler_steps([(x, y), (outlier, y), (x, y)])
    assert [r["gradients finite"] for r in run] == [True, False, True]
    assert [r["weights moved"] for r in run] == [True, False, True]
    assert [r["scale used"] for r in run] == [SCALE, SCALE, SCALE / 2]
    assert run[1]["scale after"] == SCALE / 2 and run[0]["step"] == 1
    assert run[2]["loss"] < run[0]["loss"]
    first = float(torch.nn.functional.mse_loss(small_network()[0](x), y).detach())
    assert run[0]["loss"] == pytest.approx(first, rel=1e-2)  # the seeded network, in float16


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"dtype": torch.float64}, "dtype must be"), ({"scale": 0}, "scale must be a positive")],
)
def test_bad_arguments_say_what_to_pass(kwargs, match):
    net, x, y = small_network()
    with pytest.raises(ValueError, match=match):
        autocast_grads(net, x, y, **kwargs)


def test_the_sweep_figure_has_a_line_per_way_on_log_axes():
    rows = [
        {"loss weight": 1.0, "a: zeros": 0.0, "a: error": 0.01, "b: zeros": 0.0, "b: error": 0.1},
        {"loss weight": 0.1, "a: zeros": 0.5, "a: error": 0.5, "b: zeros": 0.0, "b: error": 0.1},
    ]
    figure = sweep_figure(rows)
    assert repr(figure) == (
        "[figure: gradients under autocast; at weight 0.1: a 50% zeros, b 0% zeros]"
    )
    zeros, errors = figure.figure.axes
    assert [line.get_label() for line in zeros.get_lines()] == ["a", "b"]
    assert list(zeros.get_lines()[0].get_ydata()) == [0.0, 0.5]
    assert list(errors.get_lines()[1].get_ydata()) == [0.1, 0.1]
    assert list(zeros.get_lines()[0].get_xdata()) == [1.0, 0.1]
    assert zeros.get_xscale() == errors.get_xscale() == errors.get_yscale() == "log"
    assert zeros.get_yscale() == "linear" and zeros.xaxis_inverted() and errors.xaxis_inverted()
    assert zeros.get_ylabel() == "share of gradient entries = 0"
    assert errors.get_ylabel() == "largest relative error"
    assert zeros.get_xlabel() == "loss weight (gradients this much smaller)"
    assert zeros.get_legend() is not None and errors.get_legend() is None


def test_the_network_is_three_linear_layers_and_the_data_come_from_their_own_generator():
    net, x, y = small_network()
    assert [type(m).__name__ for m in net] == ["Linear", "Tanh", "Linear", "Tanh", "Linear"]
    gen = torch.Generator().manual_seed(0)
    assert torch.equal(x, torch.randn(64, 16, generator=gen))
    assert torch.equal(y, torch.randn(64, 1, generator=gen))


def test_float32_gradients_are_the_plain_backwards():
    net, x, y = small_network()
    grads = autocast_grads(net, x, y, loss_weight=0.5)
    net.zero_grad()
    (0.5 * torch.nn.functional.mse_loss(net(x), y)).backward()
    for name, p in net.named_parameters():
        assert torch.equal(grads[name], p.grad)


def test_the_clip_sees_the_float16_gradient_of_the_seeded_network():
    net, x, y = small_network()
    half = autocast_grads(net, x, y, dtype=torch.float16)
    norm = float(torch.cat([g.flatten() for g in half.values()]).norm())
    seen = clip_in_order("unscale_, then clip")["norm the clip saw"]
    assert seen == pytest.approx(norm, rel=1e-4)  # float16 autocast, seed 0
    other = small_network(seed=1)
    assert clip_in_order("unscale_, then clip", seed=1)["norm the clip saw"] != pytest.approx(seen)
    assert other[1].shape == x.shape


def test_the_sweep_figure_puts_its_panels_side_by_side_with_the_weights_on_x():
    rows = [
        {"loss weight": w, "a: zeros": z, "a: error": e}
        for w, z, e in ((1.0, 0.0, 0.1), (0.1, 0.2, 0.2), (0.01, 0.9, 0.9))
    ]
    figure = sweep_figure(rows)
    zeros, errors = figure.figure.axes
    assert zeros.get_position().x0 < errors.get_position().x0
    assert list(errors.get_lines()[0].get_xdata()) == [1.0, 0.1, 0.01]
    assert repr(figure).endswith("at weight 0.01: a 90% zeros]")


def test_autocast_dtypes_records_each_call_as_it_ran():
    net, x, y = small_network()
    rows = autocast_dtypes(net, x, y).rows
    assert [r["operation"] for r in rows] == ["linear", "tanh"] * 2 + ["linear", "mse_loss"]
    assert rows[0] == {"operation": "linear", "arguments": "float32, float32, float32",
                       "result": "float16"}  # fmt: skip
    assert rows[2]["arguments"] == "float16, float32, float32"  # the activation stays float16
    assert [r["result"] for r in rows] == ["float16"] * 5 + ["float32"]
    assert {r["result"] for r in autocast_dtypes(net, x, y, dtype=torch.bfloat16).rows[:5]} == {
        "bfloat16"
    }
    assert net(x).dtype == torch.float32  # autocast ends with the call
    table = autocast_dtypes(net, x, y)
    assert table.columns == ["operation", "arguments", "result"]


def test_autocast_dtypes_needs_a_lower_precision():
    net, x, y = small_network()
    with pytest.raises(ValueError, match=r"torch\.float16 or torch\.bfloat16"):
        autocast_dtypes(net, x, y, dtype=torch.float32)


def test_autocast_dtypes_passes_keyword_arguments_on():
    class RowSums(torch.nn.Module):
        def forward(self, x):
            return torch.sum(x, dim=1, keepdim=True)  # keywords decide the shape: (64, 1)

    _, x, y = small_network()
    rows = autocast_dtypes(RowSums(), x, y).rows
    assert [(r["operation"], r["result"]) for r in rows] == [
        ("sum", "float32"),  # on neither list: the dtype it was given
        ("mse_loss", "float32"),
    ]


def test_the_scaled_way_is_named_in_the_learners_language():
    """Its rows keep the key "float16 × scale" (the cells compare it); the legend and the text
    form say it in the learner's language, the other ways stay dtype names."""
    from helpers import language

    rows = [
        {"loss weight": 1.0, "float16: zeros": 0.0, "float16: error": 0.2,
         "float16 × scale: zeros": 0.0, "float16 × scale: error": 0.01},
    ]  # fmt: skip
    english = sweep_figure(rows)
    assert [line.get_label() for line in english.figure.axes[0].get_lines()] == [
        "float16", "float16 × scale"
    ]  # fmt: skip
    language.set_language("zh")
    try:
        chinese = sweep_figure(rows)
    finally:
        language.set_language("en")
    assert "float16 × 缩放因子 0% 为零" in repr(chinese)
    labels = [line.get_label() for line in chinese.figure.axes[0].get_lines()]
    assert labels == ["float16", "float16 × 缩放因子"]  # the CJK font is installed (make install)
