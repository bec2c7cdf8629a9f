"""helpers.memory: saved tensors in exact bytes, from the graph and from saved-tensor hooks."""

import pytest
import torch
from torch import nn

from helpers.memory import (
    SavedTensor,
    saved_in_graph,
    saved_table,
    saved_tensor_bytes,
    track_saved,
    unique_bytes,
)
from tests.support.torch_threads import one_thread  # noqa: F401 (autouse fixture)


def mlp(width: int, depth: int) -> nn.Sequential:
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])


def test_exp_saves_its_result_and_backward_frees_it():
    v = torch.ones(1000, requires_grad=True)
    out = v.exp().sum()
    saved = saved_in_graph(out)
    assert [(s.function, s.slot, s.shape, s.dtype, s.nbytes) for s in saved] == [
        ("ExpBackward0", "result", (1000,), "float32", 4000)
    ]
    out.backward()
    assert saved_in_graph(out) == []


def test_one_storage_saved_twice_counts_once():
    v = torch.ones(10, requires_grad=True)
    saved = saved_in_graph(v * v)
    assert len(saved) == 2 and saved[0].storage == saved[1].storage
    assert unique_bytes(saved) == 40


def test_a_saved_view_keeps_its_whole_storage():
    base = torch.ones(100)
    w = torch.ones(10, requires_grad=True)
    (saved,) = saved_in_graph(w * base[:10])  # MulBackward0 saves the view base[:10] for w's grad
    assert saved.shape == (10,) and saved.nbytes == 400


def test_known_tensors_are_named_and_excluded_from_activations():
    torch.manual_seed(0)
    model = mlp(4, 2)
    x = torch.randn(3, 4)
    saved = saved_in_graph(model(x).sum(), known={"x": x, **dict(model.named_parameters())})
    owners = {(s.function, s.slot): s.owner for s in saved}
    assert ("AddmmBackward0", "mat2") in owners and "2.weight" in owners.values()
    assert "x" in owners.values()
    assert unique_bytes(saved, activations_only=True) == 2 * 3 * 4 * 4  # two ReLU outputs
    assert unique_bytes(saved) == (2 * 3 * 4 + 3 * 4 + 4 * 4) * 4  # + x + the second weight


def test_module_as_known_names_parameters():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    x = torch.randn(5, 3, requires_grad=True)
    owners = {s.slot: s.owner for s in saved_in_graph(model(x), known=model)}
    assert owners == {"mat1": None, "mat2": "weight"}


def test_bad_known_says_what_to_pass():
    v = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"a dict of name -> tensor, or model\.named_parameters"):
        saved_in_graph(v.exp(), known=3)
    with pytest.raises(TypeError, match=r"known\['v'\] is an int"):
        saved_in_graph(v.exp(), known={"v": 3})


def test_table_new_bytes_sum_to_the_total():
    torch.manual_seed(0)
    model = mlp(8, 2)
    x = torch.randn(4, 8)
    saved = saved_in_graph(model(x).sum(), known={"x": x})
    table = saved_table(saved, title="t")
    total = sum(int(b.replace(",", "")) for b in table.column("new bytes"))
    assert total == unique_bytes(saved)
    assert table.column("saved by")[:2] == ["ReluBackward0", "AddmmBackward0"]
    assert f"total {total:,} bytes" in table.note and "held by the graph only" in table.note
    assert set(table.column("held by")) >= {"x", "graph only"}


def test_tracking_follows_retain_graph_backward_and_del():
    torch.manual_seed(0)
    model = mlp(16, 2)
    x = torch.randn(8, 16)
    known = {"x": x, **dict(model.named_parameters())}
    with track_saved(known) as log:
        out = model(x).sum()
    activations = 2 * 8 * 16 * 4
    assert log.alive_bytes(activations_only=True) == activations
    assert log.alive_bytes() == unique_bytes(saved_in_graph(out, known=known))
    out.backward(retain_graph=True)
    assert log.alive_bytes(activations_only=True) == activations
    assert set(log.unpacks) == {2}  # read once by saved_in_graph, once by backward
    out.backward()
    assert log.alive() == [] and log.alive_bytes() == 0
    assert log.packed_bytes(activations_only=True) == activations  # the history stays

    with track_saved(known) as log:
        out = model(x).sum()
    out.backward(retain_graph=True)
    assert log.alive_bytes(activations_only=True) == activations
    del out
    assert log.alive_bytes() == 0


def test_tracking_does_not_change_gradients():
    torch.manual_seed(0)
    model = mlp(6, 2)
    x = torch.randn(5, 6)
    model(x).pow(2).sum().backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with track_saved():
        out = model(x).pow(2).sum()
    out.backward()
    for a, p in zip(plain, model.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad)


def test_a_known_storage_keeps_its_number_across_forward_passes():
    w = torch.ones(3, requires_grad=True)
    x = torch.full((3,), 2.0)
    with track_saved({"x": x}) as log:
        (w * x).sum().backward()
        (w * x).sum().backward()
    assert [r.owner for r in log.records] == ["x", "x"]
    assert log.records[0].storage == log.records[1].storage
    assert log.packed_bytes() == 12


def test_saved_tensor_bytes_counts_a_forward_pass():
    v = torch.ones(1000, requires_grad=True)
    assert saved_tensor_bytes(lambda: v * v) == {
        "tensors": 2,
        "storages": 1,
        "bytes": 4000,
        "activation bytes": 4000,
    }
    assert saved_tensor_bytes(lambda: v * v, known={"v": v})["activation bytes"] == 0
    assert saved_tensor_bytes(lambda: v.sum())["bytes"] == 0


def test_post_network_saves_six_tensors_and_backward_frees_all():
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2, 2))
    x = torch.ones(1, 1, 3, 3)
    loss = nn.functional.mse_loss(net(x), torch.zeros(1, 2))
    assert len(saved_in_graph(loss)) == 6
    loss.backward()
    assert saved_in_graph(loss) == []


def test_saved_table_text_a_learner_reads():
    w = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    x = torch.full((3,), 2.0)
    loss = (w * x).exp().sum()
    table = saved_table(saved_in_graph(loss, known={"x": x}), title="w * x, then exp")
    assert repr(table) == "\n".join(
        [
            "w * x, then exp",
            "saved by      slot    shape   dtype    storage  new bytes  held by",
            "------------  ------  ------  -------  -------  ---------  ----------",
            "ExpBackward0  result  [2, 3]  float32  #0       24         graph only",
            "MulBackward0  other   [3]     float32  #1       12         x",
            "total 36 bytes in 2 storages; 24 bytes held by the graph only",
        ]
    )


def test_tracked_records_have_no_function_so_the_table_shows_question_marks():
    w = torch.ones(2, 3, requires_grad=True)
    x = torch.full((3,), 2.0, dtype=torch.float64)
    with track_saved({"x": x}) as log:
        (w * x).sum()
    assert log.records == [SavedTensor((3,), "float64", 24, 0, "x")]
    assert saved_table(log.records).rows == [
        {
            "saved by": "?",
            "slot": "?",
            "shape": "[3]",
            "dtype": "float64",
            "storage": "#0",
            "new bytes": "24",
            "held by": "x",
        }
    ]


def test_storages_are_numbered_from_zero_in_the_order_first_saved():
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    with track_saved() as log:
        out = (a * a).sum() * (b * b).sum()
    assert [r.storage for r in log.records] == [0, 0, 1, 1, 2, 3]
    assert [s.storage for s in saved_in_graph(out)] == [0, 1, 2, 2, 3, 3]


def test_tensors_without_a_storage_each_count_alone_at_their_dense_size():
    s = torch.tensor([[0.0, 2.0], [0.0, 0.0]]).to_sparse()
    d = torch.ones(2, 3, requires_grad=True)
    out = torch.sparse.mm(s, d) + torch.sparse.mm(s * 1, d)
    saved = saved_in_graph(out)
    assert [(x.slot, x.nbytes, x.storage) for x in saved] == [("mat1", 16, 0), ("mat1", 16, 1)]
    assert saved_tensor_bytes(lambda: torch.sparse.mm(s, d))["bytes"] == 16
    empty = torch.ones(0, requires_grad=True)
    assert [x.storage for x in saved_in_graph(empty * empty)] == [0, 1]


def test_bad_known_message_shows_an_example():
    with pytest.raises(TypeError) as err:
        with track_saved(known=1):
            pass
    assert str(err.value) == (
        "known is an int; pass a model (nn.Module), a dict of name -> tensor, or "
        "model.named_parameters(); e.g. known={'x': x, **dict(model.named_parameters())}"
    )


def test_a_models_buffers_are_known_too():
    norm = nn.BatchNorm1d(3)  # in training it saves its running statistics for backward
    x = torch.arange(12.0).reshape(4, 3).requires_grad_()
    owners = {s.slot: s.owner for s in saved_in_graph(norm(x).sum(), known=norm)}
    assert owners["running_mean"] == "running_mean" and owners["running_var"] == "running_var"
    assert owners["weight"] == "weight" and owners["input"] is None
