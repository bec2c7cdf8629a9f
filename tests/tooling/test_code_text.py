"""tooling.code_text: the words inside code that a twin may translate, and nothing else."""

import pytest

from tooling.code_text import apply, same_code, same_kind, texts, untranslated

CELL = """\
# NBVAL_IGNORE_OUTPUT: timings differ
x = 2  # the answer
y = x * 3  # noqa: E501
print("the answer is", x, f"and {y:.1f} more", 7)
label = "not printed"
print(f"twice: {x}"
      f" and {y}")  # é: a comment after a non-ASCII line
#: 42
"""


def test_comments_and_printed_strings_are_found_and_markers_are_not():
    found = [(t.kind, t.text) for t in texts(CELL)]
    assert found == [
        ("comment", "# the answer"),
        ("printed", '"the answer is"'),
        ("printed", 'f"and {y:.1f} more"'),
        ("printed", 'f"twice: {x}"\n      f" and {y}"'),
        ("comment", "# é: a comment after a non-ASCII line"),
    ]
    for piece in texts(CELL):
        assert CELL[piece.start : piece.end] == piece.text


def test_offsets_count_characters_after_chinese_text():
    source = 'print("注意", "the end")  # 中文 then words'
    assert [t.text for t in texts(source)] == ['"the end"', "# 中文 then words"]


def test_apply_puts_each_known_translation_in_its_place():
    words = {"# the answer": "# 答案", '"the answer is"': '"答案是"'}
    translated = apply(CELL, words)
    assert "x = 2  # 答案\n" in translated and 'print("答案是", x,' in translated
    assert untranslated(CELL, words) == [
        'f"and {y:.1f} more"',
        'f"twice: {x}"\n      f" and {y}"',
        "# é: a comment after a non-ASCII line",
    ]
    assert same_code(CELL, translated)


@pytest.mark.parametrize(
    "changed",
    [
        CELL.replace("x * 3", "x * 4"),
        CELL.replace("{y:.1f}", "{y:.2f}"),
        CELL.replace("{y:.1f}", "{x:.1f}"),
        CELL.replace(", 7)", ", 8)"),
        CELL.replace("x = 2  #", "x = 2; z = 1  #"),
    ],
)
def test_same_code_refuses_any_change_to_the_program(changed):
    assert not same_code(CELL, changed)


def test_same_code_accepts_other_words_in_comments_and_printed_strings_only():
    assert same_code(CELL, CELL.replace("# the answer", "# 答案").replace("answer is", "答案是"))
    assert not same_code(CELL, CELL.replace("not printed", "别的"))  # a string it does not print


@pytest.mark.parametrize(
    ("english", "translation", "ok"),
    [
        ("# the answer", "# 答案", True),
        ("# the answer", "答案", False),
        ("# the answer", "# 答案\nx = 1", False),
        ('"the answer is"', '"答案是"', True),
        ('"the answer is"', "答案是", False),
        ('"the answer is"', '"答案" + x', False),
        ('"the answer is"', "42", False),
        ('"the answer is"', '"答案是', False),  # not Python: an unterminated string
        ('f"and {y:.1f} more"', 'f"还有 {y:.1f}"', True),
        ('f"and {y:.1f} more"', 'f"还有 {y}"', False),
        ('f"and {y:.1f} more"', '"还有"', False),
        ('f"twice: {x}"\n      f" and {y}"', 'f"两次：{x}"\n      f"和 {y}"', True),
    ],
)
def test_a_translation_must_be_the_same_kind_of_piece(english, translation, ok):
    assert same_kind(english, translation) is ok


def test_titles_and_notes_passed_to_helpers_are_words_and_other_keywords_are_not():
    source = 'show_graph(y, title="the path", note=f"{n} steps", loss="per token", name="a b")'
    assert [t.text for t in texts(source)] == ['"the path"', 'f"{n} steps"']
    translated = source.replace("the path", "路径")
    assert same_code(source, translated)
    assert not same_code(source, source.replace("per token", "每个词元"))


def test_a_cell_that_is_not_python_is_the_same_code_only_as_itself():
    assert same_code("x = (", "x = (")
    assert not same_code("x = (", "y = (")


def test_a_string_of_only_fields_says_no_words():
    assert texts('print(f"{value:.2f}")') == []
    assert [t.text for t in texts('print(f"total {value:.2f}")')] == ['f"total {value:.2f}"']


def test_only_print_and_the_shown_keywords_say_words():
    source = 'expect_error("raises an error")\nlog.print("not the builtin")\nprint("said here")'
    assert [t.text for t in texts(source)] == ['"said here"']


def test_a_title_by_position_a_joined_print_and_a_picture_s_labels_say_words():
    source = (
        'graph_picture(g, "compiled forward", kept)\n'
        'print(pad + "None  (an input)")\n'
        'show_graph(a, b, c, params={"w": w, "ff1": f, "c = y.clone()": c, "clone first: y": a})\n'
        'other(g, "not a title", params={"a label": 1})'
    )
    said = [t.text for t in texts(source)]
    assert said == ['"compiled forward"', '"None  (an input)"', '"clone first: y"']
    assert same_code(source, source.replace("compiled forward", "编译后的前向图"))
    assert same_code(source, source.replace("clone first: y", "先 clone：y"))
    assert not same_code(source, source.replace('"c = y.clone()"', '"c = y.detach()"'))
    assert not same_code(source, source.replace('"ff1"', '"ff2"'))
    assert not same_code(source, source.replace('"not a title"', '"不是标题"'))


def test_the_shown_words_of_calls_written_other_ways():
    """Through a module (`helpers.graph_picture`), with a title and labels in one call, a label of
    short words, a literal on the left of `+`, a key that is a name, and a call of a call."""
    source = (
        'helpers.graph_picture(g, "a title", kept)\n'
        'show_graph(y, title="the title", params={"of y": y, name: t})\n'
        'print("a prefix " + pad)\n'
        'fns[0]("not said")'
    )
    said = [t.text for t in texts(source)]
    assert said == ['"a title"', '"the title"', '"of y"', '"a prefix "']


def test_an_f_string_no_call_says_is_code():
    english = 'key = f"layer{k}.weight"\nprint(f"step {k}")'
    assert same_code(english, 'key = f"layer{k}.weight"\nprint(f"第 {k} 步")')
    assert not same_code(english, 'key = f"block{k}.weight"\nprint(f"step {k}")')


def test_a_title_keeps_its_fields():
    english = 'show_graph(y, title=f"step {step} of {total}")'
    assert same_code(english, 'show_graph(y, title=f"第 {step} 步，共 {total} 步")')
    assert not same_code(english, 'show_graph(y, title=f"第 {total} 步")')


def test_a_docstring_is_words_and_a_string_that_merely_stands_first_elsewhere_is_not():
    cell = '''\
def take_snapshot(w):
    """The current values of w, as a tensor later updates cannot change."""
    return ...


class Net:
    """A net."""

    label = "not a docstring"


"""a module's string: not a function's"""
x = (lambda: "not one either")()


def stub():
    ...


def constant():
    None


def named():
    label = "a string assigned first: no docstring"
    return label
'''
    found = [t.text for t in texts(cell)]
    assert found == [
        '"""The current values of w, as a tensor later updates cannot change."""',
        '"""A net."""',
    ]
    translated = cell.replace("The current values of w, as a tensor later updates cannot change.",
                              "w 当前的值，放在之后的更新改变不了的张量里。")  # fmt: skip
    assert same_code(cell, translated)
    assert not same_code(cell, cell.replace("return ...", "return w.clone()"))
    assert not same_code(cell, cell.replace("not a docstring", "别的"))
