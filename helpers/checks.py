"""Checks that keep notebook claims honest: expected errors and warnings, exercise feedback."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from helpers.language import say

__all__ = [
    "CheckResult",
    "ExpectedError",
    "ExpectedWarnings",
    "brief_message",
    "call_learner",
    "clean_message",
    "error_line",
    "expect_error",
    "expect_warning",
    "feedback",
    "only_a_placeholder",
]

_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")
MAX_LINES = 8

#: Long torch messages the course shows in full once (where) and by their first sentence after.
SHOWN_IN_FULL = {
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed.": "01_leaf_nodes",
}


def clean_message(message: str) -> str:
    """A message without torch's '(Triggered internally at file:line)' tail, at most 8 lines."""
    text = _TRIGGERED.sub("", message).strip()
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"... ({len(lines) - MAX_LINES} more lines)"]
    return "\n".join(lines)


def error_line(err: BaseException) -> str:
    """An exception as an exercise's feedback names it: its type and its message's first line."""
    lines = clean_message(str(err)).splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"


def brief_message(message: str, *, warning: bool = False) -> str:
    """A message the course has shown in full elsewhere, cut to its first sentence and a pointer
    to where the full text is; any other message cleaned (`clean_message`). `warning=True` for a
    warning's message: the pointer then calls it a warning, not an error (Chinese tells the two
    apart: 警告, 报错)."""
    text = clean_message(message)
    key = "checks.shown_in_full_warning" if warning else "checks.shown_in_full"
    for first_sentence, notebook in SHOWN_IN_FULL.items():
        if text.startswith(first_sentence) and text != first_sentence:
            return f"{first_sentence} " + say("common", key, notebook=notebook)
    return text


def call_learner(
    func: Callable[..., Any], *args: Any, first_line: bool = False
) -> tuple[Any, list[str], BaseException | None]:
    """Call an exercise's function written by the learner: (its result, the warnings it raised,
    cleaned, or only their first lines, and the exception it raised or None). Never raises."""
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        try:
            result = func(*args)
        except Exception as err:  # the learner's code may raise anything: report it
            return None, [], err
    messages = [clean_message(str(w.message)) for w in records]
    return result, [m.splitlines()[0] for m in messages] if first_line else messages, None


def _check_type(exc_type: object, func: str) -> None:
    ok = isinstance(exc_type, type) or (
        isinstance(exc_type, tuple) and all(isinstance(t, type) for t in exc_type)
    )
    if not ok:
        raise TypeError(
            f"{func}() takes an exception or warning class, e.g. {func}(RuntimeError); "
            f"got {exc_type!r}"
        )


def _name(exc_type: type | tuple[type, ...]) -> str:
    if isinstance(exc_type, tuple):
        return " or ".join(t.__name__ for t in exc_type)
    return exc_type.__name__


@dataclass
class ExpectedError:
    """What `expect_error` caught: the exception, once the block has run."""

    expected: str
    exception: BaseException | None = None

    @property
    def message(self) -> str:
        """The exception's message, cleaned."""
        return clean_message(str(self.exception)) if self.exception is not None else ""


@contextmanager
def expect_error(
    exc_type: type[BaseException] | tuple[type[BaseException], ...], match: str | None = None
) -> Iterator[ExpectedError]:
    """Run a block that must raise `exc_type`; show the error briefly instead of a traceback.

    Raises AssertionError if the block raises nothing, another type, or a message not matching
    the regular expression `match`, so a notebook claim about an error is still checked.
    """
    _check_type(exc_type, "expect_error")
    caught = ExpectedError(_name(exc_type))
    try:
        yield caught
    except exc_type as err:
        caught.exception = err
        if match is not None and not re.search(match, str(err)):
            raise AssertionError(
                f"{type(err).__name__} was raised, but its message does not match {match!r}:\n"
                f"{clean_message(str(err))}"
            ) from err
        print(_as_expected(type(err).__name__, caught.message))
    except Exception as err:
        raise AssertionError(
            f"expected {_name(exc_type)}, but {type(err).__name__} was raised: "
            f"{clean_message(str(err))}"
        ) from err
    else:
        raise AssertionError(f"expected {_name(exc_type)}, but the block ran without an error")


@dataclass
class ExpectedWarnings:
    """What `expect_warning` caught: the matching warnings, once the block has run."""

    expected: str
    caught: list[warnings.WarningMessage] = field(default_factory=list)

    @property
    def messages(self) -> list[str]:
        """The caught warnings' messages, cleaned."""
        return [clean_message(str(w.message)) for w in self.caught]


@contextmanager
def expect_warning(
    category: type[Warning] | tuple[type[Warning], ...] = Warning,
    match: str | None = None,
    full: bool = False,
) -> Iterator[ExpectedWarnings]:
    """Run a block that must warn; show the warning (no file/line noise) instead of stderr.

    Raises AssertionError if no warning of `category` (whose message matches `match`) happens.
    Other warnings pass through unchanged. A long message the course shows in full once
    (`SHOWN_IN_FULL`) is shown by its first sentence, unless `full=True`.
    """
    _check_type(category, "expect_warning")
    result = ExpectedWarnings(_name(category))
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        yield result
    others = []
    for w in records:
        if issubclass(w.category, category) and (match is None or re.search(match, str(w.message))):
            result.caught.append(w)
        else:
            others.append(w)
    for w in others:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not result.caught:
        wanted = _name(category) + (f" matching {match!r}" if match else "")
        raise AssertionError(f"expected a {wanted}, but none was raised")
    for w in result.caught:
        text = (
            clean_message(str(w.message)) if full else brief_message(str(w.message), warning=True)
        )
        print(_as_expected(w.category.__name__, text))


def _as_expected(name: str, message: str) -> str:
    return say("common", "checks.as_expected", name=name, message=message)


@dataclass
class CheckResult:
    """Feedback on an exercise: ok, or what is wrong and a hint how to fix it.

    Without a `success` message, a right answer says "Correct." in the learner's language."""

    ok: bool
    messages: list[str]
    success: str | None = None

    def __bool__(self) -> bool:
        return self.ok

    @property
    def success_text(self) -> str:
        """What a right answer is told."""
        return say("common", "checks.correct") if self.success is None else self.success

    def __repr__(self) -> str:
        if self.ok:
            return f"✅ {self.success_text}"
        not_yet = say("common", "checks.not_yet")
        return f"❌ {not_yet}\n" + "\n".join(f"  - {m}" for m in self.messages)

    def _repr_html_(self) -> str:
        import html

        if self.ok:
            return f'<div style="color: #1a7f37">✅ {html.escape(self.success_text)}</div>'
        items = "".join(f"<li>{html.escape(m)}</li>" for m in self.messages)
        not_yet = html.escape(say("common", "checks.not_yet"))
        return f'<div style="color: #cf222e">❌ {not_yet}<ul>{items}</ul></div>'


def only_a_placeholder(function: Callable) -> bool:
    """True when a function's body is only a docstring and `...`: an exercise not yet written
    (it runs, and returns None, so only its source tells)."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else []
    body = [b for b in body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                                    and isinstance(b.value.value, str))]  # fmt: skip
    only = body[0].value if len(body) == 1 and isinstance(body[0], ast.Expr) else None
    return isinstance(only, ast.Constant) and only.value is Ellipsis


def feedback(problems: list[str], success: str | None = None) -> CheckResult:
    """A CheckResult from a list of problems found (empty: correct)."""
    return CheckResult(ok=not problems, messages=list(problems), success=success)
