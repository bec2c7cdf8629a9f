"""Check-yourself quizzes: predict what autograd does, then see it run.

    from helpers.quiz import quiz
    quiz("freeing")

Every question is a short program and a yes/no question about it ("Is `y.grad` None?", "Does
the last line raise?", "Do they share storage?"). The answer is not typed in: the program runs in
your kernel when the quiz is built, and the quiz refuses to show a question whose stated answer
disagrees with what torch did. After you click a prediction, the explanation names the
misconception behind the wrong answer. Static viewers get the questions with the answers folded
away (HTML `<details>`).
"""

from __future__ import annotations

import html
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from helpers import quiz_final
from helpers.checks import brief_message, clean_message
from helpers.display import Table
from helpers.widgets import LiveWidget, WidgetFactory

__all__ = [
    "CHOICES",
    "QUESTIONS",
    "TOPICS",
    "Observation",
    "Question",
    "Quiz",
    "answer_table",
    "questions",
    "quiz",
    "reveal_html",
]

#: Topic -> the notebook that teaches it.
TOPICS = {
    "leaf": "01_leaf_nodes.ipynb",
    "backward": "02_backward_and_optimizers.ipynb",
    "detach": "03_detach_and_clone.ipynb",
    "retain_grad": "04_retain_grad_and_hooks.ipynb",
    "freeing": "05_freeing_the_graph.ipynb",
    "split": "06_split_backward_three_models.ipynb",
    "processes": "07_split_across_processes.ipynb",
    "grad_modes": "08_grad_modes_and_why_nothing_learns.ipynb",
    "higher_order": "09_past_first_order.ipynb",
    **dict.fromkeys(quiz_final.TOPICS, quiz_final.NOTEBOOK),  # the final check, in sections
}
CHOICES = ("yes", "no")


@dataclass(frozen=True)
class Observation:
    """What running a question's program showed."""

    answer: str  # "yes" or "no"
    detail: str  # e.g. "`y.grad is None` is True" or "RuntimeError: ..."
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question:
    """A program, a yes/no question about it, and the misconception a wrong answer reveals.

    `probe` is a Python expression evaluated after `code`; its truth is the answer. Without a
    probe the question is "does the program raise?", and one whose answer is "yes" names what it
    expects in `raises`: the exception class and a fragment of its message. Any other exception
    (a typo's NameError, say) is a bug in the question, not an answer.

    `draws_on` names the topics a mixed question combines, and `transfer` marks a program unlike
    any the course showed (other operations and modules, the same rules): notebook 10's kinds.
    """

    topic: str
    prompt: str
    code: str
    answer: str
    misconception: str
    fact: str
    probe: str | None = None
    raises: tuple[type[Exception], str] | None = None
    draws_on: tuple[str, ...] = ()
    transfer: bool = False

    def __post_init__(self) -> None:
        unknown = [t for t in self.draws_on if t not in TOPICS]
        if unknown:
            raise ValueError(f"{self.prompt!r} draws on unknown topic(s) {unknown}")
        if self.probe is None and self.answer == "yes" and self.raises is None:
            raise ValueError(
                f"{self.prompt!r} asks whether the program raises and says yes: name the "
                "exception it expects, e.g. raises=(RuntimeError, 'a fragment of its message')"
            )
        if self.raises is not None and self.probe is not None:
            raise ValueError(f"{self.prompt!r}: a question has a probe or raises, not both")

    def run(self) -> Observation:
        """Run the program in a fresh namespace (global RNG untouched) and observe the answer."""
        namespace: dict[str, Any] = {"torch": torch}
        program = compile(self.code, f"<question: {self.prompt}>", "exec")  # SyntaxError: a bug
        with warnings.catch_warnings(record=True) as caught, torch.random.fork_rng(devices=[]):
            warnings.simplefilter("always")
            try:
                exec(program, namespace)
            except Exception as err:  # the exception is the observation
                if self.probe is not None:
                    raise AssertionError(
                        f"the program of {self.prompt!r} raised {type(err).__name__}: {err}"
                    ) from err
                if self.raises is not None:
                    expected, fragment = self.raises
                    if not isinstance(err, expected) or fragment not in str(err):
                        raise AssertionError(
                            f"the program of {self.prompt!r} raised {type(err).__name__}: {err}; "
                            f"the question is about {expected.__name__} ({fragment!r})"
                        ) from err
                message = clean_message(str(err)).splitlines()[0]
                observed = Observation("yes", f"{type(err).__name__}: {message}")
            else:
                if self.probe is None:
                    observed = Observation("no", "It ran without an error.")
                else:
                    value = eval(self.probe, namespace)
                    observed = Observation(
                        "yes" if value else "no", f"`{self.probe}` is {bool(value)}."
                    )
        seen = tuple(
            f"{w.category.__name__}: {brief_message(str(w.message)).splitlines()[0]}"
            for w in caught
        )
        return Observation(observed.answer, observed.detail, seen)


def _q(
    topic: str,
    prompt: str,
    code: str,
    answer: str,
    myth: str,
    fact: str,
    probe: str | None = None,
    raises: tuple[type[Exception], str] | None = None,
    draws_on: tuple[str, ...] = (),
    transfer: bool = False,
) -> Question:
    return Question(
        topic, prompt, code.strip("\n"), answer, myth, fact, probe, raises, draws_on, transfer
    )


QUESTIONS: list[Question] = [
    # ---- leaf nodes ------------------------------------------------------------------------
    _q(
        "leaf",
        "After this, is `y.grad` None?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x * 3
y.sum().backward()
""",
        "yes",
        "every tensor in the graph gets a .grad after backward().",
        "only leaves that require grad (here x) keep .grad. y has a grad_fn, so it is an "
        "intermediate: its gradient flows through it and is dropped, and reading y.grad even "
        "warns. Call y.retain_grad() before backward() to keep it.",
        probe="y.grad is None",
    ),
    _q(
        "leaf",
        "Is `w` a leaf?",
        """
w = torch.ones(3, requires_grad=True) * 0.5
""",
        "no",
        "a tensor created with requires_grad=True is a leaf, so w.grad will be filled.",
        "the leaf is the ones tensor; w is the result of a multiplication (grad_fn "
        "MulBackward0), so w.grad stays None. Make the leaf in one step: "
        "torch.full((3,), 0.5, requires_grad=True).",
        probe="w.is_leaf",
    ),
    _q(
        "leaf",
        "Does the last line raise an error?",
        """
tokens = torch.tensor([2, 1, 3, 0, 9])
tokens.requires_grad_()
""",
        "yes",
        "inputs have no gradient and should not have one (the post's claim).",
        "integer inputs such as token ids cannot require grad at all: a discrete value has "
        "no gradient. Float inputs can, and then get .grad (saliency maps, adversarial "
        "examples, the cut in split learning).",
        raises=(RuntimeError, "only Tensors of floating point dtype can require gradients"),
    ),
    # ---- backward, zero_grad, step ------------------------------------------------------------
    _q(
        "backward",
        "Has `w` changed?",
        """
w = torch.tensor([1.0, 2.0], requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
(w ** 2).sum().backward()
""",
        "no",
        "backward() updates the parameters.",
        "backward() only fills w.grad (here [2, 4]). Parameters change at opt.step(), or by a "
        "manual update under torch.no_grad().",
        probe="not torch.equal(w, torch.tensor([1.0, 2.0]))",
    ),
    _q(
        "backward",
        "Has `w` changed, without any optimizer?",
        """
w = torch.tensor([1.0, 2.0], requires_grad=True)
(w ** 2).sum().backward()
with torch.no_grad():
    w -= 0.1 * w.grad
""",
        "yes",
        "backpropagation needs an optimizer, otherwise the parameters are not updated "
        "(the post's claim).",
        "an optimizer is one way to apply p ← p − lr·grad; doing it by hand under "
        "torch.no_grad() is the same SGD step. w is now [0.8, 1.6].",
        probe="not torch.equal(w, torch.tensor([1.0, 2.0]))",
    ),
    _q(
        "backward",
        "Is `w.grad` None now?",
        """
w = torch.tensor([1.0, 2.0], requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
(w ** 2).sum().backward()
opt.zero_grad()
""",
        "yes",
        "zero_grad() fills the gradients with zeros.",
        "since PyTorch 2.0, zero_grad() sets .grad to None (set_to_none=True); zeros only "
        "with zero_grad(set_to_none=False). It matters: optimizers skip a parameter whose "
        ".grad is None, but a zero gradient still moves it under momentum or Adam once the "
        "optimizer has state from earlier steps (a fresh Adam does not move on a zero gradient).",
        probe="w.grad is None",
    ),
    _q(
        "backward",
        "Is `w.grad` equal to d loss / d w = 2·w = 6?",
        """
w = torch.tensor([3.0], requires_grad=True)
loss = (w * w).sum()
loss.backward(loss)
""",
        "no",
        "loss.backward() is short for loss.backward(grad=loss) (the post's claim).",
        "the argument is called gradient, and for a scalar it defaults to "
        "torch.ones_like(loss). Passing loss multiplies every gradient by the loss value: "
        "w.grad is 9 × 6 = 54.",
        probe="w.grad.item() == 6.0",
    ),
    # ---- detach and clone ---------------------------------------------------------------------
    _q(
        "detach",
        "Has `a` changed too?",
        """
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = a.detach()
b[0] = 10.0
""",
        "yes",
        "detach() makes a copy.",
        "detach() returns a tensor without history that shares a's storage: writing into b "
        "writes into a. Use a.detach().clone() for an independent copy.",
        probe="a[0].item() == 10.0",
    ),
    _q(
        "detach",
        "Do `a` and `b` share storage?",
        """
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = a.clone()
""",
        "no",
        "clone() is another name for the same data, like detach().",
        "clone() copies the data into new memory but stays in the graph (b.grad_fn is "
        "CloneBackward0), so gradients still flow back to a. The post's cut "
        "f1.clone().detach() uses both: clone for new memory, detach for no history.",
        probe="a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()",
    ),
    _q(
        "detach",
        "Does the last line raise an error?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x.exp()
y.detach().zero_()
y.sum().backward()
""",
        "yes",
        "a detached tensor is safe to modify: autograd never sees it.",
        "y.detach() shares y's storage and its version counter. exp saved its result y for "
        "backward; zero_() changed it in place, and backward refuses to use the stale value.",
        raises=(RuntimeError, "modified by an inplace operation"),
    ),
    # ---- retain_grad and hooks ----------------------------------------------------------------
    _q(
        "retain_grad",
        "Is `h.grad` None?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
h = x * 2
h.retain_grad()
(h * h).sum().backward()
""",
        "no",
        "only leaves can ever have a .grad.",
        "retain_grad() asks autograd to keep the gradient of a non-leaf: h.grad is 2h = "
        "[4, 8]. (The post's f1.rtain_grad() is a typo for it.)",
        probe="h.grad is None",
    ),
    _q(
        "retain_grad",
        "Is `h.grad` None?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
h = x * 2
(h * h).sum().backward()
h.retain_grad()
""",
        "yes",
        "retain_grad() can be called at any time to read a gradient.",
        "retain_grad() prepares the next backward(); called afterwards it is too late: the "
        "gradient already flowed through h and was not kept.",
        probe="h.grad is None",
    ),
    _q(
        "retain_grad",
        "Is `x.grad` equal to [2, 2]?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
h = x * 2
h.register_hook(lambda grad: grad * 10)
h.sum().backward()
""",
        "no",
        "register_hook only saves the data flowing through the graph (the post's claim).",
        "a tensor hook sees the gradient flowing into h during backward and may replace it: "
        "returning grad * 10 scales everything upstream, so x.grad is [20, 20]. A hook saves "
        "nothing by itself.",
        probe="torch.equal(x.grad, torch.tensor([2.0, 2.0]))",
    ),
    # ---- freeing the graph --------------------------------------------------------------------
    _q(
        "freeing",
        "Does the last line raise an error?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = (x * x).sum()
y.backward()
y.backward()
""",
        "yes",
        "backward() can be called as often as you like.",
        "MulBackward0 saved x for its gradient, and the first backward() freed what it saved. "
        "Pass retain_graph=True to the first call to keep it.",
        raises=(RuntimeError, "backward through the graph a second time"),
    ),
    _q(
        "freeing",
        "Does the last line raise an error?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = (x + 1).sum()
y.backward()
y.backward()
""",
        "no",
        "backward() releases the whole graph (the post's claim).",
        "backward() frees the tensors the nodes saved for it. AddBackward0 and SumBackward0 "
        "save none, so a second backward() runs, and x.grad adds up to [2, 2].",
    ),
    _q(
        "freeing",
        "After backward(), is `y.grad_fn` None?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = (x * x).sum()
y.backward()
""",
        "no",
        "after backward() the graph is gone.",
        "the nodes stay: y.grad_fn is still SumBackward0 and next_functions still lead to "
        "the leaves. Only their saved tensors were freed.",
        probe="y.grad_fn is None",
    ),
    # ---- split learning ------------------------------------------------------------------------
    _q(
        "split",
        "Is `lin1.weight.grad` None?",
        """
lin1, lin2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
f1 = lin1(torch.ones(1, 2))
ff1 = f1.clone().detach().requires_grad_(True)  # the cut
lin2(ff1).sum().backward()
""",
        "yes",
        "one backward() from the loss reaches every model.",
        "the cut makes ff1 a new leaf: backward stops there and fills ff1.grad. Model 1 gets "
        "its gradients only from f1.backward(ff1.grad), the other half of the hand-off.",
        probe="lin1.weight.grad is None",
    ),
    _q(
        "split",
        "Is `ff1.grad` None?",
        """
lin1, lin2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
f1 = lin1(torch.ones(1, 2))
ff1 = f1.clone().detach().requires_grad_(True)  # the cut
lin2(ff1).sum().backward()
""",
        "no",
        "inputs have no gradient and should not have one (the post's claim).",
        "ff1 is model 2's input and a leaf that requires grad, so it gets .grad: exactly "
        "the gradient that model 2 sends back across the cut.",
        probe="ff1.grad is None",
    ),
    _q(
        "split",
        "Has `m1.weight` changed?",
        """
m1, m2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
opt = torch.optim.Adam([*m1.parameters(), *m2.parameters()], lr=0.1)
before = m1.weight.detach().clone()
m2(torch.ones(1, 2)).sum().backward()
opt.step()
""",
        "no",
        "step() updates every parameter the optimizer holds.",
        "optimizers skip parameters whose .grad is None: m1 got no gradient, so it did not "
        "move. With zero_grad(set_to_none=False) its .grad would be zeros, and Adam or "
        "momentum could move it on later steps.",
        probe="not torch.equal(m1.weight, before)",
    ),
    # ---- across processes ----------------------------------------------------------------------
    _q(
        "processes",
        "Does `copy` have a `grad_fn`?",
        """
import pickle

x = torch.ones(2, requires_grad=True)
h = x * 2
copy = pickle.loads(pickle.dumps(h))  # what another process would receive
""",
        "no",
        "a tensor sent to another process carries its graph with it.",
        "only the data and the requires_grad flag travel: copy arrives as a new leaf that "
        "requires grad, exactly like the cut ff1 = f1.clone().detach().requires_grad_(True).",
        probe="copy.grad_fn is not None",
    ),
    _q(
        "processes",
        "After backward on the receiving side, is `x.grad` None?",
        """
import pickle

x = torch.ones(2, requires_grad=True)
h = x * 2
copy = pickle.loads(pickle.dumps(h))
(copy * 3).sum().backward()
""",
        "yes",
        "backward on the receiving side reaches the sender's parameters.",
        "copy is a new leaf: copy.grad is [3, 3] and the backward pass stops there. x gets its "
        "gradient only when the sender calls h.backward(gradient) with copy.grad sent back.",
        probe="x.grad is None",
    ),
    _q(
        "processes",
        "Does the last line raise an error?",
        """
import torch.multiprocessing  # registers how torch sends tensors between processes
from multiprocessing.reduction import ForkingPickler

x = torch.ones(2, requires_grad=True)
h = x * 2
ForkingPickler.dumps(h)  # what putting h on a torch.multiprocessing queue does
""",
        "yes",
        "an activation can be put on a queue and backpropagated through on the other side.",
        "torch.multiprocessing refuses to send a non-leaf that requires grad: autograd does not "
        "cross process boundaries. Send h.detach() forward and the gradient back by hand.",
        raises=(RuntimeError, "Cowardly refusing to serialize non-leaf tensor"),
    ),
    _q(
        "processes",
        "Do the two rows of `sent_back` point in opposite directions?",
        """
import torch.nn.functional as F

h = torch.ones(2, 3, requires_grad=True)  # two examples arrive with equal activations
head = torch.nn.Linear(3, 1)  # the label holder's model
labels = torch.tensor([1.0, 0.0])  # these never leave the label holder
F.binary_cross_entropy_with_logits(head(h).squeeze(1), labels).backward()
sent_back = h.grad  # one row per example, sent back across the cut
""",
        "yes",
        "the gradient sent back says nothing about the labels, since the labels never cross.",
        "each row is (sigmoid(logit) - label) / 2 times head.weight: a negative factor for the "
        "positive example, a positive one for the negative, so the rows point in exactly "
        "opposite directions. Whoever receives h.grad can sort examples by label (notebook 07 "
        "measures it: Li et al., ICLR 2022).",
        probe="F.cosine_similarity(sent_back[0], sent_back[1], dim=0) < 0",
    ),
    # ---- grad modes and silent no-learning --------------------------------------------------
    _q(
        "grad_modes",
        "After `model.eval()`, does the output `y` require grad?",
        """
model = torch.nn.Linear(2, 1)
model.eval()
y = model(torch.ones(1, 2))
""",
        "yes",
        "model.eval() switches gradient tracking off.",
        "eval() only sets module.training = False, which dropout and batch norm read. Whether "
        "operations are recorded is a grad mode's job: evaluate under torch.no_grad() or "
        "torch.inference_mode() as well.",
        probe="y.requires_grad",
    ),
    _q(
        "grad_modes",
        "After backward, is `w.grad` None?",
        """
w = torch.randn(3, requires_grad=True).double()
(w * 2).sum().backward()
""",
        "yes",
        "a tensor created with requires_grad=True stays a leaf, whatever comes after on the line.",
        ".double() is an operation (ToCopyBackward0): w names its result, a non-leaf, so the "
        "gradient lands in the unnamed float32 tensor and an optimizer refuses w. Create it "
        "in float64: torch.randn(3, dtype=torch.float64, requires_grad=True).",
        probe="w.grad is None",
    ),
    _q(
        "grad_modes",
        "Inside both blocks, does `y` require grad?",
        """
x = torch.ones(2, requires_grad=True)
with torch.no_grad():
    with torch.enable_grad():
        y = x * 2
""",
        "yes",
        "nothing inside a torch.no_grad() block is ever recorded.",
        "grad modes nest and the innermost wins: enable_grad() switches recording back on "
        "inside no_grad(), and so does a function decorated with @torch.enable_grad().",
        probe="y.requires_grad",
    ),
    _q(
        "grad_modes",
        "Does this program raise an error?",
        """
with torch.inference_mode():
    features = torch.ones(3)
w = torch.ones(3, requires_grad=True)
(features * w).sum().backward()
""",
        "yes",
        "inference_mode() is a faster no_grad(), and its results are tensors like any other.",
        "inference_mode() makes inference tensors, which keep no version counter, so autograd "
        "refuses to save one for backward (mul needs features for w's gradient). Use "
        "features.clone() outside the block, or no_grad() when results may be trained on.",
        raises=(RuntimeError, "Inference tensors cannot be saved for backward"),
    ),
    _q(
        "grad_modes",
        "After `loss.requires_grad = True`, has `model.weight` changed?",
        """
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
before = model.weight.detach().clone()
with torch.no_grad():
    loss = model(torch.ones(1, 2)).sum()
loss.requires_grad = True
loss.backward()
opt.step()
""",
        "no",
        "setting loss.requires_grad = True fixes 'element 0 of tensors does not require grad'.",
        "it hides the error: the loss becomes a new leaf with nothing behind it, backward "
        "stops there, no parameter gets a .grad and step() skips them all. Remove the cut "
        "instead (here the no_grad block around the forward pass).",
        probe="not torch.equal(model.weight, before)",
    ),
    _q(
        "grad_modes",
        "Does `preds`, built with `torch.tensor(outs)`, require grad?",
        """
model = torch.nn.Linear(2, 1)
outs = [model(torch.ones(2)), model(torch.zeros(2))]  # one sample at a time
preds = torch.tensor(outs)
""",
        "no",
        "torch.tensor([...]) collects results into one tensor, like torch.stack.",
        "torch.tensor copies values: each element becomes a plain number, so preds is a new "
        "leaf without history and nothing before it can learn. torch.stack(outs) or "
        "torch.cat(outs) is recorded (StackBackward0, CatBackward0).",
        probe="preds.requires_grad",
    ),
    # ---- past first order --------------------------------------------------------------------
    _q(
        "higher_order",
        "Does the returned gradient `g` require grad?",
        """
x = torch.tensor(2.0, requires_grad=True)
(g,) = torch.autograd.grad(x ** 3, x)  # dy/dx = 3·x² = 12
""",
        "no",
        "a gradient computed from x is a result like any other, so it can be differentiated "
        "again.",
        "without create_graph=True the backward pass is not recorded: g is a plain 12 with no "
        "grad_fn. With create_graph=True, g gets a graph of its own and "
        "torch.autograd.grad(g, x) gives the second derivative 6·x = 12.",
        probe="g.requires_grad",
    ),
    _q(
        "higher_order",
        "Does `y.backward()` fail after the gradient was taken with create_graph=True?",
        """
x = torch.tensor(2.0, requires_grad=True)
y = x.exp()
(g,) = torch.autograd.grad(y, x, create_graph=True)
y.backward()
""",
        "no",
        "torch.autograd.grad frees the graph, so a later backward through it always fails.",
        "retain_graph defaults to create_graph: the graph of g needs exp's saved result, so the "
        "first graph is kept and y.backward() works. It is also why create_graph costs memory.",
    ),
    _q(
        "higher_order",
        "Is `x.grad` still None after `torch.func.grad`?",
        """
x = torch.tensor([1.0, 2.0], requires_grad=True)
g = torch.func.grad(lambda t: (t ** 2).sum())(x)  # [2, 4]
""",
        "yes",
        "torch.func.grad fills .grad, like backward().",
        "torch.func transforms return gradients as values, as torch.autograd.grad does: g is "
        "[2, 4] and nothing accumulates into x.grad. Only backward() writes .grad.",
        probe="x.grad is None",
    ),
    _q(
        "higher_order",
        "After backward through `torch.round`, is `x.grad` None?",
        """
x = torch.tensor([0.4, 1.6], requires_grad=True)
torch.round(x).sum().backward()
""",
        "no",
        "a step function like round cuts the graph, so x gets no gradient.",
        "round has a backward function (RoundBackward0) whose derivative is zero almost "
        "everywhere: x.grad is [0, 0]. Nothing learns through it, which is why quantised "
        "networks replace its backward with a straight-through estimator.",
        probe="x.grad is None",
    ),
    _q(
        "higher_order",
        "Does gradcheck reject this straight-through sign?",
        """
class SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad):
        return grad  # straight through


x = torch.tensor([-0.5, 0.5], dtype=torch.float64, requires_grad=True)
ok = torch.autograd.gradcheck(SignSTE.apply, (x,), raise_exception=False)
""",
        "yes",
        "a backward that training relies on passes gradcheck.",
        "gradcheck compares backward with finite differences of forward: 0 for sign, 1 from "
        "the STE. It fails by design; check an STE against the surrogate it stands for "
        "(the identity here, a clamp for the clipped STE).",
        probe="not ok",
    ),
    _q(
        "higher_order",
        "Does the checkpointed function run twice?",
        """
from torch.utils.checkpoint import checkpoint

calls = []


def block(t):
    calls.append(1)
    return t.sin()


x = torch.tensor([1.0, 2.0], requires_grad=True)
checkpoint(block, x, use_reentrant=False).sum().backward()
""",
        "yes",
        "checkpoint caches the block's results, so backward reuses them.",
        "checkpoint keeps only the block's inputs and runs the block again in backward to "
        "rebuild what it saved (here sin's input): compute for memory, the opposite trade to "
        "retain_graph.",
        probe="len(calls) == 2",
    ),
]
QUESTIONS += [_q(**spec) for spec in quiz_final.SPECS]  # notebook 10: new programs, mixed topics


def questions(*topics: str) -> list[Question]:
    """The questions on these topics (all questions when none is given), in course order."""
    unknown = [t for t in topics if t not in TOPICS]
    if unknown:
        raise ValueError(f"unknown topic(s) {unknown}; topics are: {', '.join(TOPICS)}")
    return [q for q in QUESTIONS if not topics or q.topic in topics]


def reveal_html(question: Question, observed: Observation, prediction: str | None = None) -> str:
    """The feedback after a prediction (None: just the answer): verdict, run, misconception."""
    if prediction is None:
        verdict = f"<b>Answer: {observed.answer}.</b>"
    elif prediction == observed.answer:
        verdict = f'<b style="color: #1a7f37">✅ Right: {observed.answer}.</b>'
    else:
        verdict = f'<b style="color: #cf222e">❌ Not quite: the answer is {observed.answer}.</b>'

    notes = "".join(f"<br/>It also warned: {html.escape(w)}" for w in observed.warnings)
    return (
        f'<div style="margin: 4px 0 8px 0">{verdict} Running it: '
        f"{html.escape(observed.detail)}{notes}<br/>"
        f"<b>Misconception:</b> {html.escape(question.misconception)}<br/>"
        f"<b>Fact:</b> {html.escape(question.fact)}</div>"
    )


def _inline_code(text: str) -> str:
    """Escaped text with `backticks` turned into <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _question_html(number: int, question: Question) -> str:
    return (
        f"<b>{number}. {_inline_code(question.prompt)}</b>"
        '<pre style="margin: 4px 0; padding: 6px; background: #f6f8fa; font-size: 12px">'
        f"{html.escape(question.code)}</pre>"
    )


def answer_table(items: list[Question]) -> Table:
    """Each question's stated answer beside what running it gives (they must agree), with the
    notebooks behind it (those it draws on, else its topic's) and whether its code is new."""
    rows = []
    for i, q in enumerate(items, start=1):
        observed = q.run()
        rows.append(
            {
                "question": f"{i}. {q.prompt}",
                "notebooks": ", ".join(sorted(TOPICS[t][:2] for t in q.draws_on or (q.topic,))),
                "new code": q.transfer,
                "stated": q.answer,
                "observed": observed.answer,
                "agree": q.answer == observed.answer,
            }
        )
    columns = ["question", "notebooks", "new code", "stated", "observed", "agree"]
    return Table(columns, rows)


class Quiz(LiveWidget):
    """Questions with yes/no buttons; a click reveals the answer and the misconception."""

    def __init__(self, items: list[Question], title: str = "Check yourself", start: int = 1):
        self.items = list(items)
        self.title = title
        self.start = start
        self.observed = [q.run() for q in self.items]
        for q, seen in zip(self.items, self.observed, strict=True):
            if q.answer != seen.answer:
                raise AssertionError(
                    f"question {q.prompt!r} says {q.answer!r}, but running it gives "
                    f"{seen.answer!r} ({seen.detail}); this torch behaves differently"
                )
        make = WidgetFactory()
        button_layout = make.new_layout(width="80px")
        self.buttons: list[list[Any]] = []
        self.reveals: list[Any] = []
        boxes = [make("HTML", value=f"<h4 style='margin: 4px 0'>{html.escape(self.title)}</h4>")]
        for number, q in enumerate(self.items, start=self.start):
            reveal = make("HTML")
            buttons = [make("Button", description=c, layout=button_layout) for c in CHOICES]
            for button in buttons:
                button.on_click(self._on_click(len(self.reveals)))
            box = make(
                "VBox",
                children=[
                    make("HTML", value=_question_html(number, q)),
                    make("HBox", children=buttons),
                    reveal,
                ],
            )
            box.add_class("autograd-question")
            boxes.append(box)
            self.buttons.append(buttons)
            self.reveals.append(reveal)
        widget = make("VBox", children=boxes)
        widget.add_class("autograd-quiz")
        super().__init__(widget, text=self._text(), html_fallback=self._static_html())

    def _on_click(self, index: int):
        def click(button: Any) -> None:
            self.answer(index, button.description)

        return click

    def answer(self, index: int, prediction: str) -> bool:
        """Record a prediction for question `index` (0-based) and reveal; True when right."""
        q, seen = self.items[index], self.observed[index]
        right = prediction == seen.answer
        for button in self.buttons[index]:
            chosen = button.description == prediction
            button.button_style = ("success" if right else "danger") if chosen else ""
        self.reveals[index].value = reveal_html(q, seen, prediction)
        return right

    def _text(self) -> str:
        lines = [f"{self.title} ({len(self.items)} questions; interactive: run the notebook)"]
        for number, (q, seen) in enumerate(zip(self.items, self.observed, strict=True), self.start):
            lines += [
                "",
                f"{number}. {q.prompt}",
                *("    " + line for line in q.code.splitlines()),
                f"   Answer: {seen.answer}. {seen.detail}",
                f"   Misconception: {q.misconception}",
                f"   Fact: {q.fact}",
            ]
        return "\n".join(lines)

    def _static_html(self) -> str:
        parts = [f"<h4>{html.escape(self.title)}</h4>"]
        for number, (q, seen) in enumerate(zip(self.items, self.observed, strict=True), self.start):
            parts.append(
                f"<div>{_question_html(number, q)}"
                f"<p>Your prediction: yes or no?</p>"
                "<details><summary>Show the answer</summary>"
                f"{reveal_html(q, seen)}</details></div>"
            )
        return "".join(parts)


def quiz(*topics: str, title: str = "Check yourself", start: int = 1) -> Quiz:
    """A quiz on these topics (all when none is given), numbered from `start`."""
    return Quiz(questions(*topics), title=title, start=start)
