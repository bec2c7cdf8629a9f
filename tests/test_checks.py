"""helpers.checks: expected errors and warnings are shown, unexpected outcomes fail."""

import warnings

import pytest
import torch

from helpers.checks import clean_message, expect_error, expect_warning, feedback


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
