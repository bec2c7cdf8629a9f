"""helpers.checks: expected errors and warnings are shown, unexpected outcomes fail."""

import warnings

import pytest
import torch

from helpers.checks import (
    SHOWN_IN_FULL,
    brief_message,
    clean_message,
    expect_error,
    expect_warning,
    feedback,
)


def test_expected_error_is_shown_briefly(capsys):
    with expect_error(RuntimeError, match="does not require grad") as caught:
        torch.ones(2).sum().backward()
    assert isinstance(caught.exception, RuntimeError)
    out = capsys.readouterr().out
    assert out.startswith("RuntimeError (as expected): element 0 of tensors")
    assert "Traceback" not in out


def test_no_error_fails_the_claim():
    with pytest.raises(AssertionError, match="ran without an error"):
        with expect_error(RuntimeError):
            pass


def test_other_error_fails_the_claim():
    with pytest.raises(AssertionError, match="expected RuntimeError, but ValueError"):
        with expect_error(RuntimeError):
            raise ValueError("nope")


def test_message_must_match():
    with pytest.raises(AssertionError, match="does not match"):
        with expect_error(RuntimeError, match="second time"):
            raise RuntimeError("something else")


def test_expect_error_wants_an_exception_class():
    with pytest.raises(TypeError, match="exception or warning class"):
        with expect_error("RuntimeError"):
            pass


def test_warning_is_captured_and_cleaned(capsys):
    w = torch.ones(2, requires_grad=True)
    h = w * 2
    with expect_warning(UserWarning, match="not a leaf") as caught:
        assert h.grad is None
    assert len(caught.caught) == 1
    out = capsys.readouterr().out
    assert "Triggered internally" not in out and out.startswith("UserWarning (as expected)")


def test_missing_warning_fails_and_other_warnings_pass_through():
    with pytest.raises(AssertionError, match="expected a UserWarning"):
        with expect_warning(UserWarning):
            pass
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        with expect_warning(UserWarning):
            warnings.warn("wanted", UserWarning, stacklevel=1)
            warnings.warn("other", DeprecationWarning, stacklevel=1)
    assert [str(w.message) for w in outer] == ["other"]


def test_clean_message_drops_cpp_location_and_long_tails():
    text = "Bad thing. (Triggered internally at /x/y/TensorBody.h:494.)"
    assert clean_message(text) == "Bad thing."
    assert clean_message("\n".join(str(i) for i in range(20))).endswith("(12 more lines)")


def test_feedback_says_what_is_wrong():
    assert feedback([]).ok
    bad = feedback(["ff1.grad is None: did you call requires_grad_() on the cut?"])
    assert not bad and "requires_grad_()" in repr(bad) and "<li>" in bad._repr_html_()


def test_call_learner_reports_result_warnings_and_exception_without_raising():
    from helpers.checks import call_learner

    def warns(x):
        warnings.warn("first line\nsecond line", UserWarning, stacklevel=2)
        return x * 2

    assert call_learner(warns, 3) == (6, ["first line\nsecond line"], None)
    assert call_learner(warns, 3, first_line=True) == (6, ["first line"], None)
    result, warned, err = call_learner(lambda: 1 / 0)
    assert result is None and warned == [] and isinstance(err, ZeroDivisionError)


def test_the_non_leaf_warning_is_shown_in_full_once_then_by_its_first_sentence(capsys):
    h = torch.ones(2, requires_grad=True) * 2
    with expect_warning(UserWarning, match="not a leaf", full=True):
        assert h.grad is None
    full = capsys.readouterr().out
    with expect_warning(UserWarning, match="not a leaf"):
        assert h.grad is None
    brief = capsys.readouterr().out
    assert "retain_grad()" in full and "retain_grad()" not in brief
    assert brief == (
        "UserWarning (as expected): The .grad attribute of a Tensor that is not a leaf Tensor "
        "is being accessed. [… torch's full text is shown in 01_leaf_nodes]\n"
    )


def test_the_pointer_calls_a_warning_a_warning_where_the_language_tells_them_apart(capsys):
    from helpers.language import set_language

    sentence = next(iter(SHOWN_IN_FULL))
    message = f"{sentence} More of torch's text."
    english = f"{sentence} [… torch's full text is shown in 01_leaf_nodes]"
    assert brief_message(message) == brief_message(message, warning=True) == english
    set_language("zh")
    try:
        warned = brief_message(message, warning=True)
        assert warned == f"{sentence} [……torch 的完整警告见笔记本 01_leaf_nodes]"
        assert brief_message(message) == f"{sentence} [……torch 的完整报错见笔记本 01_leaf_nodes]"
        h = torch.ones(2, requires_grad=True) * 2
        with expect_warning(UserWarning, match="not a leaf"):
            assert h.grad is None
        assert capsys.readouterr().out == f"UserWarning（意料之中）：{warned}\n"
    finally:
        set_language("en")


def test_brief_message_leaves_other_messages_whole():
    assert brief_message("Something else. And more.") == "Something else. And more."
    sentence = next(iter(SHOWN_IN_FULL))
    assert brief_message(sentence) == sentence  # nothing cut, so no pointer either


def test_a_tuple_of_classes_is_expected_as_either(capsys):
    with expect_error((RuntimeError, ValueError)) as caught:
        raise ValueError("bad value")
    assert caught.expected == "RuntimeError or ValueError"
    assert capsys.readouterr().out == "ValueError (as expected): bad value\n"
    with pytest.raises(AssertionError) as failed:
        with expect_error((RuntimeError, ValueError)):
            pass
    assert str(failed.value) == (
        "expected RuntimeError or ValueError, but the block ran without an error"
    )


@pytest.mark.parametrize("bad", [[RuntimeError], (RuntimeError, "ValueError")])
def test_only_a_class_or_a_tuple_of_classes_is_accepted(bad):
    with pytest.raises(TypeError) as err:
        with expect_error(bad):
            pass
    assert str(err.value) == (
        "expect_error() takes an exception or warning class, e.g. expect_error(RuntimeError); "
        f"got {bad!r}"
    )


def test_clean_message_keeps_exactly_eight_lines_whole():
    eight = "\n".join(str(i) for i in range(8))
    assert clean_message(eight) == eight
    nine = "\n".join(str(i) for i in range(9))
    assert clean_message(nine) == "\n".join(str(i) for i in range(8)) + "\n... (1 more lines)"


def test_feedback_text_a_learner_reads():
    assert repr(feedback([])) == "✅ Correct."
    assert repr(feedback([], success="Well done: the cut works.")) == "✅ Well done: the cut works."
    assert repr(feedback(["a is None", "b is 2"])) == "❌ Not yet:\n  - a is None\n  - b is 2"


def test_feedback_html_escapes_the_messages():
    assert feedback([], success="x < y")._repr_html_() == (
        '<div style="color: #1a7f37">✅ x &lt; y</div>'
    )
    assert feedback(["a < b", "c"])._repr_html_() == (
        '<div style="color: #cf222e">❌ Not yet:<ul><li>a &lt; b</li><li>c</li></ul></div>'
    )


def test_an_error_line_is_the_type_and_the_first_line_without_torchs_tail():
    from helpers.checks import error_line

    err = RuntimeError("first line (Triggered internally at foo.cpp:12)\nsecond line")
    assert error_line(err) == "RuntimeError: first line"
    assert error_line(ValueError()) == "ValueError: "


# --- an exercise not yet written: only its source tells -------------------------------------------


def _placeholder(x):
    """The learner's exercise, not written yet."""
    ...


def _bare_placeholder(x): ...


def _written(x):
    """Written: it returns something."""
    return x


def _docstring_only(x):
    """Only a docstring: it returns None too, but it is not the exercise's `...`."""


def _ellipsis_and_more(x):
    ...
    return x


def _other_constant(x):
    """A constant that is not `...`."""
    0  # noqa: B018 (the case under test: a constant that is not ...)


def test_only_a_placeholder_is_a_body_of_a_docstring_and_an_ellipsis():
    from helpers.checks import only_a_placeholder

    assert only_a_placeholder(_placeholder) and only_a_placeholder(_bare_placeholder)
    assert not only_a_placeholder(_written)
    assert not only_a_placeholder(_docstring_only)
    assert not only_a_placeholder(_ellipsis_and_more)
    assert not only_a_placeholder(_other_constant)
    assert not only_a_placeholder(len)  # a builtin: no source to read
    assert not only_a_placeholder(lambda x: ...)  # a lambda's line is an assignment: no body
