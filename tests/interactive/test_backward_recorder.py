"""helpers.interactive.backward_recorder: a backward pass recorded node by node, and the
stepper's frames."""

import pytest
import torch

from helpers.interactive.backward_recorder import (
    backward_frame,
    default_backward_example,
    record_backward,
)

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


SECOND_TIME = (
    "raises RuntimeError: Trying to backward through the graph a second time (or directly "
    "access saved tensors after they have already been freed)."
)


def test_a_second_backward_is_told_in_its_first_sentence():
    record = default_record()
    assert record.second_backward == SECOND_TIME
    assert backward_frame(record, 7).caption == (
        f"After backward(): all 6 steps ran; the saved tensors were freed. A second backward() "
        f"{SECOND_TIME}"
    )
    from helpers.interactive.backward_recorder import _first_line

    assert _first_line("One sentence.") == "One sentence."
    assert _first_line("First part. Second part.\nMore.") == "First part."


def test_freed_saved_tensors_keep_their_slot_name_and_shape():
    record = default_record()
    last = backward_frame(record, 7).graph.data
    before = {n.id: n for n in record.data.nodes}
    freed = {n.label: n.shape for n in last.nodes if n.kind == "freed"}
    assert freed == {"self = h\n[freed]": (3,), "other = x\n[freed]": (3,)}
    leaves = {n.label: n.shape for n in last.nodes if n.kind == "leaf"}
    assert leaves == {"w\n[3]\ngrad = [3, -4, 42]": (3,), "b\nscalar\ngrad = [15]": ()}
    assert all(n.shape == before[n.id].shape for n in last.nodes)
    assert last.roots == record.data.roots and last.objects is record.data.objects


def test_each_frame_titles_its_graph_and_dims_only_what_has_not_run():
    record = default_record()
    titles = [backward_frame(record, p).graph.source for p in (0, 1, 6, 7)]
    assert 'label="before backward()"' in titles[0]
    assert 'label="step 1 of 6: SumBackward0"' in titles[1]
    assert 'label="step 6 of 6: AccumulateGrad"' in titles[2]
    assert 'label="after backward()"' in titles[3]
    for position in range(8):
        frame = backward_frame(record, position)
        assert frame.position == position
        dimmed = {
            line.split(" ")[0].strip()
            for line in frame.graph.source.splitlines()
            if 'style="filled,dashed"' in line
        }
        waiting = {s.node_id for s in record.steps if s.index > position and 0 < position <= 6}
        assert dimmed == waiting, position  # before backward() nothing is dimmed yet


def test_each_step_is_captioned_with_what_it_received():
    record = default_record()
    assert backward_frame(record, 1).caption == (
        "Step 1 of 6: the engine runs SumBackward0; it received [1] (the gradient of loss)."
    )
    assert backward_frame(record, 2).caption == (
        "Step 2 of 6: the engine runs PowBackward0; it received [1, 1, 1]."
    )
    assert backward_frame(record, 6).caption.startswith("Step 6 of 6: the engine runs Accum")


def test_the_table_shows_what_each_step_received_once_it_ran():
    third = backward_frame(default_record(), 3).table
    assert third.column("gradient of") == ["loss", "-", "h", "b", "-", "w"]
    assert third.column("gradient received") == ["[1]", "[1, 1, 1]", "[3, -2, 14]", "?", "?", "?"]


def test_a_node_with_several_outputs_receives_each_gradient():
    a = torch.ones(4, requires_grad=True)
    p, q = a.split(2)
    record = record_backward((p * 2).sum() + (q * 3).sum(), {"a": a})
    split = next(s for s in record.steps if s.name.startswith("SplitBackward"))
    assert split.received == "[2, 2], [3, 3]"


def test_a_non_scalar_root_runs_with_the_gradient_given_both_times():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    record = record_backward(w * 3, {"w": w}, retain_graph=True, gradient=torch.ones(2))
    assert record.steps[0].received == "[1, 1]"
    assert record.second_backward.startswith("runs")
    assert w.grad.tolist() == [6.0, 6.0]
