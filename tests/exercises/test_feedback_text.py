"""Every checker's feedback is read from its notebook's text file (helpers/text/en/NN_*.toml),
not written in code: a string edited there (words reordered, placeholders kept) is what the
checker then says. One case per checker module."""

import pytest
import torch
from torch import nn

from tests.support.text_edits import edit_feedback


def _backward():
    from helpers.exercises.nb02 import check_mean_gradient

    return check_mean_gradient(...).messages


def _compiled():
    from tests.exercises.test_nb09c import said

    return said(...)[1]


def _detach_clone():
    from helpers.exercises.nb03 import check_snapshot
    from tests.exercises.test_nb03 import placeholder

    return check_snapshot(placeholder).messages


def _engines():
    from tests.exercises.test_nb07b import messages

    return messages(...)[1]


def _freeing():
    from tests.exercises.test_nb05 import one

    return one(lambda loss, z: (loss + z).backward(retain_graph=True)).messages


def _grad_modes():
    from helpers.exercises.nb08 import check_real_leaf

    return check_real_leaf(lambda v: None).messages


def _higher_order():
    from helpers.exercises.nb09 import check_hvp

    return check_hvp(lambda f, x, v: "Hv").messages


def _hooks():
    from helpers.exercises.nb04 import check_retain_grad
    from tests.exercises.test_nb04 import graph

    W, x, _ = graph()
    return check_retain_grad(..., W, x).messages


def _leaf_nodes():
    from helpers.exercises.nb01 import check_kinds

    tensors = {"p": nn.Parameter(torch.ones(2)), "q": torch.zeros(2)}
    right = repr(check_kinds({"p": "leaf, requires grad", "q": "leaf, no grad"}, **tensors))
    return right, check_kinds({"p": ...}, **tensors).messages[0]


def _leakage():
    from helpers.exercises.nb07 import check_clip

    return check_clip(3).messages


def _nb10():
    from helpers.exercises.nb10 import check_order
    from tests.exercises.test_nb10 import RIGHT_ORDER, build_exercise

    return check_order(RIGHT_ORDER[:-1], build_exercise).messages


def _nb05b():
    from helpers.exercises.nb05b import check_engine
    from tests.exercises.test_nb05b import broken

    return check_engine(broken("leaf-created")).messages[1:3]


def _precision():
    from tests.exercises.test_nb09b import MISTAKES, said

    return said(MISTAKES["no_clip"])[1]


def _split_backward():
    from tests.exercises.test_nb06 import handoff, right2

    return handoff(right2).messages


#: (text file, its [feedback] strings edited, what the checker then says, what it must say)
CASES = {
    "nb02": (
        "02_backward_and_optimizers",
        {"gradient_unfilled": "y has {n} elements: gradient is still `...`"},
        _backward,
        ["y has 4 elements: gradient is still `...`"],
    ),
    "nb09c": ("09c_torch_compile_and_autograd", {"unfilled": "EDITED"}, _compiled, "EDITED"),
    "nb03": (
        "03_detach_and_clone",
        {"returns_placeholder": "build it from {source}: {name} still returns `...`"},
        _detach_clone,
        ["build it from w: take_snapshot(w) still returns `...`"],
    ),
    "nb07b": ("07b_pipeline_and_data_parallel", {"unfilled": "EDITED"}, _engines, "EDITED"),
    "nb05": (
        "05_freeing_the_graph",
        {"graph_retained": "kept {held} bytes"},
        _freeing,
        ["kept 148 bytes"],
    ),
    "nb08": (
        "08_grad_modes_and_why_nothing_learns",
        {"returned_none": "{call} -> None?"},
        _grad_modes,
        ["make_weight(values) -> None?"],
    ),
    "nb09": (
        "09_past_first_order",
        {"hvp_not_a_tensor": "{type}? no"},
        _higher_order,
        ["str? no"],
    ),
    "nb04": (
        "04_retain_grad_and_hooks",
        {"still_placeholder": "replace the `...` of {name}"},
        _hooks,
        ["replace the `...` of hidden"],
    ),
    "nb01": (
        "01_leaf_nodes",
        {"kinds_success": "{count} of {count} right.", "unfilled": "still to predict: {names}"},
        _leaf_nodes,
        ("✅ 2 of 2 right.", "still to predict: p, q"),
    ),
    "nb07": (
        "07_split_across_processes",
        {"clip_not_function": "no function: {type}"},
        _leakage,
        ["no function: int"],
    ),
    "nb05b": (
        "05b_build_the_engine",
        {"torch_did": "torch saw {observed}", "engine_did": "and you {observed}"},
        _nb05b,
        ["torch saw [[False, True, True], [True, True, True]]",
         "and you [[False, True, True], [False, True, True]]"],
    ),
    "nb09b": (
        "09b_mixed_precision_and_module_hooks",
        {"no_clip": "EDITED"},
        _precision,
        "EDITED",
    ),
    "nb10": (
        "10_check_yourself",
        {"order_count": "{predicted} of {actual}"},
        _nb10,
        ["6 of 7"],
    ),
    "nb06": (
        "06_split_backward_three_models",
        {"grads_missing": "model {k}, nothing: {how}", "how_stage1": "run f1.backward"},
        _split_backward,
        ["model 1, nothing: run f1.backward"],
    ),
}


@pytest.mark.parametrize("checker", sorted(CASES))
def test_the_feedback_comes_from_the_notebooks_text_file(monkeypatch, checker):
    text_file, edits, says, expected = CASES[checker]
    edit_feedback(monkeypatch, text_file, edits)
    assert says() == expected


def test_every_checker_module_has_its_case():
    from pathlib import Path

    import helpers.exercises

    modules = {p.stem for p in Path(helpers.exercises.__file__).parent.glob("*.py")}
    assert modules - {"__init__"} == set(CASES)
