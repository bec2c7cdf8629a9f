"""The autograd errors the explainer knows, one family each: how to recognise torch's message,
where the cause is read (the watch's records, the failing graph, the traceback), and the fix.

Each family is a function `(error, scene) -> Explanation | None`, registered with the words of
torch's message that name it. None means: this family cannot tell the cause; the error is then
shown as torch raised it. `FAMILIES` lists them in the order they are tried.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from helpers.doctor.record import Location, backward_functions, is_learners
from helpers.doctor.watching import bare_traceback
from helpers.explain import scopes
from helpers.explain.explanation import Edit, Explanation, Place
from helpers.explain.watch import InPlace, Watch, made_at
from helpers.language import say

__all__ = ["FAMILIES", "Family", "Scene", "scene_of"]


@dataclass
class Scene:
    """Where an error happened: the learner's frames it passed (innermost last), the watch's
    records (None when the explainer was off), and the tensors a failing backward started from."""

    frames: list[tuple[Any, int]]  # (frame, line) of the learner's code, outermost first
    watch: Watch | None
    roots: list[torch.Tensor] = field(default_factory=list)

    @property
    def surfaced(self) -> Location | None:
        if not self.frames:
            return None
        frame, line = self.frames[-1]
        return Location(frame.f_code.co_filename, line, frame.f_code.co_name)


def scene_of(tb: Any, watch: Watch | None) -> Scene:
    """The learner's frames of traceback `tb`, and the roots of a backward it passed through."""
    tb = bare_traceback(tb)  # the watch's own frames are not the learner's
    frames, roots = [], []
    while tb is not None:
        frame = tb.tb_frame
        if is_learners(frame):
            frames.append((frame, tb.tb_lineno))
        elif not roots:
            roots = _backward_roots(frame)
        tb = tb.tb_next
    return Scene(frames, watch, roots)


def _backward_roots(frame: Any) -> list[torch.Tensor]:
    """The tensors a backward started from, read from torch's own frame of that backward."""
    module = frame.f_globals.get("__name__", "")
    names = {"torch._tensor": "self", "torch.autograd": "tensors"}
    local = names.get(module)
    if module == "torch.autograd" and frame.f_code.co_name == "grad":
        local = "outputs"
    if local is None or frame.f_code.co_name not in ("backward", "grad"):
        return []
    value = frame.f_locals.get(local)
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for t in (value or ()) if isinstance(t, torch.Tensor)]


@dataclass(frozen=True)
class Family:
    key: str
    words: str  # words of torch's message that only this family's errors carry
    explain: Callable[[BaseException, Scene], Explanation | None]


FAMILIES: list[Family] = []


def family(key: str, words: str):
    def register(function):
        FAMILIES.append(Family(key, words, function))
        return function

    return register


def _text(family: str, key: str, **values: Any) -> str:
    return say("common", f"explain.{family}.{key}", **values)


def _explanation(key: str, error: BaseException, places: list[Place], **parts: Any):
    return Explanation(
        family=key,
        places=tuple(p for p in places if p.at is not None),
        torch_message=str(error).strip(),
        error_type=type(error).__name__,
        **parts,
    )


def _saved_raising(node: Any, words: str) -> str | None:
    """The first `_saved_...` attribute of `node` whose reading raises an error with `words`."""
    for attribute in dir(node):
        if attribute.startswith("_saved_"):
            try:
                getattr(node, attribute)
            except RuntimeError as err:
                if words in str(err):
                    return attribute
    return None


# -- in-place change of a saved tensor ---------------------------------------------------------

_VERSION = re.compile(
    r"\[torch\.\w+ \[(?P<shape>[\d, ]*)\]\](?:, which is output \d+ of (?P<op>\w+),)? "
    r"is at version (?P<now>\d+); expected version (?P<expected>\d+) instead"
)


@family("inplace_saved", "has been modified by an inplace operation")
def inplace_saved(error: BaseException, scene: Scene) -> Explanation | None:
    found = _VERSION.search(str(error))
    if found is None:
        return None
    shape = tuple(int(n) for n in found["shape"].replace(" ", "").split(",") if n)
    expected = int(found["expected"])
    stale = next(
        (
            (node, attribute)
            for node in backward_functions([r.grad_fn for r in scene.roots])
            if (attribute := _saved_raising(node, "modified by an inplace")) is not None
        ),
        None,
    )
    change = _the_change(scene.watch, shape, expected, found["op"], stale)
    if change is None or change.at is None:
        return None
    node_name = stale[0].name() if stale else (found["op"] or "?")
    saved_at = made_at(stale[0]) if stale else None
    places = [
        Place("saved", saved_at, _text("inplace_saved", "saved_detail", node=node_name)),
        Place(
            "changed", change.at, f"{change.call}: {change.version_before} → {change.version_after}"
        ),
        Place("surfaced", scene.surfaced),
    ]
    before = _step_before(scene, stale[0]) if stale else None
    carried = _carried(scene, stale[0], before.count) if before else None
    if carried is not None:  # the last step's graph, kept alive, reached through carried state
        names, at, edit, _ = carried
        listed = ", ".join(names)
        places.insert(1, Place("carried", at, listed))
        quoted = "`, `".join(names)
        call = change.call
        what = _text("inplace_saved", "what_carried", names=quoted, node=node_name, call=call)
        fix = _text("inplace_saved", "fix_carried" if edit else "fix_carried_words", names=listed)
        return _explanation(
            "inplace_saved",
            error,
            places,
            what=what,
            edits=(edit,) if edit else (),
            fix=fix,
            not_this=_text("backward_twice", "not_this"),
        )
    what = _text("inplace_saved", "what", node=node_name, call=change.call)
    edit = _out_of_place(change)
    fix = ""
    if edit is None:
        if ".step(" in _code(change.at):
            fix = _text("inplace_saved", "fix_step", step=_code(change.at))
        else:
            fix = _text("inplace_saved", "fix_inside", call=change.call)
    return _explanation(
        "inplace_saved",
        error,
        places,
        what=what,
        edits=(edit,) if edit else (),
        fix=fix,
        not_this=_text("inplace_saved", "not_this"),
    )


def _step_before(scene: Scene, node: Any) -> Any:
    """The backward of the step before, when `node` is in that step's graph: an earlier
    backward at the failing line (a loop came round) that kept its graph (`retain_graph=True`)
    and started after `node` was made."""
    watch, made = scene.watch, getattr(node, "_sequence_nr", None)
    if watch is None or made is None:
        return None
    earlier = list(watch.backwards)[:-1]  # the last is the failing one
    return next(
        (
            b
            for b in reversed(earlier)
            if b.at == scene.surfaced and b.retain_graph and b.newest >= made()
        ),
        None,
    )


def _the_change(
    watch: Watch | None, shape: tuple, expected: int, op: str | None, stale: Any
) -> InPlace | None:
    """The in-place call that moved the stale tensor from the version backward expected: among
    the watch's records of that shape and first version, one whose tensor the stale backward
    function is next to (its output, or an input), else the latest."""
    if watch is None:
        return None
    if stale is not None:  # the records whose tensor the stale node saved: by graph or storage
        near = _near(stale[0])
        confirmed = [r for r in watch.inplace if r.version_before == expected and _touches(r, near)]
        if confirmed:
            return confirmed[-1]
    candidates = [r for r in watch.inplace if r.shape == shape and r.version_before == expected]
    if not candidates and re.sub(r"Backward\d*$", "", op or "") in _VIEWS:
        # a view was saved and its base changed in place: they share one version counter
        size = math.prod(shape)
        candidates = [
            r for r in watch.inplace if r.version_before == expected and math.prod(r.shape) > size
        ]
    if op:
        candidates = [r for r in candidates if r.made_by.startswith(op)] or candidates
    return candidates[-1] if candidates else None


#: The view functions torch names as what made a saved tensor that is a view.
_VIEWS = frozenset(
    {"AsStrided", "Select", "Slice", "View", "Unsqueeze", "Squeeze", "Transpose", "Permute",
     "Expand", "Diagonal", "Unfold", "Split", "SplitWithSizes", "Unbind", "Alias", "T", "Narrow"}
)  # fmt: skip


def _within(node: Any, depth: int) -> set[Any]:
    """`node` and the backward functions at most `depth` steps behind it."""
    found, layer = {node}, [node]
    for _ in range(depth):
        layer = [n for m in layer for n, _ in getattr(m, "next_functions", ()) if n is not None]
        found.update(layer)
    return found


def _near(node: Any) -> tuple[set[Any], set[int]]:
    """The backward functions within two steps of `node`, and the storages of the leaves there."""
    nodes = _within(node, 2)
    variables = (getattr(n, "variable", None) for n in nodes)
    storages = {v.untyped_storage().data_ptr() for v in variables if isinstance(v, torch.Tensor)}
    return nodes, storages


def _touches(record: InPlace, near: tuple[set[Any], set[int]]) -> bool:
    nodes, storages = near
    if record.storage and record.storage in storages:
        return True
    tensor = record.tensor()
    if tensor is None or tensor.grad_fn is None:
        return False
    return bool(_within(tensor.grad_fn, 2) & nodes)


_METHOD_CALL = re.compile(r"^(?P<target>[\w.\[\]]+)\.(?P<method>\w+)_\((?P<args>.*)\)\s*$")
_AUGMENTED = re.compile(r"^(?P<target>[\w.]+)\s*(?P<op>[-+*/])=\s*(?P<value>.+)$")


#: what torch reports for `+=`, `-=`, `*=`, `/=`
_AUGMENTED_CALLS = {
    "+": ("add_", "__iadd__"),
    "-": ("sub_", "__isub__"),
    "*": ("mul_", "__imul__"),
    "/": ("div_", "__itruediv__"),
}


def _code(at: Location) -> str:
    """The line without a trailing comment (a `#` inside a string is rare in such lines)."""
    return at.code.split("  #")[0].split(" # ")[0].strip()


def _out_of_place(change: InPlace) -> Edit | None:
    """The learner's in-place line written out of place, when it is a line of one call."""
    code = _code(change.at)
    if (m := _METHOD_CALL.match(code)) and m["method"] + "_" == change.call:
        return Edit(change.at, f"{m['target']} = {m['target']}.{m['method']}({m['args']})")
    if (m := _AUGMENTED.match(code)) and change.call in _AUGMENTED_CALLS[m["op"]]:
        return Edit(change.at, f"{m['target']} = {m['target']} {m['op']} {m['value']}")
    if change.call == "__setitem__" and "=" in code:
        target = code.split("[", 1)[0].strip()
        if target.isidentifier():
            return Edit(change.at, f"{target} = {target}.clone()\n{code}")
    return None


# -- backward through a freed graph ------------------------------------------------------------


@family("backward_twice", "backward through the graph a second time")
def backward_twice(error: BaseException, scene: Scene) -> Explanation | None:
    roots = [r.grad_fn for r in scene.roots]
    watch = scene.watch
    if watch is None:
        return None
    # the failing backward frees its own graph's saved tensors as it goes: the node to name is a
    # freed one that an earlier backward's graph holds
    freed_nodes = [n for n in backward_functions(roots) if _saved_raising(n, "already been freed")]
    first = freed = None
    for b in reversed(list(watch.backwards)[:-1]):
        if not b.retain_graph:
            graph = set(backward_functions(list(b.roots)))
            freed = next((n for n in freed_nodes if n in graph), None)
            if freed is not None:
                first = b
                break
    if first is None or first.at is None:
        return None
    surfaced = scene.surfaced
    carried = _carried(scene, freed, first.count)
    loop = first.at == surfaced  # the same line of the same file: a loop came round again
    before = _text("backward_twice", "step_before") if loop else ""
    places = [
        Place("made", made_at(freed), freed.name()),
        Place("freed", first.at, before),
        Place("surfaced", surfaced),
    ]
    not_this = _text("backward_twice", "not_this")
    if loop and carried is not None:
        names, bound_at, edit, trained = carried  # cut off what the last step left
        listed = ", ".join(names)
        if len(names) == 1:
            what = _text("backward_twice", "what_carried", name=listed, node=freed.name())
        else:
            quoted = "`, `".join(names)
            what = _text("backward_twice", "what_carried_many", names=quoted, node=freed.name())
        places.insert(1, Place("carried", bound_at, listed))
        fix = ""
        if edit is None:
            key = "fix_recompute" if trained else "fix_carried"
            fix = _text("backward_twice", key, names=listed)
        return _explanation(
            "backward_twice",
            error,
            places,
            what=what,
            edits=(edit,) if edit else (),
            fix=fix,
            not_this=not_this,
        )
    what = _text("backward_twice", "what_shared", node=freed.name())
    fix = _text("backward_twice", "fix_shared", first=first.at.code)
    return _explanation("backward_twice", error, places, what=what, fix=fix)


def _carried(
    scene: Scene, node: Any, since: int
) -> tuple[list[str], Location, Edit | None, bool] | None:
    """The state carried into this step: the names of the learner's frame (not the failing
    root) whose tensors reach backward function `node`, found in the frame's source where a
    loop around the failing line carries them: reassigned from themselves in the loop
    (`h = cell(x, h)`, `out, (h, c) = lstm(x, (h, c))`), or bound once before it and not in it
    (`data = conv(raw)` above the loop). Then the line that binds them, and the edit that cuts
    them off there with `.detach()` (None where no edit is safe), and whether they were made
    once from leaves that the loop trains (from backward number `since` on): no state to cut off
    then, but a value to compute again in each step."""
    if not scene.frames:
        return None
    frame, line = scene.frames[-1]
    roots = {id(r) for r in scene.roots}
    names = [
        name
        for name, value in frame.f_locals.items()
        if isinstance(value, torch.Tensor)
        and id(value) not in roots
        and (grad_fn := _grad_fn_of(value)) is not None
        and node in set(backward_functions([grad_fn]))
    ]
    scope = scopes.scope_of(frame) if names else None
    loops = scope.loops_around(line) if scope is not None else []
    if not loops:
        return None
    plans = {name: _carry_plan(scope, loops[-1], name) for name in names}
    plans = {name: plan for name, plan in plans.items() if plan is not None}
    if not plans:
        return None
    statement, before = next(iter(plans.values()))
    carried = [name for name, plan in plans.items() if plan == (statement, before)]
    at = Location(frame.f_code.co_filename, statement.lineno, frame.f_code.co_name)
    trained = not before and _trains(scene.watch, [frame.f_locals[n] for n in carried], since)
    edit = None
    if len({plan[0] for plan in plans.values()}) == 1 and not trained:  # one line cuts them all
        if before:
            edit = Edit(at, "\n".join([*_detached(carried), _code(at)]))
        else:
            edit = _detach_at(scope, statement, carried, at)
    return carried, at, edit, trained


def _carry_plan(scope: scopes.Scope, loop: Any, name: str) -> tuple[Any, bool] | None:
    """Where `name` gets the value the loop carries: (the statement, True) for a statement in
    the loop that reassigns it from itself (the cut goes before it), (the statement, False) for
    the binding before the loop when the loop never binds it (the cut goes into it)."""
    binding = [s for s in scope.statements() if scopes.binds(s, name)]
    inside = [s for s in binding if scope.inside(s, loop)]
    if inside:
        again = [s for s in inside if scopes.reads(s, name) and s is not loop]
        if again and scopes.single_line(scope, again[-1]):
            return again[-1], True
        return None
    above = [s for s in binding if s.lineno < loop.lineno]
    if above and scopes.dominates(scope, above[-1], loop) and scopes.single_line(scope, above[-1]):
        return above[-1], False
    return None


def _detached(names: list[str]) -> list[str]:
    return [f"{name} = {name}.detach()" for name in names]


def _primary(value: ast.expr) -> bool:
    """Whether `.detach()` written after `value` applies to all of it (`f(x)`, `a.b`, `a[0]`)."""
    return isinstance(value, (ast.Call, ast.Attribute, ast.Subscript, ast.Name))


def _detach_at(scope: scopes.Scope, statement: Any, names: list[str], at: Location) -> Edit:
    """The binding `statement` with the value it binds to `names` detached: `x = f(y)` becomes
    `x = f(y).detach()`; one that binds more names is followed by a line per name."""
    targets = getattr(statement, "targets", [])
    if (
        len(targets) == 1
        and isinstance(targets[0], ast.Name)
        and isinstance(statement, ast.Assign)
        and names == [targets[0].id]
    ):
        value = ast.get_source_segment("".join(scope.lines), statement.value)
        if value is not None:
            detached = f"{value}.detach()" if _primary(statement.value) else f"({value}).detach()"
            return Edit(at, f"{names[0]} = {detached}")
    return Edit(at, "\n".join([_code(at), *_detached(names)]))


def _trains(watch: Watch | None, tensors: list[torch.Tensor], since: int) -> bool:
    """Whether a leaf behind `tensors` was changed in place from backward number `since` on
    (an optimizer's step updates the leaves it trains; their initialisation came before)."""
    if watch is None:
        return True
    changed = {r.storage for r in watch.inplace if r.storage and r.backwards > since}
    roots = [node for t in tensors if (node := _grad_fn_of(t)) is not None]
    for node in backward_functions(roots):
        leaf = getattr(node, "variable", None)
        if isinstance(leaf, torch.Tensor) and leaf.untyped_storage().data_ptr() in changed:
            return True
    return False


def _grad_fn_of(tensor: torch.Tensor) -> Any:
    """The tensor's grad_fn, or None where reading it raises: a view made under no_grad whose
    base was then changed in place refuses to say, and it is no state a step carried."""
    try:
        return tensor.grad_fn
    except RuntimeError:
        return None


# -- no graph to go back through -----------------------------------------------------------------


@family("no_graph", "does not require grad and does not have a grad_fn")
def no_graph(error: BaseException, scene: Scene) -> Explanation | None:
    watch = scene.watch
    root = scene.roots[0] if scene.roots else None
    if watch is None or root is None:
        return None
    cut = next((c for c in reversed(watch.cuts) if any(r() is root for r in c.results)), None)
    if cut is None:
        cut = next(reversed(watch.cuts), None)
    if cut is None or cut.at is None:
        return None
    places = [Place("cut", cut.at, f"{cut.call}()"), Place("surfaced", scene.surfaced)]
    edits: tuple[Edit, ...] = ()
    grad_off = None if cut.grad_enabled else _grad_off_block(scene, cut.at) or watch.grad_off_at
    if not cut.grad_enabled and watch.grad_off_at is not None and watch.grad_off_by_checkpoint:
        places.insert(0, Place("grad_off", watch.grad_off_at))
        fix = _text("no_graph", "fix_checkpoint")
        reentrant = _sub(r"\buse_reentrant\s*=\s*True\b", "use_reentrant=False")
        new = reentrant(_code(watch.grad_off_at), scene)
        edits = (Edit(watch.grad_off_at, new),) if new else ()
    elif grad_off is not None:
        places.insert(0, Place("grad_off", grad_off))
        fix = _text("no_graph", "fix_inference" if root.is_inference() else "fix_grad_off")
    elif cut.call in ("item", "tolist", "numpy", "__float__"):
        fix = _text("no_graph", "fix_python", call=cut.call)
    elif cut.call in ("argmax", "argmin", "round", "floor", "ceil", "sign", "eq", "gt", "lt"):
        fix = _text("no_graph", "fix_integer", call=cut.call)
    else:
        fix = _text("no_graph", "fix_other", call=cut.call)
    return _explanation(
        "no_graph",
        error,
        places,
        what=_text("no_graph", "what", call=cut.call),
        edits=edits,
        fix=fix,
        not_this=_text("no_graph", "not_this"),
    )


def _grad_off_block(scene: Scene, cut: Location) -> Location | None:
    """The `with torch.no_grad():` or `with torch.inference_mode():` (or such a decorator) that
    the cut's line ran in: around that line, else around a line of the error's traceback (a
    function called from inside the block)."""
    spots = [(cut.filename, cut.line)]
    spots += [(frame.f_code.co_filename, line) for frame, line in reversed(scene.frames)]
    for filename, line in spots:
        scope = scopes.scope_at(filename, line)
        if scope is None:
            continue
        blocks = [s for s, context in scopes.withs_around(scope, line) if _grad_off(context)]
        blocks += [d for d in getattr(scope.node, "decorator_list", ()) if _grad_off(d)]
        if blocks:
            function = getattr(scope.node, "name", "<module>")
            return Location(filename, blocks[0].lineno, function)
    return None


def _grad_off(expression: ast.expr) -> bool:
    """Whether `expression` switches gradients off: `torch.no_grad()`, `torch.inference_mode()`,
    `torch.set_grad_enabled(False)` (a decorator may leave out the call's brackets)."""
    call = expression if isinstance(expression, ast.Call) else None
    function = call.func if call is not None else expression
    name = getattr(function, "attr", getattr(function, "id", ""))
    first = call.args[0] if call is not None and call.args else None
    if name == "set_grad_enabled":
        return isinstance(first, ast.Constant) and first.value is False
    if name == "inference_mode" and isinstance(first, ast.Constant):
        return first.value is not False
    return name in ("no_grad", "inference_mode")


# -- errors whose cause is the line that raised --------------------------------------------------


#: An edit of the line that raised: (the line, the scene) -> the line rewritten, or None.
LineEdit = Callable[[str, Scene], "str | None"]


#: Where the cause of an error that surfaced at a line is found elsewhere: (the scene) -> the
#: cause's place, the fix in words and an edit of it (or None); None when the line is the cause.
Elsewhere = Callable[[Scene], "tuple[Place, str, Edit | None] | None"]


def _at_the_line(key: str, edit: LineEdit | None = None, elsewhere: Elsewhere | None = None):
    """A family whose causal line is the line that raised: say what, and the edit of that line;
    or, where `elsewhere` finds the cause on another line, that line and its fix."""
    return functools.partial(_explain_at_the_line, key, edit, elsewhere)


def _explain_at_the_line(
    key: str, edit: LineEdit | None, elsewhere: Elsewhere | None, error: BaseException, scene: Scene
) -> Explanation | None:
    at = scene.surfaced
    if at is None:
        return None
    found = elsewhere(scene) if elsewhere is not None else None
    if found is not None:
        place, fix, new_edit = found
        return _explanation(
            key,
            error,
            [place, Place("surfaced", at)],
            what=_text(key, "what"),
            edits=(new_edit,) if new_edit else (),
            fix=fix,
            not_this=_text(key, "not_this"),
        )
    new = edit(_code(at), scene) if edit is not None else None
    return _explanation(
        key,
        error,
        [Place("surfaced", at)],
        what=_text(key, "what"),
        edits=(Edit(at, new),) if new else (),
        fix=_text(key, "fix"),
        not_this=_text(key, "not_this"),
    )


def _returned_unreduced(scene: Scene) -> tuple[Place, str, Edit | None] | None:
    """A backward() from what a function of the learner's returned, never held in a name where
    backward() was called (`criterion(a, b).backward()`): the reduction belongs where that
    function computed it. No edit: `.sum()` or `.mean()` is the learner's choice there."""
    if not scene.roots or not scene.frames:
        return None
    root, (frame, _) = scene.roots[0], scene.frames[-1]
    made = made_at(_grad_fn_of(root))
    if made is None or (made.filename, made.function) == (
        frame.f_code.co_filename,
        frame.f_code.co_name,
    ):
        return None
    if any(value is root for value in frame.f_locals.values()):
        return None
    fix = _text("scalar_output", "fix_returned", function=made.function)
    return Place("unreduced", made), fix, None


def _sub(pattern: str, replacement: str) -> LineEdit:
    """The edit that replaces the first match of `pattern` in the line (None: no match)."""
    return functools.partial(_substituted, re.compile(pattern), replacement)


def _substituted(compiled: re.Pattern, replacement: str, code: str, scene: Scene) -> str | None:
    new, count = compiled.subn(replacement, code, count=1)
    return new if count else None


def _under_no_grad(code: str, scene: Scene) -> str | None:
    if _AUGMENTED.match(code) or _METHOD_CALL.match(code):
        return f"with torch.no_grad():\n    {code}"
    return None


_NUMPY = re.compile(r"(?<!detach\(\))\.numpy\(\)")
_RECEIVER = re.compile(r"(?<![\w.)\]])([A-Za-z_]\w*)\s*$")


def _detach_before_numpy(code: str, scene: Scene) -> str | None:
    """`.detach()` before each `.numpy()` of the line, except where it is called on a name
    that holds a tensor that does not require grad (`x.numpy()` of plain data stays)."""
    frame = scene.frames[-1][0] if scene.frames else None
    names = {**frame.f_globals, **frame.f_locals} if frame is not None else {}
    edited, last = [], 0
    for found in _NUMPY.finditer(code):
        receiver = _RECEIVER.search(code, 0, found.start())
        value = names.get(receiver[1]) if receiver else None
        if isinstance(value, torch.Tensor) and not value.requires_grad:
            continue
        edited += [code[last : found.start()], ".detach().numpy()"]
        last = found.end()
    return "".join([*edited, code[last:]]) if edited else None


def _kept_loss(scene: Scene) -> tuple[Place, str, Edit | None] | None:
    """A tensor of the failing frame (or in a list or dict there) that requires grad because it
    holds a loss that a backward() already started from: a running total kept as a tensor
    (`total += loss`). Its place: the line that added that loss to it; its edit, for
    `total += loss` of one number, `total += loss.item()`."""
    if not scene.frames or scene.watch is None:
        return None
    losses = {node for b in scene.watch.backwards for node in b.roots if node is not None}
    frame, _ = scene.frames[-1]
    for tensor in _tensors_in(list(frame.f_locals.values()), depth=3) if losses else ():
        root = _grad_fn_of(tensor)
        adding = next(
            (
                node
                for node in backward_functions([root])
                if any(n in losses for n, _ in getattr(node, "next_functions", ()))
            ),
            None,
        )
        at = made_at(adding)
        if at is None:
            continue
        added = _AUGMENTED.match(_code(at))
        edit = None
        if added and added["op"] == "+" and added["value"].isidentifier() and tensor.numel() == 1:
            edit = Edit(at, f"{added['target']} += {added['value']}.item()")  # each loss is one
        return Place("kept", at), _text("numpy_requires_grad", "fix_kept"), edit
    return None


def _tensors_in(values: list[Any], depth: int) -> list[torch.Tensor]:
    """The tensors that require grad among `values`, and in the lists, tuples and dicts there
    (`depth` levels down)."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            if value.requires_grad:
                found.append(value)
        elif depth > 1 and isinstance(value, (list, tuple, dict)):
            inner = list(value.values()) if isinstance(value, dict) else list(value)
            found += _tensors_in(inner, depth - 1)
    return found


_ELSEWHERE: dict[str, Elsewhere] = {
    "scalar_output": _returned_unreduced,
    "numpy_requires_grad": _kept_loss,
}

for _key, _words, _edit in [
    ("leaf_inplace", "a leaf Variable that requires grad is being used in an in-place",
     _under_no_grad),
    ("scalar_output", "grad can be implicitly created only for scalar outputs",
     _sub(r"\b(\w+)\.backward\(\)", r"\1.sum().backward()")),
    ("numpy_requires_grad", "Can't call numpy() on Tensor that requires grad",
     _detach_before_numpy),
    ("hook_no_grad", "cannot register a hook on a tensor that doesn't require gradient", None),
    ("requires_grad_dtype", "can require gradients",
     _sub(r"\.requires_grad_\(\)", ".float().requires_grad_()")),
    ("requires_grad_nonleaf", "you can only change requires_grad flags of leaf variables",
     _sub(r"^(\w+)\.requires_grad\s*=\s*False$", r"\1 = \1.detach()")),
    ("unused_input", "appears to not have been used in the graph", None),
    ("inference_saved", "Inference tensors cannot be saved for backward",
     _sub(r"torch\.inference_mode\(\)", "torch.no_grad()")),
    ("view_inplace", "is a view and is being modified inplace", None),
    ("view_no_grad_inplace", "A view was created in no_grad mode and is being modified inplace",
     None),
    ("function_gradient_shape", "returned an invalid gradient at index", None),
    ("function_gradient_count", "returned an incorrect number of gradients", None),
    ("share_nonleaf", "Cowardly refusing to serialize non-leaf tensor which requires_grad",
     None),
    ("ddp_ready_twice", "Expected to mark a variable ready only once", None),
]:  # fmt: skip
    family(_key, _words)(_at_the_line(_key, _edit, _ELSEWHERE.get(_key)))
