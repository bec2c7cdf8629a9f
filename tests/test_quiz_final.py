"""Notebook 10 is a final check, not a rerun: its questions are new, mix topics, and many apply the
course's rules to code it never showed (helpers/quiz_final.py)."""

import ast
import io
import re
import tokenize
from types import SimpleNamespace

import nbformat
import pytest

from helpers import quiz_final
from helpers.quiz import QUESTIONS, TOPICS, Question, questions
from tests.support.notebook_files import NOTEBOOKS

FINAL = questions(*quiz_final.TOPICS)
OTHERS = [q for q in QUESTIONS if q.topic not in quiz_final.TOPICS]
COURSE_TOPICS = [t for t, notebook in TOPICS.items() if notebook != quiz_final.NOTEBOOK]
FINAL_PATH = next(p for p in NOTEBOOKS if p.name == quiz_final.NOTEBOOK)
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


EARLIER = [p for p in NOTEBOOKS if p.name[:2] in {f"{i:02d}" for i in range(1, 10)}]
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


def test_the_course_names_file_is_what_the_notebooks_use():
    from tooling.course import course_names_text

    assert quiz_final.COURSE_NAMES_FILE.read_text(encoding="utf-8") == course_names_text(), (
        "helpers/text/course_names.txt is stale: run `python -m tooling.course sync`"
    )
    assert {"backward", "retain_grad", "detach", "register_hook"} <= quiz_final.COURSE_NAMES


def test_new_names_are_the_operations_modules_and_keywords_the_course_never_used():
    code = (
        "import pickle\nfrom torch.utils.checkpoint import checkpoint\n"
        "ctx.factor = 2\nx = ctx.factor\ny = torch.nn.Embedding(4, 2)(x, sparse=True)\n%time z = 1"
    )
    assert quiz_final.api_names(code) == {
        "pickle",
        "torch",
        "utils",
        "checkpoint",
        "nn",
        "Embedding",
        "sparse",
    }  # ctx.factor is the program's own attribute; the % line is IPython's
    assert quiz_final.new_names(code, known={"torch", "nn", "utils", "checkpoint"}) == [
        "Embedding",
        "pickle",
        "sparse",
    ]
    assert quiz_final.api_names("x = (") == set()


def test_the_final_check_is_long_enough_and_a_third_is_new_code():
    assert len(FINAL) >= 20
    new = [q for q in FINAL if quiz_final.new_names(q.code)]
    assert 3 * len(new) >= len(FINAL), f"{len(new)} of {len(FINAL)} on new code"
    assert not any(q.draws_on for q in OTHERS)  # mixed questions are notebook 10's kind


def test_no_surface_feature_predicts_the_answers():
    scores = quiz_final.surface_scores(FINAL)
    assert len(scores) >= 8
    worst = max(scores, key=scores.get)
    assert scores[worst] <= quiz_final.SURFACE_LIMIT, f"{worst} predicts {scores[worst]:.0%}"


def replace(question: Question, **changes) -> SimpleNamespace:
    """A question's surface with some fields changed (not a Question: it need not be valid)."""
    return SimpleNamespace(**{**vars(question), **changes})


def test_the_surface_measure_catches_a_giveaway():
    kinds = [replace(q, answer="yes" if q.probe is None else "no") for q in FINAL]
    assert quiz_final.surface_scores(kinds)["kind (does it raise? or a probe)"] == 1.0
    alternating = [replace(q, answer=("yes", "no")[i % 2]) for i, q in enumerate(FINAL)]
    scores = quiz_final.surface_scores(alternating)
    assert scores["position: odd or even"] == 1.0 and scores["the answer before it"] > 0.95
    one_each = [replace(q, prompt=f"W{i} x?") for i, q in enumerate(FINAL)]
    assert quiz_final.surface_scores(one_each)["the prompt's first word"] == max(
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
    for topic in quiz_final.TOPICS:  # each section mixes, and has both answers
        section = questions(topic)
        assert len({t for q in section for t in q.draws_on}) >= 4, topic
        assert {q.answer for q in section} == {"yes", "no"}, topic
    answers = [q.answer for q in FINAL]
    assert 0.4 <= answers.count("yes") / len(answers) <= 0.6


def quiz_calls(path) -> list[tuple[list[str], int]]:
    """The topics and `start` of each quiz(...) call in a notebook, in order."""
    calls = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code" or "quiz(" not in cell.source:
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "quiz":
                start = next((k.value.value for k in node.keywords if k.arg == "start"), 1)
                calls.append(([a.value for a in node.args], start))
    return calls


def test_notebook_10_asks_only_its_new_questions_numbered_on():
    calls = quiz_calls(FINAL_PATH)
    assert [topics for topics, _ in calls] == [[t] for t in quiz_final.TOPICS]
    expected_start = 1
    for topics, start in calls:
        assert start == expected_start, (topics, start)
        expected_start += len(questions(*topics))
    source = "\n".join(c.source for c in nbformat.read(FINAL_PATH, as_version=4).cells)
    assert not [name for name in EXPLORERS if name in source]
    assert "answer_table(" in source  # "How do we know the answers are right?"


def test_a_question_draws_only_on_known_topics():
    with pytest.raises(ValueError, match=r"draws on unknown topic\(s\) \['leaves'\]"):
        Question("leaf", "Is it?", "y = 1", "no", "m", "f", "y == 2", draws_on=("leaves",), id="a")
    assert Question("leaf", "Is it?", "y = 1", "no", "m", "f", probe="y == 2").draws_on == ()
