"""helpers.language: learner-facing text read from data files, in the learner's language."""

import shutil

import pytest

from helpers import language
from helpers.display import Table
from helpers.language import (
    english_hash,
    phrase,
    say,
    set_language,
    translated_table,
    translation_problems,
    untranslated,
)
from helpers.quiz import QUESTIONS, quiz


@pytest.fixture
def text_root(tmp_path, monkeypatch):
    """A copy of the text files the test may change, and the language reset afterwards."""
    root = tmp_path / "text"
    shutil.copytree(language.TEXT_ROOT, root)
    monkeypatch.setattr(language, "TEXT_ROOT", root)
    language._file.cache_clear()
    language._all_phrases.cache_clear()
    yield root
    set_language("en")
    language._file.cache_clear()
    language._all_phrases.cache_clear()


def write_zh(root, name, body):
    (root / "zh").mkdir(exist_ok=True)
    (root / "zh" / f"{name}.toml").write_text(body, encoding="utf-8")
    language._file.cache_clear()
    language._all_phrases.cache_clear()


def test_every_committed_translation_is_in_step_with_the_english():
    for code in language.LANGUAGES:
        if code != "en":
            assert translation_problems(code) == [], code


def test_english_is_complete_by_definition():
    assert untranslated("en") == []


def test_an_unknown_language_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown language 'fr'; the course speaks 'en', 'zh'"):
        set_language("fr")


def test_say_fills_placeholders_and_names_a_missing_one():
    assert say("common", "checks.as_expected", name="E", message="m") == "E (as expected): m"
    with pytest.raises(KeyError, match=r"needs \['message'\]"):
        say("common", "checks.as_expected", name="E")
    with pytest.raises(KeyError, match=r"has no string 'checks\.nope'"):
        say("common", "checks.nope")


def test_braces_are_literal_when_doubled():
    assert language.placeholders("{{a}} {b} {c.d()}") == {"b", "c.d()"}
    assert language.fill("{{x}} {y}", str.upper) == "{x} Y"


def test_a_translation_is_used_and_falls_back_to_english(text_root):
    english = translated_table("common", "checks")
    write_zh(
        text_root,
        "common",
        f'[checks]\nen = "{english_hash(english)}"\nnot_yet = "还没有："\n',
    )
    set_language("zh")
    assert say("common", "checks.not_yet") == "还没有："
    assert say("common", "checks.correct") == "Correct."  # not translated: English
    set_language("en")
    assert say("common", "checks.not_yet") == "Not yet:"
    assert translation_problems("zh") == []
    assert "common [checks]" in untranslated("zh")


def test_stale_wrong_and_extra_translations_are_named(text_root):
    write_zh(
        text_root,
        "common",
        '[checks]\nen = "000000000000"\nas_expected = "{name}（意料之中）"\nnope = "x"\n'
        "[nothing]\nen = 'x'\na = 'b'\n",
    )
    problems = "\n".join(translation_problems("zh"))
    assert "zh/common.toml [checks]: stale, the English changed" in problems
    assert "'as_expected' has placeholders ['name'], the English ['message', 'name']" in problems
    assert "[checks]: English has no string 'nope'" in problems
    assert "zh/common.toml [nothing]: English has no such table" in problems


def test_a_quiz_speaks_the_language_and_its_program_stays(text_root):
    q = next(q for q in QUESTIONS if q.id == "01_leaf_nodes:leaf-1")
    entry = translated_table("01_leaf_nodes", "quiz.leaf-1")
    write_zh(
        text_root,
        "01_leaf_nodes",
        f'[quiz.leaf-1]\nen = "{english_hash(entry)}"\nprompt = "之后 `y.grad` 是 None 吗？"\n'
        'misconception = "误解"\nfact = "事实"\n[phrases]\n"Leaves" = "叶子节点"\n',
    )
    write_zh(text_root, "common", '[quiz]\nen = "x"\nyes = "是"\nno = "否"\n')
    set_language("zh")
    shown = quiz("leaf", title="Leaves")
    assert shown.title == "叶子节点"
    assert shown.items[0].prompt == "之后 `y.grad` 是 None 吗？" and shown.items[0].code == q.code
    assert [b.description for b in shown.buttons[0]] == ["是", "否"]
    assert shown.answer(0, "yes") and "事实" in shown.reveals[0].value
    assert translation_problems("zh") == [
        "zh/common.toml [quiz]: stale, the English changed after this translation (en = 'x', "
        f"the English now hashes to {english_hash(translated_table('common', 'quiz', 'en'))!r}); "
        "check the translation, then update en"
    ]


def test_a_table_shows_its_headings_translated_and_keeps_english_keys(text_root):
    write_zh(text_root, "common", '[phrases]\n"is leaf" = "是叶子"\n"a note" = "注"\n')
    table = Table(["name", "is leaf"], [{"name": "w", "is leaf": True}], note="a note")
    set_language("zh")
    assert table.row("w")["is leaf"] is True
    assert repr(table).splitlines() == ["name  是叶子", "----  ------", "w     True", "注"]
    assert '<th style="text-align: left">是叶子</th>' in table._repr_html_()
    set_language("en")
    assert repr(table).splitlines()[0] == "name  is leaf"


def test_phrase_without_a_translation_is_the_english(text_root):
    set_language("zh")
    assert phrase(None, "no such phrase") == "no such phrase"
