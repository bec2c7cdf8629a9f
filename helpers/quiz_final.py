"""The questions of notebook 10: a final check, not a rerun of the notebooks' own quizzes.

Each question mixes ideas from several notebooks (`draws_on`, the course topics it combines), and
many apply them to code the course never showed (`transfer`: other operations and modules, the
same rules). None repeats a prompt or a program of another notebook (tests/test_quiz_final.py).

These are plain specifications; `helpers.quiz` builds them into `Question`s, which run their
programs to compute every answer live, like all of the course's questions.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NOTEBOOK", "SPECS", "TOPICS"]

NOTEBOOK = "10_check_yourself.ipynb"

#: The final check's topics, one per section of notebook 10, in order.
TOPICS = ("final_gradients", "final_memory", "final_handoffs", "final_beyond")

#: Keyword arguments of `helpers.quiz._q`, one dict per question, in the order they are asked.
SPECS: list[dict[str, Any]] = [
    # ---- 1 · Where the gradients go ----------------------------------------------------------
    {
        "topic": "final_gradients",
        "prompt": "Row 1 is looked up twice and row 0 once: do their gradients match?",
        "code": """
emb = torch.nn.Embedding(4, 2)
emb(torch.tensor([0, 1, 1])).sum().backward()
""",
        "answer": "no",
        "myth": "a lookup copies a row out of the table, so each row gets the gradient of one "
        "use, however often it appears.",
        "fact": "every lookup sends its gradient back into its row of emb.weight, and the "
        "gradients add up, as for any tensor used twice: row 1 gets the sum of its two uses. "
        "Rows never looked up get zeros, not None: the table's gradient is one dense tensor "
        "(unless sparse=True).",
        "probe": "torch.equal(emb.weight.grad[1], emb.weight.grad[0])",
        "draws_on": ("leaf", "backward"),
        "transfer": True,
    },
    {
        "topic": "final_gradients",
        "prompt": "Called inside `torch.no_grad()`, does `loss.backward()` still fill `w.grad`?",
        "code": """
w = torch.tensor([1.0, 2.0], requires_grad=True)
loss = (w * w).sum()
with torch.no_grad():
    loss.backward()
""",
        "answer": "yes",
        "myth": "torch.no_grad() switches gradients off, so backward() inside it does nothing.",
        "fact": "a grad mode decides whether the operations run inside it are recorded. The "
        "graph of loss was recorded before the block, and backward() runs it in any mode.",
        "probe": "w.grad is not None",
        "draws_on": ("grad_modes", "backward"),
    },
    {
        "topic": "final_gradients",
        "prompt": "Does `w` get a gradient through the parameter `p` made from it?",
        "code": """
w = torch.tensor([1.0, 2.0], requires_grad=True)
p = torch.nn.Parameter(w * 2)
(p * p).sum().backward()
""",
        "answer": "no",
        "myth": "nn.Parameter(t) marks t as trainable and keeps its history.",
        "fact": "nn.Parameter makes a new leaf from t's data, like t.detach().requires_grad_(): "
        "backward fills p.grad and stops there, so it never reaches w. Wrap plain data in "
        "nn.Parameter; to train w, compute with w itself.",
        "probe": "w.grad is not None",
        "draws_on": ("leaf", "detach"),
        "transfer": True,
    },
    {
        "topic": "final_gradients",
        "prompt": "Does building `opt_b` from the same `params` raise?",
        "code": """
model = torch.nn.Linear(2, 1)
params = model.parameters()
opt_a = torch.optim.SGD(params, lr=0.1)
opt_b = torch.optim.Adam(params, lr=0.1)  # a second optimizer, to compare the two
""",
        "answer": "yes",
        "myth": "model.parameters() is a list that any number of optimizers can share.",
        "fact": "parameters() returns a generator: opt_a used it up, so opt_b receives nothing "
        "and refuses the empty list. Mixed with other tensors, Adam([*params, extra]) would "
        "leave the model out silently. Call model.parameters() for each optimizer, or keep "
        "list(model.parameters()).",
        "raises": (ValueError, "empty parameter list"),
        "draws_on": ("backward", "grad_modes"),
        "transfer": True,
    },
    {
        "topic": "final_gradients",
        "prompt": "Does `b.grad` have three elements, like `e.grad`?",
        "code": """
b = torch.tensor([1.0], requires_grad=True)
e = b.expand(3)  # three views of b's one element
e.retain_grad()
e.sum().backward()
""",
        "answer": "no",
        "myth": "a leaf that is broadcast gets one gradient per copy.",
        "fact": "a leaf's .grad always has the leaf's shape: expand's backward sums the "
        "gradients of the copies into b's single element. The same sum happens to a bias "
        "added to every row of a batch.",
        "probe": "b.grad.shape == e.grad.shape",
        "draws_on": ("retain_grad", "backward"),
        "transfer": True,
    },
    {
        "topic": "final_gradients",
        "prompt": "Does AdamW's weight decay still shrink `lin.weight`, frozen after the "
        "optimizer was built?",
        "code": """
lin = torch.nn.Linear(2, 1)
opt = torch.optim.AdamW(lin.parameters(), lr=0.1, weight_decay=0.5)
lin.weight.requires_grad_(False)  # frozen later, e.g. to fine-tune the bias only
before = lin.weight.clone()
lin(torch.ones(1, 2)).sum().backward()
opt.step()
""",
        "answer": "no",
        "myth": "weight decay shrinks every parameter an optimizer holds, at every step.",
        "fact": "optimizers skip a parameter whose .grad is None, weight decay included: "
        "lin.weight got no gradient, so it stays put while the bias moves. A gradient of "
        "zeros (zero_grad(set_to_none=False)) would be decayed.",
        "probe": "not torch.equal(lin.weight, before)",
        "draws_on": ("grad_modes", "backward"),
        "transfer": True,
    },
    # ---- 2 · Shared memory, in-place edits, saved tensors ------------------------------------
    {
        "topic": "final_memory",
        "prompt": "Does `best` still hold the weights from before the step?",
        "code": """
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
best = model.state_dict()["weight"]  # keep the best weights so far
model(torch.ones(1, 2)).sum().backward()
opt.step()
""",
        "answer": "no",
        "myth": "state_dict() returns a copy of the weights, a safe snapshot.",
        "fact": "state_dict() returns the parameters detached, not copied: best shares "
        "model.weight's storage, and step() writes into that storage, so best moves with it. "
        "Snapshot with {k: v.clone() for k, v in model.state_dict().items()}.",
        "probe": "not torch.equal(best, model.weight)",
        "draws_on": ("detach", "backward"),
        "transfer": True,
    },
    {
        "topic": "final_memory",
        "prompt": "Does backward through `ReLU(inplace=True)` after `Sigmoid` raise?",
        "code": """
net = torch.nn.Sequential(
    torch.nn.Linear(2, 2), torch.nn.Sigmoid(), torch.nn.ReLU(inplace=True)
)
net(torch.ones(1, 2)).sum().backward()
""",
        "answer": "yes",
        "myth": "inplace=True is a free memory saving for any activation.",
        "fact": "Sigmoid saves its output for backward (its derivative is s·(1 − s)), and the "
        "in-place ReLU overwrites exactly that tensor: its version goes up and backward "
        "refuses. Right after Linear, which does not save its output, inplace=True is safe.",
        "raises": (RuntimeError, "modified by an inplace operation"),
        "draws_on": ("detach", "freeing"),
        "transfer": True,
    },
    {
        "topic": "final_memory",
        "prompt": "Does the pickled `msg` carry only the two values of `part`?",
        "code": """
import pickle

h = torch.zeros(1000)
part = h[:2]  # the two values to send
msg = pickle.dumps(part)
""",
        "answer": "no",
        "myth": "a slice is a small tensor, so sending it sends a few bytes.",
        "fact": "part is a view: it shares h's storage, and pickling a tensor (torch.save "
        "too) writes its whole storage, so msg carries all of h. Send part.clone(), which "
        "owns just its own values.",
        "probe": "len(msg) < 4 * h.numel()",
        "draws_on": ("processes", "detach"),
        "transfer": True,
    },
    {
        "topic": "final_memory",
        "prompt": "After `opt.step()`, does the retained graph's second `backward()` raise?",
        "code": """
w = torch.tensor([1.0, 2.0], requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
loss = (w * w).sum()
loss.backward(retain_graph=True)
opt.step()
loss.backward()
""",
        "answer": "yes",
        "myth": "with retain_graph=True, a second backward through the same graph always works.",
        "fact": "retain_graph keeps the saved tensors, but MulBackward0 saved w itself, and "
        "step() changed w in place (its version went up): backward refuses the stale value. "
        "Run every backward before step(), or a new forward pass after it.",
        "raises": (RuntimeError, "modified by an inplace operation"),
        "draws_on": ("freeing", "detach", "backward"),
    },
    {
        "topic": "final_memory",
        "prompt": "Does a second `backward()` through `cat` and `flip` raise?",
        "code": """
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = torch.cat([x, x.flip(0)]).sum()
y.backward()
y.backward()
""",
        "answer": "no",
        "myth": "after one backward(), any graph needs retain_graph=True for a second.",
        "fact": "backward() frees saved tensors, and cat, flip and sum save none (only sizes "
        "and dimensions): the second pass runs and x.grad adds up. Multiplications and most "
        "activations save tensors, and fail the second time.",
        "draws_on": ("freeing", "backward"),
        "transfer": True,
    },
    {
        "topic": "final_memory",
        "prompt": "Does `lin.weight[0].requires_grad_(False)` raise?",
        "code": """
lin = torch.nn.Linear(2, 2)
lin.weight[0].requires_grad_(False)  # freeze the first output's weights
""",
        "answer": "yes",
        "myth": "requires_grad can be switched off for part of a parameter, to freeze some "
        "of its rows.",
        "fact": "lin.weight[0] is a view, the result of indexing, and only a leaf's flag can "
        "change; requires_grad belongs to a whole tensor. To freeze some rows, zero their "
        "gradient with a hook on lin.weight (and no weight decay), or keep them in a tensor of "
        "their own that does not require grad.",
        "raises": (RuntimeError, "only change requires_grad flags of leaf variables"),
        "draws_on": ("leaf", "grad_modes"),
        "transfer": True,
    },
    # ---- 3 · Hooks, hand-offs and the wire -----------------------------------------------------
    {
        "topic": "final_handoffs",
        "prompt": "With this forward hook on `lin`, does `y` require grad?",
        "code": """
lin = torch.nn.Linear(2, 1)
lin.register_forward_hook(lambda module, inputs, out: out.detach())
y = lin(torch.ones(1, 2))
""",
        "answer": "no",
        "myth": "a forward hook only observes what a module returns.",
        "fact": "a forward hook that returns a value replaces the module's output: returning "
        "out.detach() cuts the graph right after lin, and nothing before the cut learns. A "
        "hook that only observes returns None.",
        "probe": "y.requires_grad",
        "draws_on": ("retain_grad", "split"),
        "transfer": True,
    },
    {
        "topic": "final_handoffs",
        "prompt": "The receiver normalises its copy in place. Does the sender's "
        "`f1.backward(ff1.grad)` raise?",
        "code": """
lin = torch.nn.Linear(2, 2)
f1 = torch.sigmoid(lin(torch.ones(1, 2)))  # the sender's activation
ff1 = f1.detach()  # the cut, without clone()
ff1.div_(ff1.sum())  # the receiver normalises in place
ff1.requires_grad_()
ff1.sum().backward()
f1.backward(ff1.grad)
""",
        "answer": "yes",
        "myth": "the clone() in the cut f1.clone().detach() is optional when both parties "
        "share one process.",
        "fact": "detach() shares f1's storage and version counter: div_ changed f1 too, the "
        "output sigmoid saved for its backward, so the sender's backward refuses. clone() "
        "gives the receiver memory of its own.",
        "raises": (RuntimeError, "modified by an inplace operation"),
        "draws_on": ("split", "detach"),
    },
    {
        "topic": "final_handoffs",
        "prompt": "The hook zeroes the gradient of `second`'s input. Is `second.bias.grad` "
        "zero too?",
        "code": """
first, second = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
second.register_full_backward_hook(lambda module, grad_in, grad_out: (grad_in[0] * 0,))
second(first(torch.ones(1, 1))).sum().backward()
""",
        "answer": "no",
        "myth": "a module's backward hook controls the gradients of the module's own parameters.",
        "fact": "grad_in holds the gradient with respect to the module's input, what flows on "
        "to first: replacing it with zeros gives first zero gradients, while second's own "
        "weight and bias gradients are computed as usual. To change a parameter's gradient, "
        "hook the parameter itself.",
        "probe": "torch.count_nonzero(second.bias.grad) == 0",
        "draws_on": ("retain_grad", "split"),
        "transfer": True,
    },
    {
        "topic": "final_handoffs",
        "prompt": "Does the hook on `f1` clip the gradient handed to `f1.backward()`?",
        "code": """
lin = torch.nn.Linear(2, 2)
f1 = lin(torch.ones(1, 2))  # the sender's activation
f1.register_hook(lambda grad: grad.clamp(-1, 1))
from_wire = torch.tensor([[5.0, -5.0]])  # the gradient sent back
f1.backward(from_wire)
""",
        "answer": "yes",
        "myth": "a tensor hook sees only gradients that the backward pass computes, not one "
        "you hand to backward() yourself.",
        "fact": "the gradient passed to f1.backward() enters the graph at f1 like any other, "
        "and f1's hooks see it first: the sender can clip or check what arrives over the wire "
        "in one line, before model 1 uses it.",
        "probe": "torch.equal(lin.bias.grad, from_wire.clamp(-1, 1)[0])",
        "draws_on": ("split", "retain_grad"),
    },
    {
        "topic": "final_handoffs",
        "prompt": "With `backward(inputs=[b])`, does `w` get a gradient too?",
        "code": """
w = torch.tensor([1.0, 2.0], requires_grad=True)
b = torch.tensor([0.5], requires_grad=True)
loss = (w * 3 + b).sum()
loss.backward(inputs=[b])
""",
        "answer": "no",
        "myth": "backward() always fills the .grad of every leaf that requires grad.",
        "fact": "inputs= restricts where gradients accumulate: only b.grad is filled, and "
        "w.grad stays None. It helps when parties share one graph but each updates only its "
        "own tensors, as in a GAN's discriminator step.",
        "probe": "w.grad is not None",
        "draws_on": ("backward", "split"),
        "transfer": True,
    },
    {
        "topic": "final_handoffs",
        "prompt": "Does `copy.deepcopy(h)` of an activation raise?",
        "code": """
import copy

x = torch.ones(2, requires_grad=True)
h = x * 2  # an activation, about to be sent
sent = copy.deepcopy(h)
""",
        "answer": "yes",
        "myth": "copy.deepcopy copies a tensor with its history, so the copy can be "
        "backpropagated through.",
        "fact": "deepcopy accepts only leaves: a graph cannot be copied. pickle, by contrast, "
        "sends a non-leaf's data as a new leaf (notebook 07). For a copy of the values, use "
        "h.detach().clone().",
        "raises": (RuntimeError, "support the deepcopy protocol"),
        "draws_on": ("processes", "leaf"),
        "transfer": True,
    },
    # ---- 4 · Silent bugs, and past first order -----------------------------------------------
    {
        "topic": "final_beyond",
        "prompt": "Does backward through the helper `normalise` raise?",
        "code": """
def normalise(v):
    with torch.no_grad():  # meant for the norm only
        return v / v.norm()


w = torch.tensor([3.0, 4.0], requires_grad=True)
normalise(w).sum().backward()
""",
        "answer": "yes",
        "myth": "torch.no_grad() inside a helper only affects the helper's own temporary values.",
        "fact": "the division runs inside the block, so it is not recorded: the returned "
        "tensor has no grad_fn, and the loss is cut from w. To treat only the norm as a "
        "constant, compute v / v.norm().detach().",
        "raises": (RuntimeError, "does not require grad and does not have a grad_fn"),
        "draws_on": ("grad_modes", "backward"),
        "transfer": True,
    },
    {
        "topic": "final_beyond",
        "prompt": "Is `x.grad` free of NaN?",
        "code": """
x = torch.tensor([0.0, 4.0], requires_grad=True)
y = torch.where(x > 0, x.sqrt(), torch.zeros(2))  # sqrt only where it is safe?
y.sum().backward()
""",
        "answer": "no",
        "myth": "torch.where sends no gradient into the branch it did not pick, so that "
        "branch cannot spoil the gradient.",
        "fact": "both branches are computed, and the unpicked one gets a gradient of zero. At "
        "x = 0, sqrt's backward divides that zero by 2·sqrt(0), and 0 / 0 is NaN. Make the "
        "unpicked branch harmless: torch.where(x > 0, x.clamp(min=1e-12).sqrt(), 0).",
        "probe": "not x.grad.isnan().any()",
        "draws_on": ("backward", "grad_modes"),
        "transfer": True,
    },
    {
        "topic": "final_beyond",
        "prompt": "When checkpoint reruns the block in backward, does dropout keep the same units?",
        "code": """
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

kept = []


def block(t):
    out = F.dropout(t, p=0.5, training=True)
    kept.append(out != 0)  # the units the forward pass kept
    return out


x = torch.ones(8, requires_grad=True)
checkpoint(block, x, use_reentrant=False).sum().backward()
""",
        "answer": "yes",
        "myth": "checkpoint reruns the block in backward, so a random layer draws a new mask "
        "and the gradient no longer matches the forward pass.",
        "fact": "checkpoint saves the random number generator's state with the inputs "
        "(preserve_rng_state=True, the default) and restores it for the rerun: dropout draws "
        "the same mask, and x.grad is non-zero exactly where the forward pass kept a unit.",
        "probe": "torch.equal(x.grad != 0, kept[0])",
        "draws_on": ("higher_order", "grad_modes"),
    },
    {
        "topic": "final_beyond",
        "prompt": "Does `x` get a gradient that is not zero?",
        "code": """
x = torch.tensor([[1.0, 2.0, 4.0]], requires_grad=True)
torch.nn.LayerNorm(3)(x).sum().backward()
""",
        "answer": "no",
        "myth": "x requires grad and the loss is built from it, so x receives a useful gradient.",
        "fact": "LayerNorm centres each row, so with its initial weight (ones) and bias "
        "(zeros) the outputs sum to zero whatever x is: the loss is a constant, and its "
        "gradient is zero up to rounding. The graph is intact (x.grad is not None); the loss "
        "just does not depend on x. A zero gradient points at the loss, None at a cut.",
        "probe": "bool(x.grad.abs().max() > 1e-4)",
        "draws_on": ("backward", "grad_modes"),
        "transfer": True,
    },
    {
        "topic": "final_beyond",
        "prompt": "Does backward through `Scale.apply(x, 3.0)` raise?",
        "code": """
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor


x = torch.tensor([1.0, 2.0], requires_grad=True)
Scale.apply(x, 3.0).sum().backward()
""",
        "answer": "yes",
        "myth": "backward returns gradients only for the inputs that have one.",
        "fact": "backward must return one value per argument of forward, in order, with None "
        "for those without a gradient (here the float factor): return grad * ctx.factor, "
        "None.",
        "raises": (RuntimeError, "incorrect number of gradients"),
        "draws_on": ("higher_order", "backward"),
    },
    {
        "topic": "final_beyond",
        "prompt": "After `backward(create_graph=True)`, does `w.grad` require grad?",
        "code": """
w = torch.tensor([1.0, 2.0], requires_grad=True)
(w ** 3).sum().backward(create_graph=True)
""",
        "answer": "yes",
        "myth": ".grad always holds plain numbers, without a graph.",
        "fact": "create_graph=True records the backward pass too: w.grad is 3·w² with a graph "
        "of its own, and can be differentiated again (a gradient penalty). torch warns since "
        "w.grad now refers back to w, a reference cycle; torch.autograd.grad(..., "
        "create_graph=True) returns the gradient instead and avoids it.",
        "probe": "w.grad.requires_grad",
        "draws_on": ("backward", "higher_order"),
    },
]
