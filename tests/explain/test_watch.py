"""The watch notes an optimizer's step as one call (torch's optimizer-step hooks), not call by
call: what the step changed is still named, at the learner's `optimizer.step()` line, with the
tensor's versions; a step that raises leaves the watch looking at every call again; and torch's
hooks are there only while a watch is on."""

from __future__ import annotations

import linecache
import re
import sysconfig
from pathlib import Path

import pytest
import torch
from torch import nn

import helpers
from helpers import explain
from helpers.explain.watch import Watch

OPTIMIZERS = {
    "SGD": lambda params: torch.optim.SGD(params, lr=0.1),
    "SGD with momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "Adam": lambda params: torch.optim.Adam(params, lr=0.1),
    "Adam, foreach": lambda params: torch.optim.Adam(params, lr=0.1, foreach=True),
    "RMSprop": lambda params: torch.optim.RMSprop(params, lr=0.1),
}


def _explained(program) -> explain.Explanation:
    watch = Watch()
    with watch:
        try:
            program()
        except RuntimeError as err:
            return explain.explain(err, err.__traceback__, watch)
    raise AssertionError("the program raised nothing")


def _changed(explanation: explain.Explanation) -> explain.Place:
    return next(p for p in explanation.places if p.role == "changed")


def _versions(explanation: explain.Explanation) -> tuple[int, int]:
    """The versions torch's message gives: the one backward expected, the one it found."""
    found = re.search(r"is at version (\d+); expected version (\d+)", explanation.torch_message)
    return int(found[2]), int(found[1])


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_step_between_a_loss_and_its_backward_is_named_at_the_step_line(kind):
    def program():
        torch.manual_seed(0)
        critic = nn.Linear(3, 1)
        optimizer = OPTIMIZERS[kind](critic.parameters())
        fake = torch.randn(4, 3, requires_grad=True)
        loss_g = critic(fake).sum()
        for _ in range(2):  # a second step: the optimizer's state exists and changes too
            optimizer.zero_grad()
            critic(fake.detach()).sum().backward()
            optimizer.step()
        loss_g.backward()

    explanation = _explained(program)
    assert explanation.family == "inplace_saved"
    changed = _changed(explanation)
    assert changed.at.code == "optimizer.step()" and changed.at.function == "program"
    expected, found = _versions(explanation)
    name = type(OPTIMIZERS[kind]([torch.ones(1, requires_grad=True)])).__name__
    # the first step moved the saved weight from the version backward expected
    assert changed.detail == f"{name}.step: {expected} → {expected + 1}"
    assert found == expected + 2  # and the second step again
    assert "AddmmBackward0" in explanation.what


def test_a_state_tensor_of_the_optimizer_saved_by_a_graph_counts():
    def program():
        torch.manual_seed(0)
        w = torch.randn(3, requires_grad=True)
        optimizer = torch.optim.Adam([w], lr=0.1)
        (w * w).sum().backward()
        optimizer.step()
        momentum = optimizer.state[w]["exp_avg"]
        penalty = (w * momentum).sum()  # saves the optimizer's exp_avg for backward
        optimizer.zero_grad()
        (w * w).sum().backward()
        optimizer.step()  # changes exp_avg in place: the step the explanation names
        penalty.backward()

    explanation = _explained(program)
    assert explanation.family == "inplace_saved"
    assert explanation.place("changed").code.startswith("optimizer.step()  # changes exp_avg")
    assert explanation.place("saved").code.startswith("penalty = (w * momentum).sum()")
    expected, _ = _versions(explanation)
    assert _changed(explanation).detail == f"Adam.step: {expected} → {expected + 1}"


def test_a_closure_the_step_calls_is_watched_call_by_call():
    """LBFGS runs the learner's closure inside its step: the closure's in-place change is named
    at its own line, not at the step's."""

    def program():
        torch.manual_seed(0)
        w = torch.randn(3, requires_grad=True)
        optimizer = torch.optim.LBFGS([w], max_iter=1)
        x = torch.randn(3)

        def closure():
            optimizer.zero_grad()
            h = (w * x).sigmoid()
            loss = (h * h).sum()
            h.mul_(2)  # in place, inside the step
            loss.backward()
            return loss

        optimizer.step(closure)

    explanation = _explained(program)
    assert explanation.place("changed").code == "h.mul_(2)  # in place, inside the step"
    assert explanation.place("saved").code == "loss = (h * h).sum()"


def test_a_step_that_raises_leaves_the_watch_looking_at_every_call():
    def program():
        x = torch.ones(3, requires_grad=True)
        h = x.exp()
        y = h * h
        optimizer = torch.optim.SparseAdam([x], lr=0.1)
        (x * 2).sum().backward()
        with torch.no_grad():  # gradients stay off after the step, as they are inside it
            try:
                optimizer.step()  # raises inside the step: SparseAdam refuses dense gradients
            except RuntimeError:
                pass
            h.mul_(2)
        y.sum().backward()

    explanation = _explained(program)
    assert explanation.place("changed").code == "h.mul_(2)"


def test_torchs_step_hooks_are_there_only_while_a_watch_is_on():
    from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

    assert not _global_optimizer_pre_hooks and not _global_optimizer_post_hooks
    first, second = Watch(), Watch()
    with first:
        assert len(_global_optimizer_pre_hooks) == len(_global_optimizer_post_hooks) == 1
        with second:
            assert len(_global_optimizer_pre_hooks) == 1
        assert len(_global_optimizer_pre_hooks) == 1
    assert not _global_optimizer_pre_hooks and not _global_optimizer_post_hooks


def test_the_watch_keeps_the_last_records_only_however_many_parameters_a_step_changes():
    from helpers.explain.watch import KEPT

    torch.manual_seed(0)
    many = [torch.randn(2, requires_grad=True) for _ in range(KEPT + 44)]
    optimizer = torch.optim.SGD(many, lr=0.1)
    watch = Watch()
    with watch:
        for _ in range(3):
            sum(p.sum() for p in many).backward()
            optimizer.step()
        few = torch.zeros(3)
        few.add_(1)  # one learner's in-place call after the steps
    records = watch.inplace
    assert len(records) == KEPT
    assert records[-1].call == "add_" and records[-1].at.code.startswith("few.add_(1)")
    steps = records[:-1]
    assert {r.call for r in steps} == {"SGD.step"}
    assert [r.tensor() for r in steps] == many[-(KEPT - 1) :]  # the last step's, in order
    assert {(r.version_before, r.version_after) for r in steps} == {(2, 3)}
    assert len(watch._changes) == 2  # the last step and the call: the older steps let go
    assert watch._held == KEPT + 1  # and of the last step, only its last KEPT changes


def test_clear_forgets_what_the_watch_saw():
    watch = Watch()
    with watch:
        x = torch.ones(3, requires_grad=True)
        h = x * 2
        h.mul_(2)  # an in-place change
        h.sum().backward()  # a backward
        h.sum().item()  # a cut: a Python number
        torch.set_grad_enabled(False)  # gradients off
        torch.set_grad_enabled(True)
    seen = (watch.inplace, watch.backwards, watch.cuts, watch.grad_off_at, watch.backwards_seen)
    assert all(seen)
    watch.grad_off_by_checkpoint = True
    watch.clear()
    assert (watch.inplace, list(watch.backwards), list(watch.cuts)) == ([], [], [])
    assert (watch.grad_off_at, watch.grad_off_by_checkpoint, watch.backwards_seen) == (
        None,
        False,
        0,
    )


def test_a_step_is_noted_when_it_ends_one_record_per_tensor_it_changed():
    torch.manual_seed(0)
    w = torch.randn(2, requires_grad=True)
    optimizer = torch.optim.Adam([w], lr=0.1)
    (w * w).sum().backward()
    optimizer.step()  # unwatched: now the optimizer has its state
    watch = Watch()
    with watch:
        (w * w).sum().backward()
        optimizer.step()
        records = watch.inplace  # no torch call since the step: its end noted it
        optimizer.state.clear()  # the state's tensors die with it
        left = watch.inplace
    assert len(records) == 4  # Adam's step count, exp_avg, exp_avg_sq; then the parameter
    assert {(r.call, r.made_by, r.at.code, r.backwards) for r in records} == {
        ("Adam.step", "", "optimizer.step()", 1)  # leaves, after one watched backward
    }
    assert records[-1].tensor() is w and (
        records[-1].version_before,
        records[-1].version_after,
    ) == (1, 2)
    assert [r.tensor() for r in left] == [w]  # a dead tensor's record goes, the others stay


HALVING = """
class Halving(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.mul_(0.5)
"""


def _halving_from(module: str, filename: str) -> type:
    """The same optimizer, as if module `module` in file `filename` had defined it (its lines
    readable there, as a real file's are)."""
    linecache.cache[filename] = (len(HALVING), None, HALVING.splitlines(True), filename)
    namespace = {"__name__": module, "torch": torch}
    exec(compile(HALVING, filename, "exec"), namespace)
    return namespace["Halving"]


def test_a_step_the_learner_wrote_is_watched_line_by_line(tmp_path):
    halving = _halving_from("learners_optimizer", str(tmp_path / "learners_optimizer.py"))

    def program():
        w = torch.ones(3, requires_grad=True)
        optimizer = halving([w])
        loss = (w * w).sum()  # saves w
        optimizer.step()
        loss.backward()

    explanation = _explained(program)
    assert explanation.place("changed").code == "p.mul_(0.5)"  # inside the step, its own line


@pytest.mark.parametrize(
    "where",
    [
        ("another installed package", "other_optim", sysconfig.get_paths()["purelib"]),
        ("the course's own package", "helpers.halving", str(Path(helpers.__file__).parent)),
    ],
    ids=lambda where: where[0],
)
def test_an_optimizer_that_is_not_the_learners_is_noted_as_one_call(where):
    _, module, folder = where
    optimizer = _halving_from(module, str(Path(folder) / "halving.py"))([w := torch.ones(2)])
    watch = Watch()
    with watch:
        optimizer.step()
        records = watch.inplace
    assert [(r.call, r.tensor() is w) for r in records] == [("Halving.step", True)]


def test_each_way_to_start_a_backward_is_noted_with_its_roots_and_retain_graph():
    """Tensor.backward and torch.autograd.grad (torch 2.4 hands a mode no
    torch.autograd.backward call: the watch cannot see that one there)."""
    w = torch.ones(2, requires_grad=True)
    ab = [(w * 2).sum(), (w * 3).sum()]
    leaf = torch.ones((), requires_grad=True)
    watch = Watch()
    noted = []
    with watch:
        loss = (w * w).sum()
        loss.backward(None, True)  # retain_graph, the third positional
        noted.append(watch.backwards[-1])
        loss.backward(retain_graph=True)
        noted.append(watch.backwards[-1])
        torch.autograd.grad(outputs=loss, inputs=w, create_graph=True)  # keeps the graph too
        noted.append(watch.backwards[-1])
        torch.autograd.grad(loss, [w], None, True)  # retain_graph, the fourth positional
        noted.append(watch.backwards[-1])
        torch.autograd.grad(ab, [w])  # two roots, freed
        noted.append(watch.backwards[-1])
        w.sum().backward()
        noted.append(watch.backwards[-1])
        leaf.backward()  # a root without a grad_fn
        noted.append(watch.backwards[-1])
    assert [(b.call, b.retain_graph, b.count) for b in noted] == [
        ("backward", True, 0),
        ("backward", True, 1),
        ("grad", True, 2),
        ("grad", True, 3),
        ("grad", False, 4),
        ("backward", False, 5),
        ("backward", False, 6),
    ]
    assert watch.backwards_seen == 7
    assert [b.roots for b in noted[:4]] == [()] * 4  # a kept graph is never held
    assert noted[4].roots == (ab[0].grad_fn, ab[1].grad_fn)
    assert noted[4].newest == ab[1].grad_fn._sequence_nr() and noted[6].newest == -1
    assert noted[6].roots == (None,)
    assert [b.at.code for b in noted[:2]] == [
        "loss.backward(None, True)  # retain_graph, the third positional",
        "loss.backward(retain_graph=True)",
    ]
