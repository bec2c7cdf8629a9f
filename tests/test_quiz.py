"""helpers.quiz: the predict-then-reveal questions of every notebook's quiz (notebook 10's checkers
and its final check's questions: tests/exercises/test_nb10.py)."""

import re
from dataclasses import replace

import pytest
import torch

from helpers import quiz as quiz_module
from helpers.interactive.live import VIEW_MIME
from helpers.quiz import (
    ALL_TOPICS,
    CHOICES,
    QUESTIONS,
    TOPICS,
    Observation,
    Question,
    Quiz,
    answer_table,
    questions,
    quiz,
    reveal_html,
    score,
)


@pytest.mark.parametrize("question", QUESTIONS, ids=[f"{q.topic}-{q.prompt}" for q in QUESTIONS])
def test_stated_answer_is_what_torch_does(question):
    assert question.run().answer == question.answer


@pytest.mark.parametrize("question", QUESTIONS, ids=[f"{q.topic}-{q.prompt}" for q in QUESTIONS])
def test_question_is_complete(question):
    assert question.topic in ALL_TOPICS
    assert question.prompt.endswith("?")
    assert question.answer in CHOICES
    assert len(question.misconception) > 20 and len(question.fact) > 40
    compile(question.code, "<question>", "exec")


def test_every_topic_has_questions_and_the_three_kinds_are_asked():
    for topic in ALL_TOPICS:
        assert len(questions(topic)) >= 3, topic
    prompts = " ".join(q.prompt for q in QUESTIONS)
    assert "grad` None" in prompts  # is .grad None?
    assert "raise" in prompts  # does this raise?
    assert "share storage" in prompts  # do these share storage?
    answers = [q.answer for q in QUESTIONS]
    assert 0.3 < answers.count("yes") / len(answers) < 0.7  # no "always yes" strategy


def test_questions_by_topic_and_unknown_topics():
    assert questions() == QUESTIONS
    assert {q.topic for q in questions("leaf", "split")} == {"leaf", "split"}
    with pytest.raises(ValueError, match="topics are: leaf, backward"):
        questions("leaves")


def test_running_a_question_captures_errors_and_warnings():
    leaf = questions("leaf")[0]  # reads y.grad of a non-leaf: torch warns
    seen = leaf.run()
    assert seen.detail == "`y.grad is None` is True."
    assert any("not a leaf Tensor" in w for w in seen.warnings)
    raising = next(q for q in QUESTIONS if q.probe is None and q.answer == "yes")
    assert raising.run().detail.startswith("RuntimeError: ")


def test_running_questions_leaves_the_random_state_alone():
    torch.manual_seed(7)
    state = torch.get_rng_state()
    for q in questions("split"):  # these create Linear layers
        q.run()
    assert torch.equal(state, torch.get_rng_state())


def test_a_probe_question_whose_program_fails_is_reported():
    broken = Question("leaf", "Is it?", "1 / 0", "yes", "m" * 30, "f" * 50, probe="True")
    with pytest.raises(AssertionError, match="raised ZeroDivisionError"):
        broken.run()


def test_reveal_names_the_misconception():
    q = questions("freeing")[0]
    seen = q.run()
    right = reveal_html(q, seen, "yes")
    wrong = reveal_html(q, seen, "no")
    neutral = reveal_html(q, seen)
    assert "✅ Right: yes." in right and "❌ Not quite: the answer is yes." in wrong
    assert "Answer: yes." in neutral
    for text in (right, wrong, neutral):
        assert "<b>Misconception:</b> backward() can be called as often as you like." in text
        assert "Trying to backward through the graph a second time" in text


@pytest.fixture(autouse=True)
def no_predictions_yet():
    """Each test starts with no prediction recorded (the score is kept per kernel)."""
    from helpers import quiz as quiz_module

    quiz_module._FIRST_PREDICTIONS.clear()
    quiz_module._SCOREBOARDS.clear()


def test_quiz_widget_reveals_on_click():
    shown = quiz("detach", start=8)
    assert [len(b) for b in shown.buttons] == [2, 2, 2]
    assert all(r.value == "" for r in shown.reveals)
    yes, no = shown.buttons[0]
    yes.click()
    assert "✅ Right: yes." in shown.reveals[0].value
    assert yes.button_style == "success" and no.button_style == ""
    assert shown.answer(1, "yes") is False
    assert shown.buttons[1][0].button_style == "danger"
    assert "Misconception" in shown.reveals[1].value


def test_quiz_output_carries_a_static_version():
    shown = quiz("freeing", title="Freeing the graph", start=14)
    bundle = shown._repr_mimebundle_()
    assert set(bundle) == {VIEW_MIME, "text/html", "text/plain"}
    html = bundle["text/html"]
    assert html.count("<details>") == 3 and "Show the answer" in html
    plain = bundle["text/plain"]
    assert "14. Does the last line raise an error?" in plain
    assert "It ran without an error." in html and "It ran without an error." not in plain
    assert "Answer:" not in plain and "Misconception" not in plain  # plain text has no answers
    assert plain.endswith("each is folded under its question.")
    assert "0x" not in bundle["text/plain"]
    assert "autograd-quiz" in shown.widget._dom_classes
    again = quiz("freeing", title="Freeing the graph", start=14)._repr_mimebundle_()
    assert again["text/html"] == html and again["text/plain"] == bundle["text/plain"]


def test_prompts_show_code_in_html():
    html = quiz("leaf")._repr_mimebundle_()["text/html"]
    assert "1. After this, is <code>y.grad</code> None?" in html


def test_quiz_refuses_a_wrong_stated_answer():
    q = questions("freeing")[0]
    wrong = Question(q.topic, q.prompt, q.code, "no", q.misconception, q.fact, q.probe)
    with pytest.raises(AssertionError, match="says 'no', but running it gives 'yes'"):
        Quiz([wrong])


def test_answer_table_agrees():
    table = answer_table(questions("backward"))
    assert table.column("agree") == [True] * 4
    assert table.column("question")[0] == "1. Has `w` changed?"


def test_higher_order_questions_are_new_and_balanced():
    mine = questions("higher_order")
    others = {q.prompt for q in QUESTIONS if q.topic != "higher_order"}
    assert 4 <= len(mine) <= 6 and not others & {q.prompt for q in mine}
    assert [q.answer for q in mine].count("yes") == len(mine) // 2
    assert TOPICS["higher_order"] == "09_past_first_order.ipynb"


def test_grad_modes_questions_are_new():
    mine = questions("grad_modes")
    others = {q.prompt for q in QUESTIONS if q.topic != "grad_modes"}
    assert 4 <= len(mine) <= 6 and not others & {q.prompt for q in mine}
    assert TOPICS["grad_modes"] == "08_grad_modes_and_why_nothing_learns.ipynb"


# ---- "does it raise?" questions name what they expect ---------------------------------------


def _raising(code, raises=(RuntimeError, "a second time")):
    return Question(
        topic="freeing",
        prompt="Does the last line raise an error?",
        code=code,
        answer="yes",
        misconception="m",
        fact="f",
        raises=raises,
    )


SECOND_BACKWARD = (
    "x = torch.ones(2, requires_grad=True)\ny = (x * x).sum()\ny.backward()\ny.backward()"
)


def test_a_raise_question_observes_its_own_exception():
    observed = _raising(SECOND_BACKWARD).run()
    assert observed.answer == "yes" and observed.detail.startswith("RuntimeError: Trying to")


def test_a_typo_is_not_an_answer_to_does_it_raise():
    typo = SECOND_BACKWARD.replace("y.backward()\ny.backward()", "y.backward()\ny.bakward()")
    with pytest.raises(AssertionError, match=r"raised AttributeError.*about RuntimeError"):
        _raising(typo).run()
    with pytest.raises(AssertionError, match="raised NameError"):
        _raising(SECOND_BACKWARD.replace("y.backward()\ny.backward()", "z.backward()")).run()


def test_the_right_exception_with_another_message_is_not_the_answer_either():
    with pytest.raises(AssertionError, match="the question is about RuntimeError"):
        _raising(SECOND_BACKWARD, raises=(RuntimeError, "modified by an inplace")).run()


def test_a_yes_raise_question_must_name_its_exception():
    # the course's own questions (with an id) are refused as they are made
    with pytest.raises(ValueError, match="name the exception it expects"):
        Question("leaf", "Is it?", "y = 1", "yes", "m", "f", id="01_leaf_nodes:x")
    with pytest.raises(ValueError, match="a probe or raises, not both"):
        Question("leaf", "Is it?", "y = 1", "yes", "m", "f", "y", (ValueError, "x"), id="a:b")
    with pytest.raises(ValueError, match="draws on unknown topic"):
        Question("leaf", "Is it?", "y = 1", "no", "m", "f", draws_on=("leaves",), id="a:b")
    # a learner's is made as written; running it says what is missing
    learners = _raising(SECOND_BACKWARD, raises=None)
    with pytest.raises(ValueError, match="name the exception it expects"):
        learners.run()


def test_every_yes_raise_question_of_the_course_names_its_exception():
    raising = [q for q in QUESTIONS if q.probe is None and q.answer == "yes"]
    assert raising and all(q.raises is not None for q in raising)


def typed_numbers(question: Question) -> set[str]:
    """Numbers typed into an explanation that the program's text does not contain: results it
    computes, which belong in {placeholders}. Not counted: 0, 1, 2, exponent-form constants,
    years, dtype names, a formula's coefficients (6·x), notebook and exercise numbers."""
    text = question.misconception + " " + question.fact
    references = r"(?:notebook|exercise) \d+"
    for pattern in (r"\{[^{}]*\}", references, r"\b(?:19|20)\d\d\b", r"float\d+", r"\d+·"):
        text = re.sub(pattern, "", text)
    number = r"\d+(?:\.\d+)?(?:e-?\d+)?"
    typed = {n for n in re.findall(number, text) if "e" not in n}
    return typed - set(re.findall(number, question.code)) - {"0", "1", "2"}


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_explanations_do_not_type_the_computed_numbers(question):
    assert typed_numbers(question) == set()


def test_a_typed_result_is_caught_and_a_placeholder_is_computed():
    q = next(q for q in QUESTIONS if q.id.endswith(":backward-2"))
    assert "{w}" in q.fact and q.run().fact.endswith("w is now [0.8, 1.6].")
    typed = replace(q, fact=q.fact.replace("{w}", "[0.8, 1.6]"))
    assert typed_numbers(typed) == {"0.8", "1.6"}
    broken = replace(q, fact="w is now {v}.")
    with pytest.raises(AssertionError, match=r"shows \{v\}, which fails after its program ran"):
        broken.run()
    braces = replace(q, fact="a dict: {{k: 1}}, w is {w}")
    assert braces.run().fact == "a dict: {k: 1}, w is [0.8, 1.6]"


# ---- questions read from the text files, and shown in the learner's language --------------------


@pytest.fixture
def text_root(tmp_path, monkeypatch):
    """A copy of the text files the test may change; English and fresh caches afterwards."""
    import shutil

    from helpers import language

    root = tmp_path / "text"
    shutil.copytree(language.TEXT_ROOT, root)
    shutil.rmtree(root / "zh")
    (root / "zh").mkdir()
    monkeypatch.setattr(language, "TEXT_ROOT", root)
    language._file.cache_clear()
    language._all_phrases.cache_clear()
    yield root
    language.set_language("en")
    language._file.cache_clear()
    language._all_phrases.cache_clear()


def write_text(root, path, body):
    from helpers import language

    (root / path).write_text(body, encoding="utf-8")
    language._file.cache_clear()
    language._all_phrases.cache_clear()


QUESTIONS_FILE = """\
[quiz.raising]
topic = "freeing"
prompt = "Does the last line raise an error?"
code = '''

x = torch.ones(2, requires_grad=True)
y = (x * x).sum()
y.backward()
y.backward()

'''
answer = "yes"
raises = ["RuntimeError", "a second time"]
misconception = "backward() can be called again."
fact = "the saved tensors are freed."
draws_on = ["freeing", "backward"]

[quiz.probing]
topic = "leaf"
prompt = "Is x a leaf?"
code = "x = torch.ones(2)"
answer = "yes"
probe = "x.is_leaf"
misconception = "a tensor without grad is not a leaf."
fact = "every tensor made by the user is a leaf."
"""


def test_a_notebooks_questions_are_read_from_its_text_file(text_root):
    from helpers.quiz import _notebook_questions

    write_text(text_root, "en/99_questions.toml", QUESTIONS_FILE)
    raising, probing = _notebook_questions("99_questions")
    assert raising == Question(
        topic="freeing",
        prompt="Does the last line raise an error?",
        code="x = torch.ones(2, requires_grad=True)\ny = (x * x).sum()\ny.backward()\ny.backward()",
        answer="yes",
        misconception="backward() can be called again.",
        fact="the saved tensors are freed.",
        raises=(RuntimeError, "a second time"),
        draws_on=("freeing", "backward"),
        id="99_questions:raising",
    )
    assert probing == Question(
        "leaf",
        "Is x a leaf?",
        "x = torch.ones(2)",
        "yes",
        "a tensor without grad is not a leaf.",
        "every tensor made by the user is a leaf.",
        probe="x.is_leaf",
        id="99_questions:probing",
    )
    assert raising.run().answer == "yes" and probing.run().answer == "yes"


@pytest.mark.parametrize("name", ["NoSuchError", "print", "int"])
def test_a_question_must_expect_a_built_in_exception(text_root, name):
    from helpers.quiz import _notebook_questions

    write_text(
        text_root,
        "en/99_questions.toml",
        QUESTIONS_FILE.replace('"RuntimeError"', f'"{name}"'),
    )
    with pytest.raises(
        ValueError,
        match=rf"99_questions\.toml \[quiz\.raising\]: raises names '{name}', which is not a "
        "built-in exception",
    ):
        _notebook_questions("99_questions")


def test_a_question_on_an_unknown_topic_and_a_yes_raise_question_say_how_to_fix_them():
    with pytest.raises(ValueError, match=r"'Is it\?' draws on unknown topic\(s\) \['nope'\]"):
        Question("leaf", "Is it?", "y = 1", "no", "m", "f", "y", draws_on=("leaf", "nope"), id="a")
    with pytest.raises(ValueError, match=r"e\.g\. raises=\(RuntimeError, 'a fragment"):
        Question("leaf", "Does it raise?", "y = 1", "yes", "m", "f", id="a:b")


def test_a_question_is_localized_into_the_language_asked_for(text_root):
    from helpers import language

    q = next(q for q in QUESTIONS if q.id == "01_leaf_nodes:leaf-1")
    entry = language.translated_table("01_leaf_nodes", "quiz.leaf-1")
    write_text(
        text_root,
        "zh/01_leaf_nodes.toml",
        f'[quiz.leaf-1]\nen = "{language.english_hash(entry)}"\nprompt = "问？"\n'
        'misconception = "误解"\nfact = "事实"\n',
    )
    chinese = q.localized("zh")
    assert (chinese.prompt, chinese.misconception, chinese.fact) == ("问？", "误解", "事实")
    assert chinese.code == q.code and chinese.id == q.id
    assert q.localized("en") == q and q.localized() == q  # English is the current language
    unmarked = replace(q, id="")
    assert unmarked.localized("zh") is unmarked


def test_labels_in_full_width_punctuation_take_no_space(text_root):
    from helpers import language

    write_text(
        text_root,
        "zh/common.toml",
        '[quiz]\nen = "x"\nmisconception = "误区："\nfact = "事实。"\nalso_warned = "警告："\n'
        'running_it = "运行："\n',
    )
    q = QUESTIONS[0]
    seen = q.run()
    english = reveal_html(q, seen)
    assert "<b>Misconception:</b> " in english and "<b>Fact:</b> " in english
    language.set_language("zh")
    chinese = reveal_html(q, seen)
    assert f"<b>误区：</b>{html_escape(q.misconception)}" in chinese
    assert f"<b>事实。</b>{html_escape(seen.fact)}" in chinese
    assert f"运行：{html_escape(seen.detail)}" in chinese


def html_escape(text):
    import html

    return html.escape(text)


def test_a_quiz_title_comes_from_its_own_notebooks_phrases(text_root):
    from helpers import language

    write_text(text_root, "zh/01_leaf_nodes.toml", '[phrases]\n"Check" = "检查一"\n')
    write_text(text_root, "zh/02_backward_and_optimizers.toml", '[phrases]\n"Check" = "检查二"\n')
    language.set_language("zh")
    assert quiz("backward", title="Check").title == "检查二"
    assert Quiz(questions("backward")[:1], title="Check").title == "检查二"
    assert quiz("leaf", title="Check").title == "检查一"
    assert Quiz([], title="Check").title == "检查一"  # no notebook: any file's phrase
    assert Quiz([]).title == language.say("common", "quiz.title")


def test_the_text_form_lays_out_the_questions_and_says_where_the_answers_are():
    q = next(q for q in QUESTIONS if q.id.endswith(":backward-2"))
    shown = Quiz([q], title="One question")
    seen = q.run()
    code = ["    " + line for line in q.code.splitlines()]
    assert repr(shown).splitlines() == [
        "One question (1 questions; interactive: run the notebook)",
        "",
        f"1. {q.prompt}",
        *code,
        "",
        "The answers: run the notebook and click, or open its HTML view, where each is folded "
        "under its question.",
    ]
    assert seen.fact.endswith("w is now [0.8, 1.6].") and "{w}" not in shown.snapshot_html
    assert "w is now [0.8, 1.6]." in reveal_html(q, seen) and "w is now" in shown.snapshot_html


def test_the_text_form_lists_no_answer():
    two = Quiz(questions("backward")[:2], title="Two")
    text = repr(two)
    assert "\n2. " in text and "Answer" not in text and "Misconception" not in text
    assert not any(seen.detail in text for seen in two.observed)


def test_a_reveal_lists_every_warning():
    q = QUESTIONS[0]
    seen = Observation("yes", "ran", ("UserWarning: one", "UserWarning: two"))
    assert "<br/>It also warned: UserWarning: one<br/>It also warned: UserWarning: two<br/>" in (
        reveal_html(q, seen)
    )


def test_the_widget_holds_the_title_each_question_and_its_buttons():
    shown = quiz("detach", title="Detach", start=8)
    header, *boxes = shown.widget.children
    assert "Detach" in header.value and len(boxes) == 3
    for number, (box, q, buttons) in enumerate(
        zip(boxes, shown.items, shown.buttons, strict=True), start=8
    ):
        shown_q, row, reveal = box.children
        assert shown_q.value.startswith(f"<b>{number}. ") and q.code.split("\n")[0] in shown_q.value
        assert list(row.children) == buttons and reveal is shown.reveals[number - 8]
        assert [b.description for b in buttons] == ["yes", "no"]
        assert "autograd-question" in box._dom_classes  # the browser test finds questions by it
    assert Quiz(questions("detach"))._text().splitlines()[2].startswith("1. ")


def test_the_static_version_is_the_title_and_the_questions_only():
    shown = quiz("freeing", title="Freeing")
    static = shown._repr_mimebundle_()["text/html"]
    assert static.startswith("<h4>Freeing</h4><div><b>1. ")
    assert static.count("</details></div><div><b>") == 2 and static.endswith("</details></div>")


def test_the_answer_table_opens_folded_and_plain_text_shows_no_answer():
    table = answer_table(questions("backward"))
    assert repr(table) == "Stated and observed answers: 4 of 4 agree (open to see them)"
    html = table._repr_html_()
    assert html.startswith("<details><summary>Stated and observed answers: 4 of 4 agree")
    assert html.endswith("</table></details>") and html.count("<tr>") == 5


def test_the_score_counts_first_predictions_and_names_notebooks_to_reread():
    items = questions("detach")
    board = score("detach", start=8)
    assert board.summary().startswith("Your score: none of the 3 questions answered yet.")
    shown = quiz("detach", start=8)
    wrong = "no" if shown.observed[1].answer == "yes" else "yes"
    shown.answer(0, shown.observed[0].answer)
    shown.answer(1, wrong)
    shown.answer(1, shown.observed[1].answer)  # a second click does not count
    assert board.counts() == (2, 1, [9])
    assert board.summary() == (
        "Your score: 1 of your 2 first predictions right (3 questions). "
        "Missed: 9. Reread notebooks 03."
    )
    assert board.label.value == board.summary()  # the widget updated itself
    quiz("detach", start=8).answer(1, wrong)  # a re-run quiz cell keeps the first predictions
    assert board.counts() == (2, 1, [9]) and len(items) == 3


def test_the_answer_table_names_the_notebooks_a_question_draws_on():
    mixed = [q for q in QUESTIONS if len(q.draws_on) >= 2][:2]
    table = answer_table(mixed)
    for q, notebooks in zip(mixed, table.column("notebooks"), strict=True):
        numbers = sorted(TOPICS[t].split("_")[0] for t in q.draws_on)
        assert notebooks == ", ".join(numbers) and len(numbers) >= 2
    assert answer_table(questions("leaf")[:1]).column("notebooks") == ["01"]


def test_an_optional_notebook_topic_is_quizzed_but_not_in_the_final_check():
    """07b is optional (NNb_topic.ipynb, the course's name for an optional notebook): its
    questions exist, and notebook 10, which covers TOPICS, asks none of them."""
    from helpers.quiz import OPTIONAL_TOPICS

    optional = re.compile(r"\d{2}[a-z]_")
    for topic, notebook in OPTIONAL_TOPICS.items():
        assert topic not in TOPICS and len(questions(topic)) >= 3
        assert optional.match(notebook), notebook
    assert not any(optional.match(notebook) for notebook in TOPICS.values())
    assert ALL_TOPICS == {**TOPICS, **OPTIONAL_TOPICS}


def test_each_optional_notebook_asks_its_own_questions_under_check_yourself():
    """05b, 07b, 09b and 09c each quiz their own topic, once, in their "Check yourself" section,
    in both editions: notebook 10's final check leaves their ideas out, so they are asked here."""
    import nbformat

    from helpers.quiz import OPTIONAL_TOPICS
    from tests.support.notebook_files import FOLDER

    assert sorted(name.split("_")[0] for name in OPTIONAL_TOPICS.values()) == [
        "05b",
        "07b",
        "09b",
        "09c",
    ]
    headings = {FOLDER: "Check yourself", FOLDER / "zh": "检验自己"}
    for topic, name in OPTIONAL_TOPICS.items():
        for folder, heading in headings.items():
            path = folder / name
            asked, section = [], ""
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "markdown":
                    section = ([""] + re.findall(r"^## (.+)$", cell.source, re.M))[-1] or section
                else:
                    found = re.findall(r"\bquiz\(\s*[\"']([a-z0-9_]+)[\"']", cell.source)
                    asked += [(section.strip(), t) for t in found]
            assert asked == [(heading, topic)], path


def test_the_score_numbers_from_one_shows_itself_and_skips_what_is_unanswered():
    import html

    board = score("backward", "detach")  # 4 questions, then 3
    assert board.label.value == html.escape(board.summary())  # from the start, not only later
    assert "autograd-score" in board.label._dom_classes  # the browser test finds it by it
    bundle = board._repr_mimebundle_()
    assert bundle[VIEW_MIME]["model_id"] == board.label.model_id
    assert bundle["text/plain"] == repr(board) == board.summary()
    assert bundle["text/html"] == f"<p>{html.escape(board.summary())}</p>"
    for shown in (quiz("backward"), quiz("detach", start=5)):  # each first question, wrong
        shown.answer(0, "no" if shown.observed[0].answer == "yes" else "yes")
    assert board.counts() == (2, 0, [1, 5])  # 2 to 4 unanswered, and counted past
    assert board.summary().endswith("Missed: 1, 5. Reread notebooks 02, 03.")


def test_a_question_is_known_by_its_id_else_by_its_prompt():
    first = questions("backward")[0]
    assert quiz_module._key(first) == first.id != first.prompt
    assert quiz_module._key(replace(first, id=None)) == first.prompt


def test_a_question_draws_only_on_known_topics():
    with pytest.raises(ValueError, match=r"draws on unknown topic\(s\) \['leaves'\]"):
        Question("leaf", "Is it?", "y = 1", "no", "m", "f", "y == 2", draws_on=("leaves",), id="a")
    assert Question("leaf", "Is it?", "y = 1", "no", "m", "f", probe="y == 2").draws_on == ()


def test_every_topic_is_asked_in_its_notebook():
    """A topic's questions are written to be asked: its notebook has a quiz(...) or score(...)
    cell that names it (notebook 07's questions once stood in no cell)."""
    import nbformat

    from helpers.quiz import ALL_TOPICS
    from tests.support.notebook_files import FOLDER

    for topic, name in ALL_TOPICS.items():
        cells = nbformat.read(FOLDER / name, as_version=4).cells
        calls = [
            found.group(1)
            for cell in cells
            if cell.cell_type == "code"
            for found in re.finditer(r"\b(?:quiz|score)\(([^)]*)\)", cell.source)
        ]
        assert any(f'"{topic}"' in call for call in calls), f"{name} asks no {topic} question"
