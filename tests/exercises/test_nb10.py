"""Notebook 10 (check yourself): its checkers, and the questions of its final check.

The checkers: `check_question` takes a question the learner wrote and runs it, `check_order`
compares a predicted order of backward functions with the one the engine ran.

The final check is not a rerun of the notebooks' own quizzes. Each question mixes ideas from
several notebooks (`draws_on`, the course topics it combines), and many apply them to code the
course never showed: a program is on new code when it calls an operation, a module or a keyword
argument that no code cell of notebooks 01 to 09 uses (`new_names`, measured against
`COURSE_NAMES`). None repeats a prompt or a program of another notebook. The questions come in
parts that do not tell their topic, and nothing a learner sees without reading the program
predicts the answer: `surface_scores` measures how often the best rule on one surface feature
(the kind of question, its part, its position, the answer before it, the prompt's first word,
...) would be right. These are checks of the questions' design: they guard the questions here,
and the notebook shows none of them.

The questions themselves are data, in `helpers/text/en/10_check_yourself.toml` (and its
translations); `helpers.quiz` builds them into `Question`s, which run their programs to compute
every answer live, like all of the course's questions.
"""

import ast
import io
import re
import tokenize
from collections import Counter
from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import Any

import nbformat
import pytest
import torch

from helpers.exercises.nb10 import check_order, check_question, engine_order
from helpers.quiz import QUESTIONS, TOPICS, Question, questions
from tests.support.notebook_files import NOTEBOOKS, cell_tree

NOTEBOOK = "10_check_yourself.ipynb"
#: The final check's parts, in order. Their names say nothing of the ideas asked about.
PARTS = tuple(topic for topic, notebook in TOPICS.items() if notebook == NOTEBOOK)
#: No rule on one surface feature may predict more answers than this share.
SURFACE_LIMIT = 0.6

# ---- the checkers --------------------------------------------------------------------------------

GOOD = Question(
    topic="leaf",
    prompt="Does y require grad?",
    code="x = torch.ones(2, requires_grad=True)\nwith torch.no_grad():\n    y = x * 2",
    answer="no",
    misconception="a result computed from a tensor that requires grad always requires grad.",
    fact="inside torch.no_grad() nothing is recorded: y has no grad_fn.",
    probe="y.requires_grad",
)


def variant(**changes):
    fields = {k: getattr(GOOD, k) for k in GOOD.__dataclass_fields__}
    fields.update(changes)
    return Question(**fields)


def test_check_question_accepts_a_good_question():
    result = check_question(GOOD)
    assert result.ok, result
    assert "running it gives 'no'" in repr(result)


def test_check_question_placeholder_is_a_friendly_not_yet():
    placeholder = variant(prompt=..., code=..., answer=..., misconception=..., fact=..., probe=...)
    result = check_question(placeholder)
    assert not result.ok
    assert result.messages == [
        "replace the `...` of prompt, code, answer, misconception, fact, probe"
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"answer": "yes"}, "your answer is 'yes', but running it gives 'no'"),
        ({"answer": "True"}, "answer should be 'yes' or 'no'"),
        ({"prompt": "Does y require grad"}, "ending in '?'"),
        ({"topic": "leaves"}, "topic should be one of leaf, backward"),
        ({"fact": ""}, "fact should say, in a sentence, what really happens"),
        ({"probe": "y.no_such_thing"}, "evaluating the probe raised AttributeError"),
        ({"code": "x = (", "probe": None}, "not valid Python"),
        ({"code": "y = 1 / 0"}, "with a probe, the program itself must run"),
        ({"probe": 3}, "probe should be an expression as a string"),
    ],
)
def test_check_question_says_what_is_wrong(changes, message):
    result = check_question(variant(**changes))
    assert not result.ok
    assert message in " ".join(result.messages), result.messages


def test_check_question_needs_a_question():
    assert "make a Question(...)" in check_question("Is it?").messages[0]


def build_exercise():
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    z = (a * b).sum() + a.exp().sum()
    return z, {"a": a, "b": b, "z": z}


RIGHT_ORDER = [
    "AddBackward0",
    "SumBackward0",
    "ExpBackward0",
    "SumBackward0",
    "MulBackward0",
    "AccumulateGrad",
    "AccumulateGrad",
]


def test_engine_order_of_the_exercise():
    assert engine_order(build_exercise) == RIGHT_ORDER


def test_check_order_right_and_wrong():
    assert check_order(RIGHT_ORDER, build_exercise).ok
    assert check_order(tuple(RIGHT_ORDER), build_exercise).ok
    forward_order = RIGHT_ORDER[:2] + ["MulBackward0"] + RIGHT_ORDER[3:]
    result = check_order(forward_order, build_exercise)
    assert not result.ok
    assert result.messages[0].startswith(
        "step 3: you said MulBackward0, the engine ran ExpBackward0"
    )
    one_accumulate = RIGHT_ORDER[:-1]
    message = " ".join(check_order(one_accumulate, build_exercise).messages)
    assert "the engine ran 7 backward functions, you listed 6" in message


@pytest.mark.parametrize("placeholder", [[...], ..., "AddBackward0", [1, 2]])
def test_check_order_placeholders_and_wrong_types(placeholder):
    result = check_order(placeholder, build_exercise)
    assert not result.ok
    assert re.search(r"replace the `\.\.\.`|give a list of names", result.messages[0])


def test_check_question_says_what_a_learner_s_raise_question_lacks():
    """10's exercise: a learner writes a "does it raise?" question with raises=None. The checker
    says what to add, in the notebook's language, instead of a traceback from the course's code."""
    second_backward = (
        "x = torch.ones(2, requires_grad=True)\ny = (x * x).sum()\ny.backward()\ny.backward()"
    )
    raising = Question("freeing", "Does the last line raise?", second_backward, "yes", "m", "f")
    result = check_question(raising)
    assert not result.ok and "name the exception it expects" in str(result)
    both = Question("leaf", "Is it?", "y = 1", "yes", "m", "f", "y", (ValueError, "x"))
    assert "give a probe or raises, not both" in str(check_question(both))
    unknown = Question("leaf", "Is it?", "y = 1", "no", "m", "f", draws_on=("leaves",))
    assert "draws_on names a topic the course does not have" in str(check_question(unknown))


def _error_of(action):
    try:
        action()
    except Exception as err:  # the message this Python and torch give
        return err
    raise AssertionError("expected an error")


def test_check_question_messages_in_full():
    syntax = _error_of(lambda: compile("x = (", "<q>", "exec"))
    attribute = _error_of(lambda: torch.ones(1).no_such_thing)
    cases = {
        "leaves": (
            variant(topic="leaves"),
            f"topic should be one of {', '.join(TOPICS)}; it is 'leaves'",
        ),
        "code": (variant(code=""), "code should be the short program, as a string"),
        "answer": (variant(answer="True"), "answer should be 'yes' or 'no'; it is 'True'"),
        "misconception": (
            variant(misconception=" "),
            "misconception should say, in a sentence, the wrong belief a wrong answer comes from",
        ),
        "program": (
            variant(code="y = 1 / 0"),
            "the program of 'Does y require grad?' raised ZeroDivisionError: division by zero: "
            "with a probe, the program itself must run",
        ),
        "syntax": (
            variant(code="x = (", probe=None),
            f"the code or the probe is not valid Python: {syntax.msg}",
        ),
        "probe": (
            variant(probe="y.no_such_thing"),
            f"evaluating the probe raised AttributeError: {attribute}",
        ),
        "swapped": (
            variant(answer="yes"),
            "your answer is 'yes', but running it gives 'no' (`y.requires_grad` is False.); a "
            "surprise worth a question, with the answer swapped",
        ),
    }
    for name, (question, message) in cases.items():
        assert check_question(question).messages == [message], name
    assert check_question(3).messages == ["make a Question(...), not an int"]


def test_check_question_accepts_a_prompt_ending_in_a_full_width_question_mark():
    result = check_question(variant(prompt="y 需要梯度吗？"))
    assert result.ok and result.success == "A good question: running it gives 'no'."


def test_check_order_says_the_whole_order_when_right_and_asks_for_names_when_unfilled():
    assert check_order(RIGHT_ORDER, build_exercise).success == (
        "Right: AddBackward0 → SumBackward0 → ExpBackward0 → SumBackward0 → MulBackward0 → "
        "AccumulateGrad → AccumulateGrad."
    )
    unfilled = ["replace the `...` with the names, e.g. ['AddBackward0', ...]"]
    assert check_order(..., build_exercise).messages == unfilled
    assert check_order([...], build_exercise).messages == unfilled


# ---- the final check's questions: what makes a program new code ---------------------------------


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


#: The English notebooks 01 to 09, whose code and questions the final check must not repeat.
EARLIER = [p for p in NOTEBOOKS if p.name[:2] in {f"{i:02d}" for i in range(1, 10)}]
#: Every name the code cells of notebooks 01 to 09 use.
COURSE_NAMES = frozenset(
    name
    for path in EARLIER
    for cell in nbformat.read(path, as_version=4).cells
    if cell.cell_type == "code"
    for name in api_names(cell.source)
)


def new_names(code: str, known: Iterable[str] = COURSE_NAMES) -> list[str]:
    """The names a program uses that the course's code never does, sorted: what makes it new
    code."""
    return sorted(api_names(code) - set(known))


# ---- the final check's questions: what a learner sees without reading the program --------------


def surface_features(items: Sequence[Any]) -> dict[str, list[Any]]:
    """What a learner sees of each question without reading its program, by feature: the value
    each question has. `items` are `Question`s in the order they are asked."""
    n = len(items)
    return {
        "kind (does it raise? or a probe)": [
            "raises" if q.probe is None else "probe" for q in items
        ],
        "the part it is in": [q.topic for q in items],
        "position: odd or even": [i % 2 for i in range(n)],
        "position: first or second half": [2 * i // n for i in range(n)],
        "position: quarter": [4 * i // n for i in range(n)],
        "the answer before it": [None, *(q.answer for q in items[:-1])],
        "the prompt's first word": shared(
            q.prompt.split()[0].strip("`").casefold() for q in items
        ),
        "the prompt says not": ["not" in q.prompt.casefold().split() for q in items],
        "the prompt says still": ["still" in q.prompt.casefold().split() for q in items],
        "new code": [bool(new_names(q.code)) for q in items],
    }


def shared(values: Iterable[str]) -> list[str]:
    """Each value, or "other" for a value only one question has (a rule on a value that one
    question has is right by construction, and predicts nothing)."""
    values = list(values)
    counts = Counter(values)
    return [v if counts[v] > 1 else "other" for v in values]


def best_rule_share(values: Sequence[Any], answers: Sequence[str]) -> float:
    """The share of answers that the best rule "this value means this answer" gets right."""
    by_value: dict[Any, Counter] = {}
    for value, answer in zip(values, answers, strict=True):
        by_value.setdefault(value, Counter())[answer] += 1
    return sum(max(counts.values()) for counts in by_value.values()) / len(answers)


def surface_scores(items: Sequence[Any]) -> dict[str, float]:
    """For each surface feature, the share of answers its best rule predicts (0.5 is a coin)."""
    answers = [q.answer for q in items]
    return {name: best_rule_share(v, answers) for name, v in surface_features(items).items()}


# ---- the final check's questions -----------------------------------------------------------------

FINAL = questions(*PARTS)
OTHERS = [q for q in QUESTIONS if q.topic not in PARTS]
COURSE_TOPICS = [t for t, notebook in TOPICS.items() if notebook != NOTEBOOK]
FINAL_PATH = next(p for p in NOTEBOOKS if p.name == NOTEBOOK)
EXPLORERS = ("graph_explorer", "backward_stepper", "optimizer_lab")


def normal_text(text: str) -> str:
    """A question's words: no `**2.**` number, no Markdown marks, one space, one case."""
    text = re.sub(r"^\s*\*\*\d+\.\*\*", "", text)
    return " ".join(re.sub(r"[`*]", "", text).split()).casefold()


def normal_program(code: str) -> str:
    """A program without its comments and with its whitespace collapsed."""
    tokens = tokenize.generate_tokens(io.StringIO(code.strip() + "\n").readline)
    kept = [t.string for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL)]
    return " ".join(" ".join(kept).split())


def check_yourself_sections(path) -> tuple[list[str], list[str]]:
    """A notebook's numbered "Check yourself" questions in Markdown, and the code cells there."""
    asked, programs, section = [], [], ""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for paragraph in re.split(r"\n\s*\n", cell.source):
                heading = [ln[3:] for ln in paragraph.splitlines() if ln.startswith("## ")]
                section = heading[-1].strip().casefold() if heading else section
                if section.startswith("check yourself") and re.match(r"\*\*\d+\.\*\*", paragraph):
                    asked.append(paragraph)
        elif section.startswith("check yourself"):
            programs.append(cell.source)
    return asked, programs


MARKDOWN_QUESTIONS = {p.name: check_yourself_sections(p) for p in EARLIER}


def repeats(final: list[Question], others: list[Question], notebooks: dict) -> list[str]:
    """Each way a final question repeats another question of the course, as a sentence."""
    found = []
    seen_prompts = {normal_text(q.prompt): q for q in others}
    seen_programs = {normal_program(q.code): q for q in others}
    for i, q in enumerate(final):
        prompt, program = normal_text(q.prompt), normal_program(q.code)
        if prompt in seen_prompts:
            found.append(f"{q.prompt!r} is the prompt of a {seen_prompts[prompt].topic} question")
        if program in seen_programs:
            found.append(f"the program of {q.prompt!r} is a {seen_programs[program].topic} one")
        for name, (asked, programs) in notebooks.items():
            for text in map(normal_text, asked):
                if prompt == text or prompt in text:
                    found.append(f"{q.prompt!r} is asked in {name}'s Check yourself: {text!r}")
            if program in map(normal_program, programs):
                found.append(f"the program of {q.prompt!r} is a Check yourself cell of {name}")
        for other in final[:i]:
            if prompt == normal_text(other.prompt) or program == normal_program(other.code):
                found.append(f"{q.prompt!r} repeats {other.prompt!r} within notebook 10")
    return found


def test_no_final_question_repeats_another_notebook():
    found = sum(len(asked) for asked, _ in MARKDOWN_QUESTIONS.values())
    assert found >= 10, f"{found} numbered questions in 01-09: has their Markdown changed?"
    assert repeats(FINAL, OTHERS, MARKDOWN_QUESTIONS) == []


def test_the_repeat_finder_catches_copies():
    old = OTHERS[0]
    copied = Question(
        "final_2", f"  {old.prompt.upper()} ", f"{old.code}  # renamed", "no", "m", "f", "1"
    )
    found = repeats([*FINAL, copied], OTHERS, MARKDOWN_QUESTIONS)
    assert any("is the prompt of a leaf question" in f for f in found), found
    assert any("is a leaf one" in f for f in found), found
    # 01 asks "**1.** `c = torch.tensor([1.0, 2.0]) * 3`. Is `c` a leaf?" in its Markdown
    markdown = Question("final_2", "Is `c` a leaf?", "c = 1", "no", "m", "f", "c == 2")
    found = repeats([markdown], [], MARKDOWN_QUESTIONS)
    assert found and "01_leaf_nodes.ipynb's Check yourself" in found[0]
    assert repeats([markdown, markdown], [], {})[-1].endswith("within notebook 10")


def test_the_course_names_are_those_the_code_of_notebooks_01_to_09_uses():
    assert len(EARLIER) >= 9 and (EARLIER[0].name[:2], EARLIER[-1].name[:2]) == ("01", "09")
    assert {"backward", "retain_grad", "detach", "register_hook", "Linear"} <= COURSE_NAMES
    assert not {"LayerNorm", "AdamW", "deepcopy", "pickle"} & COURSE_NAMES  # new in 10


def test_new_names_are_the_operations_modules_and_keywords_the_course_never_used():
    code = (
        "import pickle\nfrom torch.utils.checkpoint import checkpoint\n"
        "ctx.factor = 2\nx = ctx.factor\ny = torch.nn.Embedding(4, 2)(x, sparse=True)\n%time z = 1"
    )
    assert api_names(code) == {
        "pickle",
        "torch",
        "utils",
        "checkpoint",
        "nn",
        "Embedding",
        "sparse",
    }  # ctx.factor is the program's own attribute; the % line is IPython's
    assert new_names(code, known={"torch", "nn", "utils", "checkpoint"}) == [
        "Embedding",
        "pickle",
        "sparse",
    ]
    assert api_names("x = (") == set()


def test_the_final_check_is_long_enough_and_a_third_is_new_code():
    assert len(FINAL) >= 20
    new = [q for q in FINAL if new_names(q.code)]
    assert 3 * len(new) >= len(FINAL), f"{len(new)} of {len(FINAL)} on new code"
    assert not any(q.draws_on for q in OTHERS)  # mixed questions are notebook 10's kind


def test_no_surface_feature_predicts_the_answers():
    scores = surface_scores(FINAL)
    assert len(scores) >= 8
    worst = max(scores, key=scores.get)
    assert scores[worst] <= SURFACE_LIMIT, f"{worst} predicts {scores[worst]:.0%}"


def replace(question: Question, **changes) -> SimpleNamespace:
    """A question's surface with some fields changed (not a Question: it need not be valid)."""
    return SimpleNamespace(**{**vars(question), **changes})


def test_the_surface_measure_catches_a_giveaway():
    kinds = [replace(q, answer="yes" if q.probe is None else "no") for q in FINAL]
    assert surface_scores(kinds)["kind (does it raise? or a probe)"] == 1.0
    alternating = [replace(q, answer=("yes", "no")[i % 2]) for i, q in enumerate(FINAL)]
    scores = surface_scores(alternating)
    assert scores["position: odd or even"] == 1.0 and scores["the answer before it"] > 0.95
    one_each = [replace(q, prompt=f"W{i} x?") for i, q in enumerate(FINAL)]
    assert surface_scores(one_each)["the prompt's first word"] == max(
        [q.answer for q in FINAL].count(a) for a in ("yes", "no")
    ) / len(FINAL)  # a word only one prompt has predicts nothing


def test_no_final_program_carries_a_comment():
    """A comment in a question's program can cue its answer (`# the cut, without clone()`)."""
    for q in FINAL:
        tokens = tokenize.generate_tokens(io.StringIO(q.code + "\n").readline)
        assert not [t.string for t in tokens if t.type == tokenize.COMMENT], q.prompt


def test_every_final_question_mixes_topics_and_all_are_covered():
    for q in FINAL:
        assert len(set(q.draws_on)) >= 2, q.prompt
        assert set(q.draws_on) <= set(COURSE_TOPICS), q.prompt
    assert {t for q in FINAL for t in q.draws_on} == set(COURSE_TOPICS)
    for topic in COURSE_TOPICS:  # each notebook's ideas come back more than once
        assert sum(topic in q.draws_on for q in FINAL) >= 2, topic
    for topic in PARTS:  # each section mixes, and has both answers
        section = questions(topic)
        assert len({t for q in section for t in q.draws_on}) >= 4, topic
        assert {q.answer for q in section} == {"yes", "no"}, topic
    answers = [q.answer for q in FINAL]
    assert 0.4 <= answers.count("yes") / len(answers) <= 0.6


def calls_of(function: str, path) -> list[tuple[list[str], int]]:
    """The topics and `start` of each call of `function` (quiz, score, questions) in a notebook,
    in order."""
    calls = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code" or f"{function}(" not in cell.source:
            continue
        for node in ast.walk(cell_tree(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == function:
                start = next((k.value.value for k in node.keywords if k.arg == "start"), 1)
                calls.append(([a.value for a in node.args], start))
    return calls


def test_notebook_10_asks_only_its_new_questions_numbered_on():
    calls = calls_of("quiz", FINAL_PATH)
    assert [topics for topics, _ in calls] == [[t] for t in PARTS]
    assert PARTS == ("final_1", "final_2", "final_3", "final_4")
    # the score and the answer table cover every part, each from question 1
    assert calls_of("score", FINAL_PATH) == [(list(PARTS), 1)]
    assert calls_of("questions", FINAL_PATH) == [(list(PARTS), 1)]
    expected_start = 1
    for topics, start in calls:
        assert start == expected_start, (topics, start)
        expected_start += len(questions(*topics))
    source = "\n".join(c.source for c in nbformat.read(FINAL_PATH, as_version=4).cells)
    assert not [name for name in EXPLORERS if name in source]
    assert "answer_table(" in source  # "How do we know the answers are right?"
