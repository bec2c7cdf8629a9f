"""helpers.language: learner-facing text read from data files, in the learner's language."""

import json
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


def test_a_type_starting_with_a_vowel_takes_an():
    def said(kind):
        return say("09c_torch_compile_and_autograd", "feedback.not_function", type=kind)

    for kind in ("array", "ellipsis", "int", "object", "Ellipsis"):
        assert said(kind) == f"one_graph is an {kind}, not a function"
    assert said("uint8") == "one_graph is a uint8, not a function"  # said "you-int"
    assert said("ndarray") == "one_graph is an ndarray, not a function"  # said "en-dee-array"
    assert said("MSELoss") == "one_graph is an MSELoss, not a function"
    assert said("NoneType") == "one_graph is a NoneType, not a function"
    assert said("float") == "one_graph is a float, not a function"
    assert said("") == "one_graph is a , not a function"  # no name: no vowel
    assert say("common", "checks.as_expected", name="int", message="m") == "int (as expected): m"


def test_the_article_itself_is_a_or_an_by_the_names_first_sound():
    from helpers.language import article

    assert [article(n) for n in ("uint8", "NoneType", "str", "Linear")] == ["a"] * 4
    assert article("MLflow") == "an"  # two capitals make an abbreviation: "em-el-flow"


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


def test_a_heading_word_is_translated_only_where_it_heads_a_column(text_root):
    """"loss" heads a column of values, and in another table's cells names a variable: the
    [headings] table translates it only as a heading."""
    write_zh(text_root, "common", '[headings]\n"loss" = "损失"\n[phrases]\n"run" = "运行"\n')
    table = Table(["run", "loss"], [{"run": "loss", "loss": 0.5}])
    set_language("zh")
    assert repr(table).splitlines() == ["运行  损失", "----  ----", "loss  0.5"]
    assert '<th style="text-align: left">损失</th>' in table._repr_html_()
    assert phrase(None, "loss") == "loss"
    set_language("en")
    assert repr(table).splitlines()[0] == "run   loss"


def test_phrase_without_a_translation_is_the_english(text_root):
    set_language("zh")
    assert phrase(None, "no such phrase") == "no such phrase"


def test_a_nested_key_and_a_missing_table_are_found_by_their_dotted_name():
    leaf_1 = translated_table("01_leaf_nodes", "quiz.leaf-1")
    assert say("01_leaf_nodes", "quiz.leaf-1.prompt") == leaf_1["prompt"]
    with pytest.raises(KeyError, match=r"helpers/text/en/common\.toml has no table \[nope\]"):
        language.table("common", "nope")


def test_a_top_level_string_is_said_without_a_section(text_root):
    (text_root / "en" / "extra.toml").write_text('greeting = "Hello, {name}."\n[t]\nx = "y"\n')
    assert say("extra", "greeting", name="you") == "Hello, you."


def test_the_hash_tells_different_english_apart():
    assert english_hash("a text") == english_hash("a text")
    assert english_hash("a text") != english_hash("another text")
    assert english_hash({"a": "x", "n": 1}) == english_hash({"a": "x", "n": 2})  # strings only
    assert english_hash({"a": "x"}) != english_hash({"a": "y"})


def test_a_translation_with_extra_or_wrong_values_still_speaks(text_root):
    english = translated_table("common", "checks")
    write_zh(
        text_root,
        "common",
        f'[checks]\nen = "{english_hash(english)}"\ncorrect = 3\nnot_yet = "还没有："\n'
        'gone = "English dropped this one"\n',
    )
    set_language("zh")
    assert translated_table("common", "checks") == {**english, "not_yet": "还没有："}
    assert say("common", "checks.correct") == "Correct."  # a number is not a text: English
    assert translation_problems("zh") == [
        "zh/common.toml [checks]: 'correct' is not a text (only text is translated)",
        "zh/common.toml [checks]: English has no string 'gone'",
    ]


def test_every_file_and_table_of_a_translation_is_checked(text_root):
    shutil.rmtree(text_root / "zh", ignore_errors=True)
    write_zh(text_root, "00_no_such_notebook", '[quiz]\nen = "x"\nyes = "是"\n')
    write_zh(text_root, "02_empty_english", "[t]\nen = 'x'\na = 'b'\n")
    (text_root / "en" / "02_empty_english.toml").write_text("n = 1\n")
    write_zh(
        text_root,
        "common",
        '[phrases]\n"a" = "甲"\n[nothing]\nen = "x"\na = "b"\n[checks]\nen = "x"\ncorrect = "对"\n',
    )
    problems = translation_problems("zh")
    assert problems[:3] == [
        "zh/00_no_such_notebook.toml: no English file helpers/text/en/00_no_such_notebook.toml",
        "zh/02_empty_english.toml: no English file helpers/text/en/02_empty_english.toml",
        "zh/common.toml [nothing]: English has no such table",
    ]
    assert problems[3].startswith("zh/common.toml [checks]: stale") and len(problems) == 4


def test_a_table_with_every_prose_string_translated_is_complete(text_root):
    entry = translated_table("01_leaf_nodes", "quiz.leaf-1")
    write_zh(
        text_root,
        "01_leaf_nodes",
        f'[quiz.leaf-1]\nen = "{english_hash(entry)}"\nprompt = "问"\nmisconception = "误解"\n'
        'fact = "事实"\n[quiz.leaf-2]\nen = "x"\nprompt = "问"\n',
    )
    missing = untranslated("zh")
    assert "01_leaf_nodes [quiz.leaf-1]" not in missing  # code, answer, probe stay English
    assert "01_leaf_nodes [quiz.leaf-2]" in missing and "01_leaf_nodes [quiz.leaf-3]" in missing


def test_a_phrase_is_looked_up_in_its_notebook_first_then_everywhere(text_root):
    write_zh(text_root, "common", '[phrases]\n"Leaves" = "叶"\n"is leaf" = "是叶子"\n')
    write_zh(text_root, "01_leaf_nodes", '[phrases]\n"Leaves" = "叶子节点"\n')
    write_zh(text_root, "02_backward_and_optimizers", '[quiz]\nen = "x"\n')
    assert phrase("01_leaf_nodes", "Leaves") == "Leaves"  # English: no lookup at all
    set_language("zh")
    assert phrase("01_leaf_nodes", "Leaves") == "叶子节点"
    assert phrase("02_backward_and_optimizers", "Leaves") == "叶"  # its file has no phrases
    assert phrase("01_leaf_nodes", "is leaf") == "是叶子"
    assert phrase(None, "Leaves") == "叶"


def test_the_skeleton_holds_what_a_translator_still_has_to_do(text_root):
    import tomllib

    checks = translated_table("common", "checks")
    quiz_ = translated_table("common", "quiz")
    fresh = "".join(f'{k} = "译"\n' for k in checks)
    write_zh(
        text_root,
        "common",
        f'[checks]\nen = "{english_hash(checks)}"\n{fresh}'
        f'[quiz]\nen = "stale"\n' + "".join(f'{k} = "译"\n' for k in quiz_),
    )
    text = language.skeleton("zh", "common")
    assert quiz_["right"] in text  # non-ASCII English stays readable, not \u escapes
    tables = language._tables(tomllib.loads(text))  # nested tables by their dotted names
    assert "checks" not in tables  # complete and fresh
    assert tables["quiz"] == {"en": english_hash(quiz_), **quiz_}  # stale: all of it again
    untouched = set(language._tables(language._file("en", "common"))) - {"checks", "quiz"}
    assert set(tables) == {"quiz"} | untouched and untouched
    for name in untouched:
        english = translated_table("common", name)
        assert tables[name] == {"en": english_hash(english), **english}


def test_the_skeleton_of_a_quiz_asks_only_for_its_prose(text_root):
    import tomllib

    shutil.rmtree(text_root / "zh", ignore_errors=True)
    tables = tomllib.loads(language.skeleton("zh", "01_leaf_nodes"))
    leaf_3 = translated_table("01_leaf_nodes", "quiz.leaf-3")
    assert "raises" in leaf_3 and "code" in leaf_3  # a list and a program: not translated
    assert set(tables["quiz"]["leaf-3"]) == {"en", "prompt", "misconception", "fact"}


def test_the_skeleton_of_a_learner_question_asks_only_for_its_prose(text_root):
    import tomllib

    shutil.rmtree(text_root / "zh", ignore_errors=True)
    tables = tomllib.loads(language.skeleton("zh", "10b_questions_learners_ask"))
    asked = translated_table("10b_questions_learners_ask", "question.plain-list-layers")
    assert {"topic", "source_title", "source_url", "see", "doctor"} <= set(asked)
    prose = {"en", "short", "question", "explanation", "source_title"}  # the title is glossed
    assert set(tables["question"]["plain-list-layers"]) == prose


def test_the_command_line_prints_hash_skeleton_and_status(text_root, capsys, monkeypatch):
    shutil.rmtree(text_root / "zh", ignore_errors=True)
    assert language.main(["hash", "common", "checks"]) == 0
    assert capsys.readouterr().out == english_hash(translated_table("common", "checks")) + "\n"
    monkeypatch.setattr("sys.argv", ["language", "hash", "01_leaf_nodes", "quiz.leaf-1"])
    assert language.main() == 0
    assert capsys.readouterr().out.strip() == english_hash(
        translated_table("01_leaf_nodes", "quiz.leaf-1")
    )
    checks = translated_table("common", "checks")
    done = "".join(f"{key} = {json.dumps(text)}\n" for key, text in checks.items())
    write_zh(text_root, "common", f'[checks]\nen = "{english_hash(checks)}"\n{done}')
    assert language.main(["skeleton", "zh", "common"]) == 0
    out = capsys.readouterr().out
    assert out == language.skeleton("zh", "common") + "\n"
    assert "[checks]" not in out and "[quiz]" in out  # the translated table is not asked for
    shutil.rmtree(text_root / "zh")
    language._file.cache_clear()
    assert language.main(["status", "zh"]) == 0  # nothing translated: nothing wrong
    out = capsys.readouterr().out.splitlines()
    assert "untranslated: common [checks]" in out and out[-1].startswith("0 problem(s), ")
    assert out[-1] == f"0 problem(s), {len(untranslated('zh'))} untranslated table(s)"
    write_zh(text_root, "common", '[checks]\nen = "x"\ncorrect = "对"\n')
    assert language.main(["status", "zh"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("problem: zh/common.toml [checks]: stale")
    assert out[-1].startswith("1 problem(s), ")
    for wrong in (["status", "fr"], ["skeleton", "fr", "common"], ["hash", "common"], []):
        assert language.main(wrong) == 2
        assert "python -m helpers.language status zh" in capsys.readouterr().out


def test_say_in_speaks_the_language_asked_for_whatever_the_learners_is():
    from helpers.language import say, say_in, set_language

    english = say("common", "figures.training_step")
    set_language("zh")
    try:
        chinese = say("common", "figures.training_step")
        assert say_in("en", "common", "figures.training_step") == english != chinese
        assert say_in("zh", "common", "figures.training_step") == chinese
    finally:
        set_language("en")


def test_a_quiz_program_may_say_its_comments_in_chinese_and_nothing_else():
    from helpers.language import same_program

    english = "x = 1  # the cut\ny = x + 1"
    assert same_program("x = 1  # 切口\ny = x + 1", english)
    assert not same_program("x = 2  # 切口\ny = x + 1", english)
    assert not same_program("x = (  # 切口", english)
    assert not same_program(None, english) and not same_program(english, 1)  # not a program
    q = next(q for q in QUESTIONS if q.id == "06_split_backward_three_models:split-1")
    set_language("zh")
    try:
        shown = q.localized()
    finally:
        set_language("en")
    assert "# 切口" in shown.code and "# the cut" in q.code
    assert same_program(shown.code, q.code)


def test_a_translation_may_add_threads_in_its_language_and_a_malformed_list_is_named(text_root):
    name, key = "10b_questions_learners_ask", "question.plain-list-layers"
    mark = english_hash(translated_table(name, key))
    thread = '{ title = "为什么用 list 存放的层不训练", url = "https://github.com/a/b/issues/1" }'
    body = f'[{key}]\nen = "{mark}"\nlocal_threads = [{thread}]\nshort = "列表里的层不训练"\n'
    write_zh(text_root, name, body)
    assert translation_problems("zh") == []
    assert translated_table(name, key, "zh")["short"] == "列表里的层不训练"  # read past the threads
    assert translated_table(name, key, "zh")["local_threads"] == [
        {"title": "为什么用 list 存放的层不训练", "url": "https://github.com/a/b/issues/1"}
    ]
    assert "local_threads" not in translated_table(name, key, "en")
    bad = '[{ title = "", url = "https://x.org" }, { title = "t", url = "http://x.org" }, "t"]'
    write_zh(text_root, name, f'[{key}]\nen = "{mark}"\nlocal_threads = {bad}\n')
    problems = "\n".join(translation_problems("zh"))
    assert "'local_threads' has a thread without a title" in problems
    assert "'local_threads' has a thread whose url is not https" in problems
    assert "'local_threads' has an entry that is not {title, url}: 't'" in problems
    extra = '{ title = "t", url = "https://x.org", lang = "zh" }'
    write_zh(text_root, name, f'[{key}]\nen = "{mark}"\nlocal_threads = [{extra}]\n')
    assert "'local_threads' has an entry that is not {title, url}" in translation_problems("zh")[0]
    write_zh(text_root, name, f'[{key}]\nen = "{mark}"\ngone = "x"\nlocal_threads = "t"\n')
    assert translation_problems("zh") == [
        f"zh/{name}.toml [{key}]: English has no string 'gone'",
        f"zh/{name}.toml [{key}]: 'local_threads' is not a list of threads",
    ]


def test_a_translated_quiz_program_that_is_not_the_english_one_is_named(text_root):
    entry = translated_table("01_leaf_nodes", "quiz.leaf-1")
    body = f'[quiz.leaf-1]\nen = "{english_hash(entry)}"\ncode = "y = 2"\n'
    write_zh(text_root, "01_leaf_nodes", body)
    assert translation_problems("zh") == [
        "zh/01_leaf_nodes.toml [quiz.leaf-1]: 'code' is not the English program (only its "
        "comments may be translated)"
    ]
