"""Pictures and tables of the engines' runs (helpers.ranks.schedule_display), from recorded
actions."""

from __future__ import annotations

import pytest
from torch.distributed.pipelining._backward import stage_backward

from helpers.ranks.pipeline_schedule import bubble, schedule_slots
from helpers.ranks.schedule_display import (
    bucket_figure,
    memory_figure,
    schedule_figure,
    source_excerpt,
    traffic_table,
)

GPIPE = {r: [("F", m) for m in range(4)] + [("B", m) for m in range(4)] for r in range(3)}
ONE_F_ONE_B = {
    0: [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("F", 3), ("B", 1), ("B", 2), ("B", 3)],
    1: [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)],
    2: [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)],
}


def starts(slots, rank):
    return [t for _, t in slots[rank]]


def test_gpipe_slots_wait_for_the_previous_stage_forward_and_the_next_backward():
    slots = schedule_slots(GPIPE)
    assert starts(slots, 0) == [0, 1, 2, 3, 8, 9, 10, 11]
    assert starts(slots, 1) == [1, 2, 3, 4, 7, 8, 9, 10]
    assert starts(slots, 2) == [2, 3, 4, 5, 6, 7, 8, 9]
    assert bubble(slots) == pytest.approx(1 / 3)


def test_1f1b_has_the_same_bubble_in_another_order():
    slots = schedule_slots(ONE_F_ONE_B)
    assert starts(slots, 2) == [2, 3, 4, 5, 6, 7, 8, 9]
    assert starts(slots, 0)[-1] == 11 and bubble(slots) == pytest.approx(1 / 3)
    one_stage = schedule_slots({0: [("F", 0), ("B", 0)]})
    assert bubble(one_stage) == 0


def test_no_actions_is_an_error_that_says_so():
    with pytest.raises(ValueError, match=r"^schedule_slots\(\) needs at least one rank's actions$"):
        schedule_slots({})


def test_the_figures_describe_what_they_show():
    figure = schedule_figure({"GPipe": GPIPE, "1F1B": ONE_F_ONE_B})
    assert figure.description.endswith("GPipe bubble 33%; 1F1B bubble 33%")
    assert figure.png()[:4] == b"\x89PNG"
    held = {"GPipe": {0: [1, 2, 0]}, "1F1B": {0: [1, 0, 0]}}
    assert "GPipe: peak 2 bytes; 1F1B: peak 1 bytes" in memory_figure(held).description
    steps = [[{"bucket": 0, "parameters": ["a", "b"], "numbers": 3, "bytes": 12}],
             [{"bucket": 0, "parameters": ["b"], "numbers": 1, "bytes": 4},
              {"bucket": 1, "parameters": ["a"], "numbers": 2, "bytes": 8}]]  # fmt: skip
    assert bucket_figure(steps).description == "DDP buckets per step: 1, 2 all-reduces"
    table = traffic_table([{"split": "s", "what crosses": "w", "messages": 1, "bytes per step": 2}])
    assert table.rows[0]["bytes per step"] == 2


def test_the_excerpt_quotes_the_engine_own_lines():
    text = repr(source_excerpt(stage_backward, "torch.autograd.backward(", before=0, after=1))
    assert text.startswith("# stage_backward · torch/distributed/pipelining/_backward.py")
    assert "torch.autograd.backward(" in text.splitlines()[1]
    with pytest.raises(ValueError, match="no line containing 'no such line'"):
        source_excerpt(stage_backward, "no such line")
