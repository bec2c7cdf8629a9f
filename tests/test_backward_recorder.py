"""helpers.backward_recorder: a backward pass recorded node by node, and the stepper's frames."""

import pytest
import torch

from helpers.backward_recorder import backward_frame, default_backward_example, record_backward

DEFAULT_ORDER = [
    ("SumBackward0", "loss"),
    ("PowBackward0", ""),
    ("AddBackward0", "h"),
    ("AccumulateGrad", "b"),
    ("MulBackward0", ""),
    ("AccumulateGrad", "w"),
]


def default_record(retain_graph=False):
    root, params = default_backward_example()
    return record_backward(root, params, retain_graph=retain_graph)


def test_recorded_order_is_the_engines():
    record = default_record()
    assert [(s.name, s.gradient_of) for s in record.steps] == DEFAULT_ORDER
    assert [s.received for s in record.steps] == [
        "[1]",
        "[1, 1, 1]",
        "[3, -2, 14]",
        "[15]",
        "[3, -2, 14]",
        "[3, -4, 42]",
    ]
    assert [s.index for s in record.steps] == list(range(1, 7))


def test_recorded_order_runs_every_node_after_all_its_consumers():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    x = torch.ones(2, 3, requires_grad=True)
    loss = (net(x) * net(x)).sum()  # the network used twice: nodes with several consumers
    record = record_backward(loss, {"x": x})
    position = {s.node_id: s.index for s in record.steps}
    assert len(position) == len(record.steps) == record.data.kinds()["function"]
    for edge in record.data.edges:
        if edge.style == "flow" and edge.src in position and edge.dst in position:
            assert position[edge.dst] < position[edge.src], edge  # consumer first


def test_saved_tensors_are_freed_as_the_pass_goes_unless_retained():
    record = default_record()
    pow_id, mul_id = record.steps[1].node_id, record.steps[4].node_id
    assert record.steps[1].freed_before == frozenset()
    assert record.steps[2].freed_before == {pow_id}  # PowBackward0 ran, its saved h is gone
    assert record.freed_after == {pow_id, mul_id}
    assert record.second_backward.startswith("raises RuntimeError: Trying to backward")
    kept = default_record(retain_graph=True)
    assert kept.freed_after == frozenset()
    assert kept.second_backward.startswith("runs")


def test_a_graph_that_saved_nothing_can_run_backward_twice():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    record = record_backward((x + 1).sum(), {"x": x})
    assert record.freed_after == frozenset() and record.second_backward.startswith("runs")
    assert "saved no tensors" in backward_frame(record, len(record.steps) + 1).caption


def test_hooks_are_removed_after_recording():
    root, params = default_backward_example()
    record = record_backward(root, params, retain_graph=True)
    assert record.second_backward.startswith("runs")  # a second pass ran after the recording
    assert len(record.steps) == 6  # and no hook added to the record
    assert params["w"].grad.tolist() == [6.0, -8.0, 84.0]  # two passes accumulated


def test_frames_walk_the_record():
    record = default_record()
    first = backward_frame(record, 0)
    assert first.caption.startswith("Before backward(): 6 backward functions")
    assert first.table.column("status") == ["waiting"] * 6
    assert "color=red" not in first.graph.source

    third = backward_frame(record, 3)
    assert third.caption == (
        "Step 3 of 6: the engine runs AddBackward0; it received [3, -2, 14] (the gradient of h)."
    )
    assert third.table.column("status") == ["done", "done", "running"] + ["waiting"] * 3
    assert third.table.column("gradient received")[3:] == ["?", "?", "?"]
    assert f"{record.steps[2].node_id} [label=AddBackward0 color=red" in third.graph.source
    assert third.graph.data.kinds().get("freed") == 1  # PowBackward0's saved h

    fifth = backward_frame(record, 5)
    assert "grad = [15]" in fifth.graph.text()  # b's AccumulateGrad ran at step 4
    assert "grad = [3, -4, 42]" not in fifth.graph.text()

    last = backward_frame(record, 7)
    assert last.caption.startswith(
        "After backward(): all 6 steps ran; the saved tensors were freed"
    )
    assert last.graph.data.kinds().get("freed") == 2
    assert "grad = [3, -4, 42]" in last.graph.text()
    kept = backward_frame(default_record(retain_graph=True), 7)
    assert "kept (retain_graph=True)" in kept.caption
    assert "freed" not in kept.graph.data.kinds()


def test_frame_position_out_of_range_says_the_range():
    with pytest.raises(ValueError, match="between 0 and 7"):
        backward_frame(default_record(), 8)
