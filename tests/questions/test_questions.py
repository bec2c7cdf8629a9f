"""The questions learners ask (helpers/questions): at least 40, each from a public thread, in
the notebook's topics; `ask` and the doctor's list speak the learner's language; a mistyped id is
named. (tests/questions/test_notebook_answers.py holds the notebooks and READMEs to them.)"""

from __future__ import annotations

import re

import pytest

from helpers.language import say_in, set_language
from helpers.questions import TOPICS, answered_by_the_doctor, ask, learner_questions

THREADS = re.compile(
    r"https://(discuss\.pytorch\.org/t/|github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$"
    r"|stackoverflow\.com/questions/\d+/)"
)
EN = learner_questions("en")


def test_at_least_forty_distinct_questions_each_from_a_public_thread():
    assert len(EN) >= 40
    assert len({q.question for q in EN.values()}) == len(EN)
    assert len({q.source_url for q in EN.values()}) == len(EN), "one thread, one question"
    for q in EN.values():
        assert THREADS.match(q.source_url), f"{q.id}: {q.source_url} is not a thread's address"
        assert q.source_title.strip() and q.short.strip() and q.explanation.strip(), q.id


def test_the_questions_are_grouped_by_topic_in_the_notebooks_order():
    topics = [q.topic for q in EN.values()]
    assert set(topics) == set(TOPICS), "every topic has a question, and no other topic is used"
    order = [TOPICS.index(t) for t in topics]
    assert order == sorted(order), "the file lists the questions topic by topic"


def test_ask_shows_the_question_its_thread_and_answer_in_the_learner_s_language(capsys):
    try:
        set_language("zh")
        asked = ask("backward-twice")
        shown = capsys.readouterr().out
    finally:
        set_language("en")
    zh = learner_questions("zh")["backward-twice"]
    assert asked == zh and zh.question != EN["backward-twice"].question
    assert zh.question in shown and zh.explanation in shown
    assert EN["backward-twice"].source_url in shown
    assert "05_freeing_the_graph.ipynb" in shown


def test_the_doctor_s_list_names_each_verdict_in_the_language():
    set_language("zh")
    try:
        listed = answered_by_the_doctor()
    finally:
        set_language("en")
    assert listed.count("\n- ") == sum(bool(q.doctor) for q in EN.values())
    assert say_in("zh", "common", "doctor.verdict_unregistered") in listed


def test_a_mistyped_id_is_named_with_the_closest_ones():
    with pytest.raises(KeyError, match="did you mean 'backward-twice'"):
        ask("backwards-twice")
    with pytest.raises(KeyError, match="the ids are listed in"):
        ask("nothing-like-any")
    with pytest.raises(TypeError, match="a string such as"):
        ask(3)


def test_a_question_the_doctor_answers_names_its_verdict_and_where_to_read_on():
    shown = EN["sqrt-at-zero-nan"]._repr_markdown_()
    assert say_in("en", "common", "doctor.verdict_nonfinite") in shown
    assert "(08_grad_modes_and_why_nothing_learns.ipynb)" in shown
    assert "In depth" not in shown  # no notebook named for depth
    plain = EN["hooks-skipped-by-forward-call"]._repr_markdown_()
    assert "doctor" not in plain and plain.startswith("**Hooks skipped by model.forward(x)** · ")
    wanted = "LearnerQuestion('backward-twice': A second backward() fails)"
    assert repr(EN["backward-twice"]) == wanted


def test_in_a_notebook_ask_displays_markdown_and_prints_nothing(monkeypatch, capsys):
    import IPython
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    asked = ask("clone-keeps-graph")
    assert capsys.readouterr().out == ""
    assert [s.data for s in shown] == [asked._repr_markdown_()]
    assert answered_by_the_doctor()._repr_markdown_() == str(answered_by_the_doctor())


def test_a_question_shows_as_this_markdown():
    q = learner_questions("en")["backward-twice"]
    assert q._repr_markdown_() == "\n".join(
        [
            f"**{q.short}** · {q.question}",
            "",
            f"Asked in: [{q.source_title}]({q.source_url})",
            "",
            f"**Answer.** {q.explanation}",
            "",
            "In depth: notebook [05](05_freeing_the_graph.ipynb).",
        ]
    )
    q = learner_questions("en")["sqrt-at-zero-nan"]
    assert q._repr_markdown_().startswith(f"**{q.short}** · {q.question}\n\nAsked in: ")
    assert q._repr_markdown_().split("\n")[-2:] == [
        "",
        "[08](08_grad_modes_and_why_nothing_learns.ipynb)'s doctor finds it in one checked step: "
        "*NaN/inf gradient*.",
    ]


def test_each_question_holds_its_own_entry_of_the_data_file():
    import tomllib

    from helpers.language import TEXT_ROOT

    with (TEXT_ROOT / "en" / "10b_questions_learners_ask.toml").open("rb") as f:
        data = tomllib.load(f)["question"]
    for key, q in learner_questions("en").items():  # made now: a mutant's, under `make mutate`
        entry = data[key]
        assert q.id == key
        assert (q.topic, q.short, q.question, q.explanation) == (
            entry["topic"],
            entry["short"],
            entry["question"],
            entry["explanation"],
        )
        assert (q.source_title, q.source_url) == (entry["source_title"], entry["source_url"])
        assert (q.see, q.doctor) == (entry.get("see"), entry.get("doctor"))


def test_the_doctor_s_list_is_this_markdown():
    assert answered_by_the_doctor().split("\n")[:3] == [
        "Of the [questions learners ask](10b_questions_learners_ask.ipynb), the doctor answers "
        "these in one checked step:",
        "",
        "- *Layers in a plain list never train*: never registered",
    ]


def test_two_close_ids_are_both_named():
    with pytest.raises(KeyError) as caught:
        ask("grad-none")
    assert "did you mean 'nonleaf-grad-none', 'zero-grad-sets-none'?" in str(caught.value)
    with pytest.raises(TypeError, match="not int"):
        ask(3)


def test_each_chinese_source_title_is_the_thread_s_title_with_a_chinese_gloss():
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for key, q in learner_questions("zh").items():
        english = EN[key].source_title
        assert q.source_title.startswith(english + "（"), f"{key}: not the thread's own title first"
        gloss = q.source_title[len(english) + 1 :]
        assert gloss.endswith("）") and cjk.search(gloss), f"{key}: no Chinese gloss in （）"


def test_a_question_cites_a_chinese_thread_asking_the_same_beside_the_english_one():
    cjk = re.compile(r"[\u4e00-\u9fff]")
    zh = learner_questions("zh")
    cited = {key: q.local_threads for key, q in zh.items() if q.local_threads}
    assert len(cited) >= 8, "at least eight questions cite a Chinese-language thread"
    assert not any(q.local_threads for q in EN.values()), "English cites its one thread"
    urls = [url for threads in cited.values() for _, url in threads]
    assert len(set(urls)) == len(urls), "one thread, one question"
    for key, threads in cited.items():
        for title, url in threads:
            assert cjk.search(title) and url.startswith("https://"), f"{key}: {title} {url}"
            assert url != EN[key].source_url and url not in {q.source_url for q in EN.values()}
        set_language("zh")
        try:
            shown = zh[key]._repr_markdown_().split("\n")
        finally:
            set_language("en")
        also = say_in("zh", "10b_questions_learners_ask", "ui.also_asked", threads="")
        line = next(s for s in shown if s.startswith(also))
        assert all(f"[{title}]({url})" in line for title, url in threads)
        assert shown.index(line) == 4, "right after the English thread"
        assert shown[3] == "", "a paragraph of its own"


CODE_SPAN = re.compile(r"`[^`]*`")
#: Code written as prose: a call `f()`, a dotted name `x.grad`, a keyword argument `a=b`.
BARE_CODE = re.compile(r"\b[A-Za-z_]\w*\([^)]*\)|\b[a-z_]\w*\.[a-z_]\w*|\b\w+=\w")
SENTENCE_END = re.compile(r"[.?!](?=\s|$)|[。？！]")


@pytest.mark.parametrize("code", ["en", "zh"])
def test_a_long_answer_is_short_paragraphs_with_its_code_in_code_spans(code):
    for key, q in learner_questions(code).items():
        paragraphs = q.explanation.split("\n\n")
        assert all(p.strip() == p and p and "\n" not in p for p in paragraphs), key
        if len(EN[key].explanation) > 150:
            assert len(paragraphs) >= 2, f"{key} ({code}): one paragraph of a long answer"
        for paragraph in paragraphs:
            prose = CODE_SPAN.sub("", paragraph)
            assert len(SENTENCE_END.findall(prose)) <= 4, f"{key} ({code}): {paragraph}"
            assert not BARE_CODE.search(prose), f"{key} ({code}): code outside a code span"
    assert len(EN["backward-twice"].explanation.split("\n\n")) == 2  # the collection's first
