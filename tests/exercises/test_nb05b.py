"""Notebook 05b's checker: the rules run on torch and on an engine, the first difference named.

The reference engine (tests/exercises/engine_reference.py) passes every rule and trains a
two-layer network to torch's loss curve; each rule is seen failing on a copy of it with one bug,
and named first (`MUTANTS`: the source edits that make each broken copy)."""

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
REFERENCE = Path(engine_reference.__file__)

MUTANTS: dict[str, list[tuple[str, str]]] = {
    "leaf-created": [
        ("        self._requires_grad = requires_grad\n", "        self._requires_grad = False\n"),
    ],
    "leaf-result": [("    out._requires_grad = True\n", "    out._requires_grad = False\n")],
    "leaf-no-input-requires": [
        (
            "if not (_recording[0] and any(t.requires_grad for t in inputs)):",
            "if not _recording[0]:",
        ),
    ],
    "leaf-one-input-enough": [("any(t.requires_grad for t in inputs)", "inputs[0].requires_grad")],
    "leaf-chain": [
        (
            'return _unary(t, np.tanh(t.data), "TanhBackward0", lambda out: 1.0 - out * out)',
            "return Tensor(np.tanh(t.data))",
        ),
    ],
    "leaf-set-flag": [("        self._requires_grad = value\n", "        pass\n")],
    "leaf-flag-of-result": [
        (
            '        if not self.is_leaf:\n            raise RuntimeError("you can',
            '        if False:\n            raise RuntimeError("you can',
        ),
    ],
    "no-grad-not-recorded": [("        _recording[0] = False\n", "        _recording[0] = True\n")],
    "no-grad-ends": [
        ("        _recording[0] = self.before\n", "        _recording[0] = exc[0] is None\n"),
    ],
    "grad-fn-name": [('"MulBackward0", (a, b)', '"MulBackward", (a, b)')],
    "grad-fn-names": [('"SubBackward0"', '"SubBackward"')],
    "grad-none-before": [("        self.grad = None\n", "        self.grad = 0.0\n")],
    "backward-fills-leaves": [
        (
            "ga = _unbroadcast(g * found[id(b)], a.data.shape)",
            "ga = _unbroadcast(g * found[id(a)], a.data.shape)",
        ),
    ],
    "backward-leaf-without-grad": [("    if not t.requires_grad:\n        return None\n", "")],
    "next-functions-leaf": [
        ('super().__init__("torch::autograd::AccumulateGrad"', 'super().__init__("LeafBackward0"'),
    ],
    "next-functions-pairs": [
        (
            "tuple((_edge(t), 0) for t in inputs)",
            "tuple((_edge(t), i) for i, t in enumerate(inputs))",
        ),
    ],
    "accumulate-variable": [("    if t._accumulate is None:\n", "    if True:\n")],
    "backward-non-leaf-none": [
        (
            "    out.grad_fn = Node(name, inputs, backward, saved)\n",
            (
                "    out.grad_fn = Node(name, inputs, backward, saved)\n"
                "    out.grad_fn.retained = out\n"
            ),
        ),
    ],
    "backward-changes-no-value": [
        (
            "        leaf.grad = Tensor(grad) if leaf.grad is None",
            "        leaf.data -= grad\n        leaf.grad = Tensor(grad) if leaf.grad is None",
        ),
    ],
    "backward-gradient": [
        (
            "grads = {root: np.asarray(_wrap(gradient).data, dtype=float)}",
            "grads = {root: np.ones_like(self.data)}",
        ),
    ],
    "backward-scalar-only": [("if self.data.size != 1:", "if False:")],
    "backward-keyword": [
        (
            "def backward(self, gradient=None, retain_graph=False):\n",
            "def backward(self, grad=None, retain_graph=False):\n        gradient = grad\n",
        ),
    ],
    "backward-implicit-one": [
        ("        if gradient is None:\n", "        if gradient is None or self.data.size == 1:\n"),
    ],
    "backward-once-per-node": [
        ("if waiting[child] == 0 and child in grads:", "if child in grads:"),
    ],
    "backward-through-every-op": [("lambda out: 1.0 - out * out", "lambda out: 1.0 - out")],
    "backward-order": [
        (
            "heapq.heappush(ready, (-child.priority, next(ties), child))",
            "ready.append((0, next(ties), child))",
        ),
    ],
    "accumulate-new-graph": [
        (
            "leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf.grad.data + grad)",
            "leaf.grad = Tensor(grad)",
        ),
    ],
    "accumulate-set-none": [
        (
            "leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf.grad.data + grad)",
            (
                'self.total = grad if getattr(self, "total", None) is None else self.to'
                "tal + grad\n"
                "        leaf.grad = Tensor(self.total)"
            ),
        ),
    ],
    "free-second-backward": [("            self.saved = None\n", "            pass\n")],
    "free-shared-part": [
        (
            (
                "        saved = [t for t, needs in ((b, a.requires_grad), (a, b.requir"
                "es_grad)) if needs]\n"
                "        def backward(g, *s):\n"
                "            found = dict(zip([id(t) for t in saved], s, strict=True))\n"
                "            ga = g @"
            ),
            (
                "        saved = []\n"
                "        def backward(g, *s):\n"
                "            found = {id(a): a.data, id(b): b.data}\n"
                "            ga = g @"
            ),
        ),
    ],
    "free-nothing-saved": [("if not retain_graph and self.saved:", "if not retain_graph:")],
    "free-saved-number": [
        (
            (
                "if needs]\n"
                "        def backward(g, *s):\n"
                "            found = dict(zip([id(t) for t in saved], s, strict=True))\n"
                "            ga = _unbroadcast"
            ),
            (
                "if needs and (t is not b or isinstance(other, Tensor))]\n"
                "        def backward(g, *s):\n"
                "            found = {id(a): a.data, id(b): b.data, **dict(zip([id(t) f"
                "or t in saved], s, strict=True))}\n"
                "            ga = _unbroadcast"
            ),
        ),
    ],
    "free-keeps-nodes": [
        (
            "                        heapq.heappush(ready, (-child.priority, next(ties), child))\n",
            (
                "                        heapq.heappush(ready, (-child.priority, next(t"
                "ies), child))\n"
                "        for node in seen:\n"
                "            if node.saved is None:\n"
                "                node.next_functions = ()\n"
            ),
        ),
    ],
    "retain-graph": [("if not retain_graph and self.saved:", "if self.saved:")],
    "retain-graph-then-free": [
        (
            "        if not retain_graph and self.saved:",
            (
                '        self.keep = retain_graph or getattr(self, "keep", False)\n'
                "        if not self.keep and self.saved:"
            ),
        ),
    ],
    "version-counts": [
        ("        self._counter[0] += 1\n", "        self._counter[0] += op is np.add\n"),
    ],
    "version-saved-modified": [("if t._version != version:", "if False:")],
    "version-unsaved-fine": [
        (
            "        record = _recording[0] and (self.requires_grad or other.requires_grad)\n",
            "        record = False\n",
        ),
    ],
    "version-no-grad-counts": [
        ("        self._counter[0] += 1\n", "        self._counter[0] += _recording[0]\n"),
    ],
    "detach-leaf": [
        (
            "        alias = Tensor(0.0)\n",
            "        alias = Tensor(0.0, requires_grad=self.requires_grad)\n",
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
            "        op(self.data, other.data, out=self.data)\n",
            (
                "        if op is np.add:\n"
                "            self.data = self.data + other.data\n"
                "        else:\n"
                "            op(self.data, other.data, out=self.data)\n"
            ),
        ),
    ],
    "detach-leaves-original": [
        (
            "        alias.data, alias._counter = self.data, self._counter\n",
            (
                "        alias.data, alias._counter = self.data, self._counter\n"
                "        self.grad_fn = None\n"
            ),
        ),
    ],
    "detach-shares-version": [
        ("alias.data, alias._counter = self.data, self._counter", "alias.data = self.data"),
    ],
    "detach-cut": [
        (
            "        alias = Tensor(0.0)\n",
            "        alias = Tensor(0.0)\n        alias._accumulate = self._accumulate\n",
        ),
    ],
    "retain-grad-keeps": [("            self.grad_fn.retained = self\n", "")],
    "retain-grad-leaf": [
        (
            "        if not self.is_leaf:\n            self.retains_grad = True\n",
            "        self.retains_grad = True\n        if not self.is_leaf:\n",
        ),
    ],
    "retain-grad-no-requires": [
        (
            (
                "        if not self.requires_grad:\n"
                '            raise RuntimeError("can\'t retain_grad'
            ),
            '        if False:\n            raise RuntimeError("can\'t retain_grad',
        ),
    ],
    "retain-grad-not-reached": [
        (
            "            self.grad_fn.retained = self\n",
            (
                "            self.grad_fn.retained = self\n"
                "            self.grad = Tensor(np.zeros_like(self.data))\n"
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
            "        hooks.append(fn)\n",
            (
                "        hooks.append(fn)\n"
                "        if not self.is_leaf:\n"
                "            self.grad_fn.retained = self\n"
            ),
        ),
    ],
    "hook-order": [
        (
            "        for hook in list(self.pre_hooks):",
            "        for hook in reversed(self.pre_hooks):",
        ),
    ],
    "hook-then-retain": [
        (
            (
                "        for hook in list(self.pre_hooks):\n"
                "            grad = _replaced(hook, grad)\n"
                "        if (t := self.retained) is not None:\n"
                "            t.grad = Tensor(grad) if t.grad is None else Tensor(t.grad"
                ".data + grad)\n"
            ),
            (
                "        if (t := self.retained) is not None:\n"
                "            t.grad = Tensor(grad) if t.grad is None else Tensor(t.grad"
                ".data + grad)\n"
                "        for hook in list(self.pre_hooks):\n"
                "            grad = _replaced(hook, grad)\n"
            ),
        ),
    ],
    "hook-on-leaf": [
        (
            (
                "        for hook in list(leaf._hooks):\n"
                "            grad = _replaced(hook, grad)\n"
                "        leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf"
                ".grad.data + grad)\n"
            ),
            (
                "        leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf"
                ".grad.data + grad)\n"
                "        for hook in list(leaf._hooks):\n"
                "            grad = _replaced(hook, grad)\n"
            ),
        ),
    ],
    "hook-post-accumulate": [("            hook(leaf)\n", "            hook(leaf.grad)\n")],
    "sgd-step": [
        (
            "        self._counter[0] += 1\n",
            (
                "        self._counter[0] += 1\n"
                "        self._requires_grad = self._requires_grad and _recording[0]\n"
            ),
        ),
    ],
}


def engine_with(edits: list[tuple[str, str]]) -> types.ModuleType:
    """The reference engine with each `old` text of its source (found once) replaced by `new`."""
    source = REFERENCE.read_text(encoding="utf-8")
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    module = types.ModuleType("broken_engine")
    exec(compile(source, module.__name__, "exec"), module.__dict__)
    return module


def broken(rule_id: str) -> types.ModuleType:
    """The reference engine with the one bug that breaks `rule_id`."""
    return engine_with(MUTANTS[rule_id])


def said(result) -> list[str]:
    return result.messages


def test_the_reference_engine_obeys_every_rule():
    result = nb05b.check_engine(engine_reference)
    assert result.ok, text(result)
    assert result.success_text == f"All {len(nb05b.rules())} rules agree with torch."


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
    lines = said(nb05b.check_engine(broken("backward-fills-leaves")))  # a crash, named
    assert lines[1] == "torch: [[3, 4], 1]" and lines[2].startswith("your engine raised KeyError")
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


def test_the_notebooks_globals_serve_as_an_engine():
    assert nb05b.check_engine(vars(engine_reference)).ok
    partial = {k: v for k, v in vars(engine_reference).items() if k != "no_grad"}
    assert "NameError: name 'no_grad' is not defined" in text(nb05b.check_engine(partial))


def test_observations_keep_bools_none_and_numbers_apart():
    assert nb05b.observe((torch.tensor([1.0, 2.0]), np.float64(3), None, True)) == [
        [1.0, 2.0], 3.0, None, True
    ]
    assert nb05b.observe(engine_reference.Tensor([[1, 2]])) == [[1.0, 2.0]]
    assert nb05b.observe(object()) == "<object>"
    same = nb05b._same
    assert same([1.0, None], [1.0 + 1e-9, None]) and not same([True], [1.0])
    assert not same([1.0], [1.001]) and not same([1.0], [1.0, 2.0]) and not same(None, 0.0)


def test_the_checker_speaks_chinese():
    set_language("zh")
    try:
        result = nb05b.check_engine(broken("leaf-created"))
        ok = nb05b.check_engine(engine_reference)
    finally:
        set_language("en")
    assert "规则 1" in text(result) and "torch" in text(result)
    assert "57" in ok.success_text and "torch" in ok.success_text


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
    ours = _two_layer_losses(engine_reference)
    torchs = _two_layer_losses(nb05b.torch_engine())
    assert ours[-1] < 0.8 * ours[0]  # it learns
    np.testing.assert_allclose(ours, torchs, rtol=1e-6)
    assert not np.allclose(_two_layer_losses(broken("backward-through-every-op")), torchs)


def test_the_reference_engine_is_numpy_only_and_at_most_300_lines():
    source = REFERENCE.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 300
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"numpy", "heapq", "itertools"}, imported
