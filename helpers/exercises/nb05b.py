"""Checker for notebook 05b (build the engine): the learner's autograd engine against torch's rules.

The rules are data, `[rules]` of helpers/text/en/05b_build_the_engine.toml: each a claim of
notebooks 01-05, a small program written against a minimal torch-like API (`Tensor(data,
requires_grad=...)`, `relu`, `tanh`, `exp`, `no_grad`), the cell that teaches it, and the exercise
of notebook 05b after which an engine can obey it. Each program runs once on torch (in float64)
and once on the learner's engine; the first rule whose observations differ is reported, in the
learner's words. After exercise N, `check_engine(globals(), exercise=N)` runs only the rules of
exercises 1 to N: what the engine built so far can pass.
"""

from __future__ import annotations

import math
import types
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from helpers.checks import CheckResult, feedback
from helpers.display import Figure, drawn_in_language, figure_words
from helpers.language import say, table, translated_table

__all__ = [
    "API",
    "EXERCISES",
    "Rule",
    "check_engine",
    "first_difference",
    "loss_figure",
    "observe",
    "rules",
    "run_rule",
    "torch_engine",
]

#: The notebook whose text file holds the rules and this module's messages.
TEXT = "05b_build_the_engine"
#: What a rule's program may use of an engine.
API = ("Tensor", "relu", "tanh", "exp", "no_grad")
#: How many exercises build the engine: after the last, every rule is checked.
EXERCISES = 8
#: How close two numbers must be to count as the same observation.
REL_TOL, ABS_TOL = 1e-6, 1e-9


@dataclass(frozen=True)
class Rule:
    """One rule: its id, sentence, program, the error torch raises (type, words), its cell, and
    the exercise after which an engine can obey it."""

    id: str
    sentence: str
    code: str
    raises: tuple[str, str] | None
    notebook: str
    cell: str
    exercise: int


def _exercise(exercise: int | None) -> int:
    """The exercise whose rules (with every earlier exercise's) are checked: 1 to EXERCISES."""
    if exercise is None:
        return EXERCISES
    if isinstance(exercise, bool) or not isinstance(exercise, int) or not 0 < exercise <= EXERCISES:
        raise ValueError(f"exercise is a number from 1 to {EXERCISES}, got {exercise!r}")
    return exercise


def rules(exercise: int | None = None) -> list[Rule]:
    """The rules in the order they are checked, their sentences in the current language: every
    rule, or those of exercises 1 to `exercise`."""
    last = _exercise(exercise)
    found = []
    for rule_id, entry in table(TEXT, "rules").items():
        if entry["exercise"] > last:
            continue
        sentence = translated_table(TEXT, f"rules.{rule_id}")["rule"]
        raises = tuple(entry["raises"]) if "raises" in entry else None
        notebook, cell = entry["see"]
        found.append(
            Rule(rule_id, sentence, entry["code"], raises, notebook, cell, entry["exercise"])
        )
    return found


def _torch_tensor(data: Any, requires_grad: bool = False) -> torch.Tensor:
    return torch.tensor(data, dtype=torch.float64, requires_grad=requires_grad)


def torch_engine() -> types.SimpleNamespace:
    """torch itself behind the rules' API, in float64 as a numpy engine computes."""
    return types.SimpleNamespace(
        Tensor=_torch_tensor, relu=torch.relu, tanh=torch.tanh, exp=torch.exp,
        no_grad=torch.no_grad,
    )


def observe(value: Any) -> Any:
    """What a program saw, as plain data: tensors (torch's, or any with an array `.data`) and
    arrays as nested lists of floats, numbers as floats; bools, None and strings as they are."""
    if isinstance(value, torch.Tensor):
        return observe(value.detach().tolist())
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [observe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): observe(v) for k, v in value.items()}
    data = getattr(value, "data", None)
    if data is not None and data is not value and hasattr(data, "tolist"):
        return observe(data)
    if hasattr(value, "tolist"):  # a numpy array or number
        try:
            return observe(value.tolist())
        except Exception:
            pass
    return f"<{type(value).__name__}>"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _shown(seen: Any) -> str:
    if isinstance(seen, float):
        return f"{seen:g}"
    if isinstance(seen, list):
        return "[" + ", ".join(_shown(v) for v in seen) + "]"
    if isinstance(seen, dict):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in seen.items()) + "}"
    return repr(seen) if isinstance(seen, str) else str(seen)


def _error_text(err: BaseException) -> str:
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first[:200]}"


def run_rule(rule: Rule, engine: Any) -> tuple[Any, BaseException | None]:
    """Run one rule's program on `engine`: (what it saw, None), or (None, the error it raised)."""
    names = {name: getattr(engine, name) for name in API if hasattr(engine, name)}
    scope: dict[str, Any] = {"__builtins__": __builtins__, **names}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns when a non-leaf's .grad is read
            exec(compile(rule.code, f"<rule {rule.id}>", "exec"), scope)
    except Exception as err:
        return None, err
    return observe(scope.get("seen")), None


def _as_engine(module: Any) -> Any:
    if isinstance(module, Mapping):
        return types.SimpleNamespace(**{k: module[k] for k in API if k in module})
    return module


def _difference(rule: Rule, engine: Any, torch_side: Any) -> list[str] | None:
    """What differs between torch and the engine on `rule`, as message lines, or None."""
    expected, torch_error = run_rule(rule, torch_side)
    seen, error = run_rule(rule, engine)
    if torch_error is not None:
        kind, words = rule.raises or (type(torch_error).__name__, str(torch_error))
        torch_said = say(TEXT, "feedback.raised", error=_error_text(torch_error))
        if error is None:
            return [torch_said, say(TEXT, "feedback.engine_silent")]
        if type(error).__name__ == kind and words in str(error):
            return None
        wrong = say(TEXT, "feedback.wrong_words", error=_error_text(error), words=words)
        return [torch_said, wrong]
    if error is not None:
        return [
            say(TEXT, "feedback.torch_did", observed=_shown(expected)),
            say(TEXT, "feedback.engine_raised", error=_error_text(error)),
        ]
    if _same(expected, seen):
        return None
    return [
        say(TEXT, "feedback.torch_did", observed=_shown(expected)),
        say(TEXT, "feedback.engine_did", observed=_shown(seen)),
    ]


def first_difference(
    module: Any, exercise: int | None = None
) -> tuple[int, Rule, list[str]] | None:
    """The first rule (of exercises 1 to `exercise`, or of all) on which `module` and torch
    differ: (its number in the whole list of rules, the rule, what differs), or None when they
    agree on all. A rule keeps its number whichever exercise's rules are run."""
    engine = _as_engine(module)
    torch_side = torch_engine()
    numbers = {rule.id: number for number, rule in enumerate(rules(), start=1)}
    for rule in rules(exercise):
        with torch.random.fork_rng(devices=[]):
            lines = _difference(rule, engine, torch_side)
        if lines is not None:
            return numbers[rule.id], rule, lines
    return None


def check_engine(module: Any, exercise: int | None = None) -> CheckResult:
    """Run the rules on torch and on `module` (an engine module, or a notebook's globals()), in
    order: those of exercises 1 to `exercise`, or every rule; report the first rule where they
    differ. Never raises on a broken engine."""
    last = _exercise(exercise)
    engine = _as_engine(module)
    if engine is None or not hasattr(engine, "Tensor"):
        return feedback([say(TEXT, "feedback.not_an_engine", type=type(module).__name__)])
    total = len(rules(last))
    found = first_difference(engine, last)
    if found is None and last < EXERCISES:
        left = len(rules()) - total
        return feedback(
            [], success=say(TEXT, "feedback.success_so_far", total=total, exercise=last, left=left)
        )
    if found is None:
        return feedback([], success=say(TEXT, "feedback.success", total=total))
    number, rule, lines = found
    head = say(TEXT, "feedback.differs", number=number, total=len(rules()), rule=rule.sentence)
    where = say(TEXT, "feedback.taught", notebook=rule.notebook, cell=rule.cell)
    return feedback([head, *lines, where])


@drawn_in_language
def loss_figure(torch_losses: list[float], engine_losses: list[float]) -> Figure:
    """Both trainings' loss curves in one plot: torch's wide and pale, the engine's on top."""
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(5.5, 3.2))
    ax = fig.add_subplot()
    steps = range(1, len(torch_losses) + 1)
    ax.plot(steps, torch_losses, "o-", color="#1f77b4", lw=4, alpha=0.45, label="torch")
    label = figure_words("your_engine")
    ax.plot(range(1, len(engine_losses) + 1), engine_losses, "x--", color="#d62728", label=label)
    ax.set_xlabel(figure_words("training_step"))
    ax.set_ylabel(figure_words("loss"))
    ax.set_title(figure_words("engine_losses_title"))
    ax.grid(alpha=0.3)
    ax.legend()
    description = say("common", "figures.engine_losses_description", steps=len(torch_losses))
    return Figure(fig, description=description)
