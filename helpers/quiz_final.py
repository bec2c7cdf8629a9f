"""The questions of notebook 10: a final check, not a rerun of the notebooks' own quizzes.

Each question mixes ideas from several notebooks (`draws_on`, the course topics it combines), and
many apply them to code the course never showed: a program is on new code when it calls an
operation, a module or a keyword argument that no code cell of notebooks 01 to 09 uses
(`new_names`, measured against `COURSE_NAMES`). None repeats a prompt or a program of another
notebook (tests/test_quiz_final.py).

The questions come in parts that do not tell their topic, and nothing a learner sees without
reading the program predicts the answer: `surface_scores` measures how often the best rule on
one surface feature (the kind of question, its part, its position, the answer before it, the
prompt's first word, ...) would be right.

The questions themselves are data, in `helpers/text/en/10_check_yourself.toml` (and its
translations); `helpers.quiz` builds them into `Question`s, which run their programs to compute
every answer live, like all of the course's questions.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "COURSE_NAMES",
    "COURSE_NAMES_FILE",
    "NOTEBOOK",
    "SURFACE_LIMIT",
    "TOPICS",
    "api_names",
    "cell_tree",
    "course_names",
    "new_names",
    "surface_features",
    "surface_scores",
]

NOTEBOOK = "10_check_yourself.ipynb"

#: The final check's parts, in order. Their names say nothing of the ideas asked about.
TOPICS = ("final_1", "final_2", "final_3", "final_4")

#: No rule on one surface feature may predict more answers than this share.
SURFACE_LIMIT = 0.6

#: The names the code cells of notebooks 01 to 09 use, one per line (written by
#: `python -m tooling.course sync`, checked by the tests), so that the measure needs no notebook
#: on disk (Colab opens one notebook alone).
COURSE_NAMES_FILE = Path(__file__).with_name("text") / "course_names.txt"


def cell_tree(code: str) -> ast.Module | None:
    """A code cell's Python syntax tree, its IPython `%` and `!` lines left out; None when the
    rest does not parse."""
    source = "\n".join(
        line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))
    )
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def api_names(code: str) -> set[str]:
    """The names of the operations, modules and keyword arguments a program uses: attributes it
    reads (`torch.nn.Embedding`, `x.flip`), modules and names it imports, and keywords of its
    calls (`inplace=True`). Attributes the program assigns itself (`ctx.factor = ...`) are its own
    data, not an operation. IPython's `%` and `!` lines are skipped; code that does not parse
    has no names."""
    tree = cell_tree(code)
    if tree is None:
        return set()
    read, stored = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            (stored if isinstance(node.ctx, ast.Store) else read).add(node.attr)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.ImportFrom) and node.module:
                read.update(node.module.split("."))
            for alias in node.names:
                read.update(alias.name.split("."))
        elif isinstance(node, ast.keyword) and node.arg:
            read.add(node.arg)
    return read - stored


def course_names(programs: Iterable[str]) -> set[str]:
    """Every name `api_names` finds in these programs (the code cells of notebooks 01 to 09)."""
    return set().union(*(api_names(p) for p in programs))


def _read_course_names() -> frozenset[str]:
    if not COURSE_NAMES_FILE.exists():
        return frozenset()
    lines = COURSE_NAMES_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


#: The names of notebooks 01 to 09's code, as last written by `course sync`.
COURSE_NAMES = _read_course_names()


def new_names(code: str, known: Iterable[str] | None = None) -> list[str]:
    """The names a program uses that the course's code never does (default: `COURSE_NAMES`),
    sorted: what makes it new code."""
    return sorted(api_names(code) - set(COURSE_NAMES if known is None else known))


def surface_features(items: Sequence[Any]) -> dict[str, list[Any]]:
    """What a learner sees of each question without reading its program, by feature: the value
    each question has. `items` are `helpers.quiz.Question`s in the order they are asked."""
    n = len(items)
    features: dict[str, list[Any]] = {
        "kind (does it raise? or a probe)": [
            "raises" if q.probe is None else "probe" for q in items
        ],
        "the part it is in": [q.topic for q in items],
        "position: odd or even": [i % 2 for i in range(n)],
        "position: first or second half": [2 * i // n for i in range(n)],
        "position: quarter": [4 * i // n for i in range(n)],
        "the answer before it": [None, *(q.answer for q in items[:-1])],
        "the prompt's first word": _shared(
            q.prompt.split()[0].strip("`").casefold() for q in items
        ),
        "the prompt says not": ["not" in q.prompt.casefold().split() for q in items],
        "the prompt says still": ["still" in q.prompt.casefold().split() for q in items],
        "new code": [bool(new_names(q.code)) for q in items],
    }
    return features


def _first_word(prompt: str) -> str:
    return prompt.split()[0].strip("`").casefold()


def _shared(values: Iterable[str]) -> list[str]:
    """Each value, or "other" for a value only one question has (a rule on a value that one
    question has is right by construction, and predicts nothing)."""
    values = list(values)
    counts = Counter(values)
    return [v if counts[v] > 1 else "other" for v in values]


def _best_rule_share(values: Sequence[Any], answers: Sequence[str]) -> float:
    """The share of answers that the best rule "this value means this answer" gets right."""
    by_value: dict[Any, Counter] = {}
    for value, answer in zip(values, answers, strict=True):
        by_value.setdefault(value, Counter())[answer] += 1
    return sum(max(counts.values()) for counts in by_value.values()) / len(answers)


def surface_scores(items: Sequence[Any]) -> dict[str, float]:
    """For each surface feature, the share of answers its best rule predicts (0.5 is a coin)."""
    answers = [q.answer for q in items]
    return {
        name: _best_rule_share(values, answers) for name, values in surface_features(items).items()
    }
