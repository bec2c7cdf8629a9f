"""A small autograd engine on numpy that obeys torch's rules: notebook 05b's reference."""

import heapq
import itertools

import numpy as np

_recording = [True]  # False inside `with no_grad():`
_created = itertools.count()  # the order nodes are made in: backward runs the newest ready first

FREED = "Trying to backward through the graph a second time: its saved tensors were freed."
MODIFIED = (
    "one of the variables needed for gradient computation has been modified by an inplace "
    "operation: [DoubleTensor {shape}], which is output 0 of {name}, is at version {now}; "
    "expected version {then} instead.")


class no_grad:
    """Inside this block, operations are not recorded."""

    def __enter__(self):
        self.before = _recording[0]
        _recording[0] = False

    def __exit__(self, *exc):
        _recording[0] = self.before


class Handle:
    """What register_hook returns: `remove()` takes the hook off again."""
    def __init__(self, hooks, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self):
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)


class Node:
    """A backward function (a tensor's grad_fn): its inputs' nodes and the tensors it saved."""

    def __init__(self, name, inputs, backward, saved=()):
        self._name = name
        self.next_functions = tuple((_edge(t), 0) for t in inputs)
        self.backward_fn = backward
        self.saved = [(t, t._version) for t in saved]
        self.priority = next(_created)  # the newest ready node runs first
        self.pre_hooks = []  # the hooks registered on the tensor this node made
        self.retained = None  # that tensor, if it called retain_grad()

    def name(self):
        return self._name

    def unpack(self):
        if self.saved is None:
            raise RuntimeError(FREED)
        for t, version in self.saved:
            if t._version != version:
                raise RuntimeError(MODIFIED.format(
                    shape=list(t.data.shape), name=self._name, now=t._version, then=version))
        return [t.data for t, _ in self.saved]

    def run(self, grad, retain_graph):
        for hook in list(self.pre_hooks):
            grad = _replaced(hook, grad)
        if (t := self.retained) is not None:
            t.grad = Tensor(grad) if t.grad is None else Tensor(t.grad.data + grad)
        grads = self.backward_fn(grad, *self.unpack())
        if not retain_graph and self.saved:
            self.saved = None
        return grads


class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds the gradient that reaches it into `.grad`."""

    def __init__(self, variable):
        super().__init__("torch::autograd::AccumulateGrad", (), None)
        self.variable = variable
        self.priority = float("inf")  # accumulate as soon as the gradient is ready

    def run(self, grad, retain_graph):
        leaf = self.variable
        for hook in list(leaf._hooks):
            grad = _replaced(hook, grad)
        leaf.grad = Tensor(grad) if leaf.grad is None else Tensor(leaf.grad.data + grad)
        for hook in list(leaf._post_hooks):
            hook(leaf)
        return ()


def _replaced(hook, grad):
    new = hook(Tensor(grad))
    return grad if new is None else np.asarray(new.data, dtype=float)


def _edge(t):
    if not t.requires_grad:
        return None
    if t.grad_fn is not None:
        return t.grad_fn
    if t._accumulate is None:
        t._accumulate = AccumulateGrad(t)
    return t._accumulate


def _wrap(x):
    return x if isinstance(x, Tensor) else Tensor(x)


def _unbroadcast(grad, shape):
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad


def _result(data, name, inputs, backward, saved=()):
    """The result of an operation: recorded, with a node, if an input requires grad."""
    if not (_recording[0] and any(t.requires_grad for t in inputs)):
        return Tensor(data)
    out = Tensor(data)
    out._requires_grad = True
    saved = [out if s == "result" else s for s in saved]
    out.grad_fn = Node(name, inputs, backward, saved)
    return out


class Tensor:
    """An array with what autograd needs: requires_grad, grad, grad_fn and a version counter."""

    def __init__(self, data, requires_grad=False):
        self.data = np.array(data, dtype=float)
        self._requires_grad = requires_grad
        self.grad = None
        self.grad_fn = None
        self.retains_grad = False
        self._counter = [0]  # shared with detach()'s tensors
        self._accumulate = None
        self._hooks, self._post_hooks = [], []

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if not self.is_leaf:
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        self._requires_grad = value

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def _version(self):
        return self._counter[0]

    def __add__(self, other, sign=1.0, name="AddBackward0"):
        a, b = self, _wrap(other)
        def backward(g):
            return _unbroadcast(g, a.data.shape), _unbroadcast(sign * g, b.data.shape)
        return _result(a.data + sign * b.data, name, (a, b), backward)

    __radd__ = __add__

    def __sub__(self, other):
        return self.__add__(other, -1.0, "SubBackward0")

    def __mul__(self, other):
        a, b = self, _wrap(other)
        saved = [t for t, needs in ((b, a.requires_grad), (a, b.requires_grad)) if needs]
        def backward(g, *s):
            found = dict(zip([id(t) for t in saved], s, strict=True))
            ga = _unbroadcast(g * found[id(b)], a.data.shape) if a.requires_grad else None
            gb = _unbroadcast(g * found[id(a)], b.data.shape) if b.requires_grad else None
            return ga, gb
        return _result(a.data * b.data, "MulBackward0", (a, b), backward, saved)

    __rmul__ = __mul__

    def __matmul__(self, other):
        a, b = self, other
        saved = [t for t, needs in ((b, a.requires_grad), (a, b.requires_grad)) if needs]
        def backward(g, *s):
            found = dict(zip([id(t) for t in saved], s, strict=True))
            ga = g @ found[id(b)].T if a.requires_grad else None
            gb = found[id(a)].T @ g if b.requires_grad else None
            return ga, gb
        return _result(a.data @ b.data, "MmBackward0", (a, b), backward, saved)

    def sum(self):
        shape = self.data.shape
        return _result(self.data.sum(), "SumBackward0", (self,), lambda g: (np.full(shape, g),))

    def mean(self):
        shape, n = self.data.shape, self.data.size
        mean = self.data.mean()
        return _result(mean, "MeanBackward0", (self,), lambda g: (np.full(shape, g / n),))

    def _in_place(self, other, op, name):
        other = _wrap(other)
        if _recording[0] and self.is_leaf and self.requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        record = _recording[0] and (self.requires_grad or other.requires_grad)
        if record:
            before = Tensor(self.data)  # a copy of the old values, as torch saves them
            before.grad_fn, before._requires_grad = self.grad_fn, self.requires_grad
            node = (before + other) if op is np.add else (before * other)
        op(self.data, other.data, out=self.data)
        self._counter[0] += 1
        if record:
            node.grad_fn._name = name
            self.grad_fn, self._requires_grad = node.grad_fn, True
        return self

    def add_(self, other):
        return self._in_place(other, np.add, "AddBackward0")

    def mul_(self, other):
        return self._in_place(other, np.multiply, "MulBackward0")

    def detach(self):
        alias = Tensor(0.0)
        alias.data, alias._counter = self.data, self._counter
        return alias

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if not self.is_leaf:
            self.retains_grad = True
            self.grad_fn.retained = self

    def register_hook(self, fn):
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        hooks = self._hooks if self.is_leaf else self.grad_fn.pre_hooks
        hooks.append(fn)
        return Handle(hooks, fn)

    def register_post_accumulate_grad_hook(self, fn):
        if not self.is_leaf:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        self._post_hooks.append(fn)
        return Handle(self._post_hooks, fn)

    def backward(self, gradient=None, retain_graph=False):
        if not self.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                               "grad_fn")
        if gradient is None:
            if self.data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            gradient = np.ones_like(self.data)
        root = _edge(self)
        waiting, stack, seen = {}, [root], {root}  # waiting: node -> users yet to send a gradient
        while stack:
            for child, _ in stack.pop().next_functions:
                if child is not None:
                    waiting[child] = waiting.get(child, 0) + 1
                    if child not in seen:
                        seen.add(child)
                        stack.append(child)
        grads = {root: np.asarray(_wrap(gradient).data, dtype=float)}
        ready, ties = [(-root.priority, 0, root)], itertools.count(1)
        with no_grad():
            while ready:
                node = heapq.heappop(ready)[2]
                out = node.run(grads.pop(node), retain_graph)
                for (child, _), g in zip(node.next_functions, out, strict=True):
                    if child is None:
                        continue
                    if g is not None:
                        grads[child] = grads[child] + g if child in grads else g
                    waiting[child] -= 1
                    if waiting[child] == 0 and child in grads:
                        heapq.heappush(ready, (-child.priority, next(ties), child))


def _unary(t, data, name, derivative):
    return _result(data, name, (t,), lambda g, out: (g * derivative(out),), saved=("result",))


def relu(t):
    return _unary(t, np.maximum(t.data, 0.0), "ReluBackward0", lambda out: out > 0)


def tanh(t):
    return _unary(t, np.tanh(t.data), "TanhBackward0", lambda out: 1.0 - out * out)


def exp(t):
    return _unary(t, np.exp(t.data), "ExpBackward0", lambda out: out)
