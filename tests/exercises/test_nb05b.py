"""Notebook 05b's checker: the rules run on torch and on an engine, the first difference named.

The reference engine is the notebook's own (tests/exercises/engine_reference.py reads its given
cells and its solutions): it passes every rule, each exercise's rules as it stands after that
exercise, and trains a two-layer network to torch's loss curve; each rule is seen failing on a
copy of it with one bug, and named first (`MUTANTS`: the source edits that make each broken
copy)."""

from __future__ import annotations

import ast
import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.exercises import nb05b
from helpers.language import set_language
from tests.exercises import engine_reference
from tests.exercises.common import text

ROOT = Path(__file__).resolve().parents[2]
#: The notebook's whole engine, built once.
REFERENCE = engine_reference.engine()

MUTANTS: dict[str, list[tuple[str, str]]] = {
    "leaf-created": [
        ("        self._requires_grad = requires_grad\n", "        self._requires_grad = False\n"),
    ],
    "leaf-result": [
        ("        out._requires_grad = True\n", "        out._requires_grad = False\n")
    ],
    "leaf-no-input-requires": [
        (
            "return RECORDING[0] and any(t.requires_grad for t in inputs)",
            "return RECORDING[0]",
        ),
    ],
    "leaf-one-input-enough": [("any(t.requires_grad for t in inputs)", "inputs[0].requires_grad")],
    "leaf-chain": [
        (
            'return unary(t, np.tanh(t.data), "TanhBackward0", lambda y: 1.0 - y * y)',
            "return Tensor(np.tanh(t.data))",
        ),
    ],
    "leaf-set-flag": [
        (
            'leaf variables.")\n    self._requires_grad = value\n',
            'leaf variables.")\n    pass\n',
        ),
    ],
    "leaf-flag-of-result": [
        (
            '    if not self.is_leaf:\n        raise RuntimeError("you can',
            '    if False:\n        raise RuntimeError("you can',
        ),
    ],
    "no-grad-not-recorded": [
        ("RECORDING[0] = RECORDING[0], False", "RECORDING[0] = RECORDING[0], True"),
    ],
    "no-grad-ends": [("RECORDING[0] = self.before", "RECORDING[0] = error[0] is None")],
    "grad-fn-name": [('"MulBackward0", np.multiply', '"MulBackward", np.multiply')],
    "grad-fn-names": [('"SubBackward0"', '"SubBackward"')],
    "grad-fn-call": [
        ("ga = _unbroadcast(grad_a(g, saved.pop(0))", "ga = _unbroadcast(grad_a(g, saved.pop(1))"),
    ],
    "grad-none-before": [("        self.grad = None  #", "        self.grad = 0.0  #")],
    "backward-fills-leaves": [
        ("grads[child] + g if child in grads else g", "grads[child] + g if child in grads else -g"),
    ],
    "backward-leaf-without-grad": [("    if not t.requires_grad:\n        return None\n", "")],
    "next-functions-leaf": [('"torch::autograd::AccumulateGrad"', '"LeafBackward0"')],
    "next-functions-pairs": [
        (
            "tuple((_edge(t), 0) for t in inputs)",
            "tuple((_edge(t), i) for i, t in enumerate(inputs))",
        ),
    ],
    "accumulate-variable": [("    if t._accumulate is None:\n", "    if True:\n")],
    "backward-non-leaf-none": [
        (
            "        out.grad_fn = Node(name, inputs, backward, saved)\n",
            (
                "        out.grad_fn = Node(name, inputs, backward, saved)\n"
                "        out.grad_fn.retained = out\n"
            ),
        ),
    ],
    "backward-changes-no-value": [
        (
            "\n    leaf.grad = Tensor(grad) if leaf.grad is None",
            "\n    leaf.data -= grad\n    leaf.grad = Tensor(grad) if leaf.grad is None",
        ),
    ],
    "backward-gradient": [
        (
            "return np.ones_like(self.data) if gradient is None else _wrap(gradient).data",
            "return np.ones_like(self.data)",
        ),
    ],
    "backward-scalar-only": [("if gradient is None and self.data.size != 1:", "if False:")],
    "backward-keyword": [
        (
            "def backward(self, gradient=None, retain_graph=False):\n",
            "def backward(self, grad=None, retain_graph=False):\n    gradient = grad\n",
        ),
    ],
    "backward-implicit-one": [
        (
            "np.ones_like(self.data) if gradient is None else",
            "np.ones_like(self.data) if gradient is None or self.data.size == 1 else",
        ),
    ],
    "backward-once-per-node": [
        ("if users[child] == 0 and child in grads:", "if child in grads:"),
    ],
    "backward-through-every-op": [("lambda y: 1.0 - y * y", "lambda y: 1.0 - y")],
    "backward-order": [("node = max(ready, key=lambda n: n.order)", "node = ready[0]")],
    "accumulate-new-graph": [
        (
            "\n    leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf.grad.data"
            " + grad)",
            "\n    leaf.grad = Tensor(grad)",
        ),
    ],
    "accumulate-set-none": [
        (
            "\n    leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf.grad.data"
            " + grad)",
            (
                '\n    self.total = grad if getattr(self, "total", None) is None else self.to'
                "tal + grad\n"
                "    leaf.grad = Tensor(self.total)"
            ),
        ),
    ],
    "free-second-backward": [
        ("        self.saved = None  # the node and its links stay\n", "        pass\n"),
    ],
    "free-shared-part": [
        (
            (
                "        ga = _unbroadcast(grad_a(g, saved.pop(0)), a.data.shape) if need_a else "
                "None\n"
                "        gb = _unbroadcast(grad_b(g, saved.pop(0)), b.data.shape) if need_b else "
                "None\n"
            ),
            (
                "        ga = _unbroadcast(grad_a(g, b.data), a.data.shape) if need_a else None\n"
                "        gb = _unbroadcast(grad_b(g, a.data), b.data.shape) if need_b else None\n"
            ),
        ),
        (
            "saved = [b] * need_a + [a] * need_b",
            'saved = ([b] * need_a + [a] * need_b) * (name == "MulBackward0")',
        ),
    ],
    "free-nothing-saved": [("    if not retain_graph and self.saved:", "    if not retain_graph:")],
    "free-saved-number": [
        (
            (
                "    a, b = _wrap(a), _wrap(b)\n"
                "    need_a, need_b = a.requires_grad, b.requires_grad\n"
                "    saved = [b] * need_a + [a] * need_b"
            ),
            (
                "    number = not isinstance(b, Tensor)\n"
                "    a, b = _wrap(a), _wrap(b)\n"
                "    need_a, need_b = a.requires_grad, b.requires_grad\n"
                "    saved = [b] * (need_a and not number) + [a] * need_b"
            ),
        ),
        (
            "        saved = list(saved)\n",
            "        saved = [b.data] * (need_a and number) + list(saved)\n",
        ),
    ],
    "free-keeps-nodes": [
        (
            "                    ready.append(child)\n",
            (
                "                    ready.append(child)\n"
                "    for node in _users(root):\n"
                "        if node.saved is None:\n"
                "            node.next_functions = ()\n"
            ),
        ),
    ],
    "retain-graph": [("    if not retain_graph and self.saved:", "    if self.saved:")],
    "retain-graph-then-free": [
        (
            "    if not retain_graph and self.saved:",
            (
                '    self.keep = retain_graph or getattr(self, "keep", False)\n'
                "    if not self.keep and self.saved:"
            ),
        ),
    ],
    "version-counts": [
        ("    self._counter[0] += 1  #", "    self._counter[0] += kernel is np.add  #"),
    ],
    "version-saved-modified": [("if t._version != version:", "if False:")],
    "version-unsaved-fine": [("    if _records((self, other)):", "    if False:")],
    "version-no-grad-counts": [
        ("    self._counter[0] += 1  #", "    self._counter[0] += RECORDING[0]  #"),
    ],
    "saved-only-needed": [  # both inputs saved, each gradient still computed from the right one
        ("saved = [b] * need_a + [a] * need_b", "saved = [b, a]"),
        ("grad_b(g, saved.pop(0))", "grad_b(g, saved[-1])"),
    ],
    "detach-leaf": [
        (
            "    alias = Tensor(0.0)\n",
            "    alias = Tensor(0.0, requires_grad=self.requires_grad)\n",
        ),
    ],
    "detach-shares-data": [
        (
            "alias.data, alias._counter = self.data, self._counter",
            "alias.data, alias._counter = self.data.copy(), self._counter",
        ),
    ],
    "detach-not-a-snapshot": [
        (
            "    kernel(self.data, other.data, out=self.data)",
            (
                "    if kernel is np.add:\n"
                "        self.data = self.data + other.data\n"
                "    else:\n"
                "        kernel(self.data, other.data, out=self.data)"
            ),
        ),
    ],
    "detach-leaves-original": [
        (
            "    alias.data, alias._counter = self.data, self._counter\n",
            (
                "    alias.data, alias._counter = self.data, self._counter\n"
                "    self.grad_fn = None\n"
            ),
        ),
    ],
    "detach-shares-version": [
        ("alias.data, alias._counter = self.data, self._counter", "alias.data = self.data"),
    ],
    "detach-cut": [
        (
            "    alias = Tensor(0.0)\n",
            "    alias = Tensor(0.0)\n    alias._accumulate = self._accumulate\n",
        ),
    ],
    "retain-grad-keeps": [
        (
            "        self.retains_grad, self.grad_fn.retained = True, self\n",
            "        self.retains_grad = True\n",
        ),
    ],
    "retain-grad-leaf": [
        (
            (
                "    if not self.is_leaf:  # a leaf keeps its .grad anyway\n"
                "        self.retains_grad, self.grad_fn.retained = True, self\n"
            ),
            (
                "    self.retains_grad = True\n"
                "    if not self.is_leaf:\n"
                "        self.grad_fn.retained = self\n"
            ),
        ),
    ],
    "retain-grad-no-requires": [
        (
            "    if not self.requires_grad:\n        raise RuntimeError(\"can't retain_grad",
            "    if False:\n        raise RuntimeError(\"can't retain_grad",
        ),
    ],
    "retain-grad-not-reached": [
        (
            "        self.retains_grad, self.grad_fn.retained = True, self\n",
            (
                "        self.retains_grad, self.grad_fn.retained = True, self\n"
                "        self.grad = Tensor(np.zeros_like(self.data))\n"
            ),
        ),
    ],
    "hook-called-in-backward": [
        (
            "        if self.fn in self.hooks:\n            self.hooks.remove(self.fn)\n",
            "        pass\n",
        ),
    ],
    "hook-replaces": [
        (
            "    return grad if new is None else np.asarray(new.data, dtype=float)",
            "    return grad",
        ),
    ],
    "hook-saves-nothing": [
        (
            "    hooks.append(fn)\n",
            "    hooks.append(fn)\n    if not self.is_leaf:\n"
            "        self.grad_fn.retained = self\n",
        ),
    ],
    "hook-order": [
        ("    for hook in list(self.pre_hooks):", "    for hook in reversed(self.pre_hooks):"),
    ],
    "hook-then-retain": [
        (
            (
                "    for hook in list(self.pre_hooks):  # in the order they were registered\n"
                "        grad = _hooked(hook, grad)\n"
                "    if (t := self.retained) is not None:  # after the hooks, whenever it was "
                "called\n"
                "        t.grad = Tensor(grad) if t.grad is None else Tensor(t.grad.data + grad)\n"
            ),
            (
                "    if (t := self.retained) is not None:\n"
                "        t.grad = Tensor(grad) if t.grad is None else Tensor(t.grad.data + grad)\n"
                "    for hook in list(self.pre_hooks):\n"
                "        grad = _hooked(hook, grad)\n"
            ),
        ),
    ],
    "hook-on-leaf": [
        (
            (
                "    for hook in list(leaf._hooks):  # what they return is what accumulates\n"
                "        grad = _hooked(hook, grad)\n"
                "    leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf.grad.data "
                "+ grad)\n"
            ),
            (
                "    leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf.grad.data "
                "+ grad)\n"
                "    for hook in list(leaf._hooks):\n"
                "        grad = _hooked(hook, grad)\n"
            ),
        ),
    ],
    "hook-post-accumulate": [("        hook(leaf)\n", "        hook(leaf.grad)\n")],
    "sgd-step": [
        (
            "    self._counter[0] += 1  # a new version\n",
            (
                "    self._counter[0] += 1  # a new version\n"
                "    self._requires_grad = self._requires_grad and RECORDING[0]\n"
            ),
        ),
    ],
}


def engine_with(edits: list[tuple[str, str]]) -> types.ModuleType:
    """The reference engine with each `old` text of its source (found once) replaced by `new`."""
    source = engine_reference.source()
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return engine_reference.build(source, "broken_engine")


def broken(rule_id: str) -> types.ModuleType:
    """The reference engine with the one bug that breaks `rule_id`."""
    return engine_with(MUTANTS[rule_id])


def said(result) -> list[str]:
    return result.messages


def test_the_reference_engine_obeys_every_rule():
    result = nb05b.check_engine(REFERENCE)
    assert result.ok, text(result)
    assert result.success_text == f"All {len(nb05b.rules())} rules agree with torch."


@pytest.mark.parametrize("exercise", range(1, nb05b.EXERCISES + 1))
def test_after_each_exercise_the_notebooks_engine_obeys_that_exercises_rules(exercise):
    engine = engine_reference.engine(exercise)
    result = nb05b.check_engine(engine, exercise=exercise)
    assert result.ok, text(result)
    chosen = nb05b.rules(exercise)
    assert [r.id for r in chosen] == [r.id for r in nb05b.rules() if r.exercise <= exercise]
    if exercise < nb05b.EXERCISES:  # the next exercise's rules are not obeyed yet
        assert not nb05b.check_engine(engine, exercise=exercise + 1).ok
        left = len(nb05b.rules()) - len(chosen)
        assert result.success_text == (
            f"All {len(chosen)} rules up to exercise {exercise} agree with torch; the exercises "
            f"after it add {left} more."
        )


def test_every_exercise_has_rules_and_the_last_runs_them_all():
    every = nb05b.rules()
    assert {r.exercise for r in every} == set(range(1, nb05b.EXERCISES + 1))
    assert nb05b.rules(nb05b.EXERCISES) == every
    assert len(nb05b.rules(1)) < len(nb05b.rules(2))
    for wrong in (0, 9, "1", 1.0, True):
        with pytest.raises(ValueError, match="exercise is a number from 1 to 8"):
            nb05b.check_engine(REFERENCE, exercise=wrong)


def test_a_rule_of_a_later_exercise_is_not_run_before_it():
    result = nb05b.check_engine(broken("hook-post-accumulate"), exercise=7)
    assert result.ok, text(result)
    assert not nb05b.check_engine(broken("hook-post-accumulate"), exercise=8).ok
    lines = said(nb05b.check_engine(broken("leaf-result"), exercise=1))
    assert lines[0].startswith(f"Rule 2 of {len(MUTANTS)} differs: An operation with an input")


def test_a_rule_keeps_its_number_in_the_whole_list_whichever_exercise_runs_it():
    every = [r.id for r in nb05b.rules()]
    chosen = [r.id for r in nb05b.rules(7)]
    moved = [i for n, i in enumerate(chosen) if every.index(i) != n]  # after a rule of exercise 8
    assert moved  # else this test could not tell the two numberings apart
    for rule_id in (moved[0], moved[-1]):
        lines = said(nb05b.check_engine(broken(rule_id), exercise=7))
        assert lines[0].startswith(f"Rule {every.index(rule_id) + 1} of {len(every)} differs:")


def test_there_are_forty_rules_or_more_each_taught_by_a_cell_of_notebooks_01_to_05():
    every = nb05b.rules()
    assert len(every) >= 40
    assert len({r.id for r in every}) == len(every)
    for rule in every:
        assert rule.notebook[:2] in {"01", "02", "03", "04", "05"}, rule.id
        cells = json.loads((ROOT / "notebooks" / f"{rule.notebook}.ipynb").read_text())["cells"]
        assert rule.cell in {c["id"] for c in cells}, (rule.id, rule.cell)
        assert rule.sentence.endswith("."), rule.id


@pytest.mark.parametrize("rule", nb05b.rules(), ids=lambda r: r.id)
def test_torch_raises_exactly_where_a_rule_says_and_in_its_words(rule):
    seen, error = nb05b.run_rule(rule, nb05b.torch_engine())
    if rule.raises is None:
        assert error is None, f"{rule.id}: {error!r}"
        assert seen is not None
    else:
        kind, words = rule.raises
        assert type(error).__name__ == kind and words in str(error), f"{rule.id}: {error!r}"


def test_every_rule_has_one_broken_engine():
    assert list(MUTANTS) == [r.id for r in nb05b.rules()]


@pytest.mark.parametrize("rule_id", list(MUTANTS))
def test_each_broken_engine_is_named_by_its_rule_and_no_earlier_one(rule_id):
    number, rule, _ = nb05b.first_difference(broken(rule_id))
    assert rule.id == rule_id
    lines = said(nb05b.check_engine(broken(rule_id)))
    assert lines[0] == f"Rule {number} of {len(MUTANTS)} differs: {rule.sentence}"
    assert lines[-1] == f"taught in {rule.notebook}, cell {rule.cell}"


def test_the_report_says_what_torch_did_and_what_the_engine_did():
    lines = said(nb05b.check_engine(broken("next-functions-leaf")))
    assert lines[1:3] == [
        "torch: ['AccumulateGrad', None, None, 'AccumulateGrad']",
        "your engine: ['LeafBackward0', None, None, 'LeafBackward0']",
    ]
    lines = said(nb05b.check_engine(broken("grad-fn-call")))  # a crash, named
    assert lines[1].startswith("torch: [[[1, 20], None], [None, [1, 20]]")
    assert lines[2].startswith("your engine raised IndexError")
    lines = said(nb05b.check_engine(broken("free-second-backward")))
    assert lines[1].startswith("raised RuntimeError: Trying to backward through the graph")
    assert lines[2] == "your engine raised nothing"


def test_an_error_in_other_words_is_named_with_torchs_words():
    freed = 'FREED = "Trying to backward through the graph a second time: its saved'
    wrong = engine_with([(freed, 'FREED = "The graph is gone: its saved')])
    _, rule, lines = nb05b.first_difference(wrong)
    assert rule.id == "free-second-backward"
    assert lines[1] == (
        "your engine raised RuntimeError: The graph is gone: its saved tensors were freed.: "
        "torch's message says “Trying to backward through the graph a second time”, yours "
        "should too"
    )


def test_a_crashing_engine_is_reported_naming_the_rule_and_nothing_raises():
    class Crashing:
        def __init__(self, data, requires_grad=False):
            raise ZeroDivisionError("my bug")

    lines = said(nb05b.check_engine({"Tensor": Crashing}))
    assert lines[0].startswith("Rule 1 of")
    assert lines[2] == "your engine raised ZeroDivisionError: my bug where torch raised nothing"

    def recursing(data, requires_grad=False):
        return recursing(data, requires_grad)

    assert "RecursionError" in text(nb05b.check_engine({"Tensor": recursing}))
    for nothing in (None, 42, {}, types.ModuleType("empty")):
        result = nb05b.check_engine(nothing)
        assert not result.ok and "check_engine needs your engine" in text(result)
        assert type(nothing).__name__ in text(result)  # it says what it was given


def test_the_notebooks_globals_serve_as_an_engine():
    assert nb05b.check_engine(vars(REFERENCE)).ok
    partial = {k: v for k, v in vars(REFERENCE).items() if k != "no_grad"}
    assert "NameError: name 'no_grad' is not defined" in text(nb05b.check_engine(partial))


def test_observations_keep_bools_none_and_numbers_apart():
    assert nb05b.observe((torch.tensor([1.0, 2.0]), np.float64(3), None, True)) == [
        [1.0, 2.0],
        3.0,
        None,
        True,
    ]
    assert nb05b.observe(REFERENCE.Tensor([[1, 2]])) == [[1.0, 2.0]]
    assert nb05b.observe(object()) == "<object>"
    same = nb05b._same
    assert same([1.0, None], [1.0 + 1e-9, None]) and not same([True], [1.0])
    assert not same([1.0], [1.001]) and not same([1.0], [1.0, 2.0]) and not same(None, 0.0)
    assert not same(0.0, None) and not same(None, [1.0]) and same(True, True)
    assert not same(1.0, [1.0]) and not same([1.0], 1.0) and not same(1.0, "1.0")
    assert same(0.0, 1e-12) and not same(0.0, 1e-8)  # near zero: an absolute tolerance
    error_text = nb05b._error_text
    assert error_text(ValueError()) == "ValueError: "  # no message at all
    assert error_text(ValueError("first\nsecond")) == "ValueError: first"
    assert error_text(ValueError("x" * 300)) == "ValueError: " + "x" * 200
    # a program may see a dict: its keys as text, its values observed and compared one by one
    seen = nb05b.observe({"w": torch.tensor([1.0, 2.5]), 2: None})
    assert seen == {"w": [1.0, 2.5], "2": None}
    assert same(seen, {"w": [1.0, 2.5 + 1e-9], "2": None})
    assert not same(seen, {"w": [1.0, 2.5], "3": None})
    assert not same(seen, {"w": [1.0, 2.6], "2": None})
    assert not same(seen, [[1.0, 2.5], None]) and not same([1.0], {"0": 1.0})
    assert nb05b._shown(seen) == "{w: [1, 2.5], 2: None}"
    assert nb05b._shown(["x", True, None]) == "['x', True, None]"


def test_the_checker_speaks_chinese():
    set_language("zh")
    try:
        result = nb05b.check_engine(broken("leaf-created"))
        ok = nb05b.check_engine(REFERENCE)
    finally:
        set_language("en")
    assert "规则 1" in text(result) and "torch" in text(result)
    assert str(len(MUTANTS)) in ok.success_text and "torch" in ok.success_text


def _two_layer_losses(lib, steps: int = 30) -> list[float]:
    """Train tanh(x @ W1 + b1) @ W2 + b2 by mean squared error and plain SGD: each step's loss."""
    rng = np.random.default_rng(0)
    x, target = lib.Tensor(rng.normal(size=(16, 3))), lib.Tensor(rng.normal(size=(16, 1)))
    params = [
        lib.Tensor(rng.normal(size=(3, 8)) * 0.5, requires_grad=True),
        lib.Tensor(np.zeros(8), requires_grad=True),
        lib.Tensor(rng.normal(size=(8, 1)) * 0.5, requires_grad=True),
        lib.Tensor(np.zeros(1), requires_grad=True),
    ]
    w1, b1, w2, b2 = params
    losses = []
    for _ in range(steps):
        error = lib.tanh(x @ w1 + b1) @ w2 + b2 - target
        loss = (error * error).mean()
        loss.backward()
        with lib.no_grad():
            for p in params:
                p.add_(p.grad * -0.1)
                p.grad = None
        losses.append(float(nb05b.observe(loss)))
    return losses


def test_the_reference_engine_trains_a_two_layer_network_to_torchs_loss_curve():
    ours = _two_layer_losses(REFERENCE)
    torchs = _two_layer_losses(nb05b.torch_engine())
    assert ours[-1] < 0.8 * ours[0]  # it learns
    np.testing.assert_allclose(ours, torchs, rtol=1e-6)
    assert not np.allclose(_two_layer_losses(broken("backward-through-every-op")), torchs)


def test_the_notebooks_engine_is_numpy_only_and_at_most_300_lines():
    cells = engine_reference.cells()
    assert len(cells) >= 8 + 8  # the given parts and the eight solutions
    assert sum(len(code.splitlines()) for code in cells) <= 300
    tree = ast.parse(engine_reference.source())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    # built with numpy alone (`build` gives it np, nothing else), it obeys every rule (above)
    assert set(vars(REFERENCE)) - set(vars(engine_reference.build(""))) >= set(nb05b.API)


def test_the_engine_is_read_from_the_notebooks_cells_not_copied():
    import nbformat

    from tooling.course import NOTEBOOKS

    nb = nbformat.read(NOTEBOOKS / "05b_build_the_engine.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for part in engine_reference.cells():
        assert part.strip() in code
    assert not (ROOT / "tests" / "exercises" / "engine_reference.py").read_text().count("class ")
