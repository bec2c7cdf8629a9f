"""Check-yourself quizzes: predict what autograd does, then see it run.

    from helpers.quiz import quiz
    quiz("freeing")

Every question is a short program and a yes/no question about it ("Is `y.grad` None?", "Does
the last line raise?", "Do they share storage?"). Each answer is typed into the question's text
file, then checked: the program runs in your kernel when the quiz is built, and the quiz refuses
to show a question whose stated answer disagrees with what torch did. After you click a
prediction, the explanation names the misconception behind the wrong answer. Static viewers get
the questions with the answers folded away (HTML `<details>`).
"""

from __future__ import annotations

import builtins
import html
import warnings
from dataclasses import dataclass, replace
from typing import Any

import torch

from helpers import language as text
from helpers.checks import brief_message, clean_message
from helpers.display import Table
from helpers.interactive.live import LiveWidget, WidgetFactory

__all__ = [
    "ALL_TOPICS",
    "CHOICES",
    "OPTIONAL_TOPICS",
    "QUESTIONS",
    "TOPICS",
    "Observation",
    "Question",
    "Quiz",
    "answer_table",
    "questions",
    "quiz",
    "reveal_html",
    "score",
]

#: Topic -> the notebook that teaches it.
TOPICS = {
    "leaf": "01_leaf_nodes.ipynb",
    "backward": "02_backward_and_optimizers.ipynb",
    "detach": "03_detach_and_clone.ipynb",
    "retain_grad": "04_retain_grad_and_hooks.ipynb",
    "freeing": "05_freeing_the_graph.ipynb",
    "split": "06_split_backward_three_models.ipynb",
    "processes": "07_split_across_processes.ipynb",
    "grad_modes": "08_grad_modes_and_why_nothing_learns.ipynb",
    "higher_order": "09_past_first_order.ipynb",
    # notebook 10's final check, in four parts whose names say nothing of the ideas they ask about
    "final_1": "10_check_yourself.ipynb",
    "final_2": "10_check_yourself.ipynb",
    "final_3": "10_check_yourself.ipynb",
    "final_4": "10_check_yourself.ipynb",
}
#: Topics of optional notebooks: quizzed there, and left out of notebook 10's final check, which
#: a learner who skipped an optional notebook takes too.
OPTIONAL_TOPICS = {
    "autograd_engine": "05b_build_the_engine.ipynb",
    "engines": "07b_pipeline_and_data_parallel.ipynb",
    "precision": "09b_mixed_precision_and_module_hooks.ipynb",
    "compile": "09c_torch_compile_and_autograd.ipynb",
}
#: Every topic a quiz(...) call may name.
ALL_TOPICS = {**TOPICS, **OPTIONAL_TOPICS}
CHOICES = ("yes", "no")


@dataclass(frozen=True)
class Observation:
    """What running a question's program showed."""

    answer: str  # "yes" or "no"
    detail: str  # e.g. "`y.grad is None` is True" or "RuntimeError: ..."
    warnings: tuple[str, ...] = ()
    fact: str = ""  # the question's fact, its {placeholders} filled from the program's variables


@dataclass(frozen=True)
class Question:
    """A program, a yes/no question about it, and the misconception a wrong answer reveals.

    `probe` is a Python expression evaluated after `code`; its truth is the answer. Without a
    probe the question is "does the program raise?", and one whose answer is "yes" names what it
    expects in `raises`: the exception class and a fragment of its message. Any other exception
    (a typo's NameError, say) is a bug in the question, not an answer.

    `draws_on` names the topics a mixed question combines (notebook 10's kind); whether its
    program is new code is measured by notebook 10's tests, not declared.

    A number the program computes is never typed into `fact`: a `{placeholder}` holds the
    expression (over the program's variables) that gives it, e.g. "w is now {w}".
    `id` is "<notebook>:<key>", where the question's text lives in `helpers/text/<language>/`.
    """

    topic: str
    prompt: str
    code: str
    answer: str
    misconception: str
    fact: str
    probe: str | None = None
    raises: tuple[type[Exception], str] | None = None
    draws_on: tuple[str, ...] = ()
    id: str = ""

    def __post_init__(self) -> None:
        # The course's own questions (from a text file: they have an id) are checked as they are
        # made; a learner's is made as written, and `check_question` says what is missing.
        if self.id and self.mistakes():
            raise ValueError(f"{self.prompt!r} {self.mistakes()[0][1]}")

    def mistakes(self) -> list[tuple[str, str]]:
        """What makes this question unanswerable: (key of the learner's message, English text)."""
        found = []
        unknown = [t for t in self.draws_on if t not in TOPICS]
        if unknown:
            found.append(("unknown_draws_on", f"draws on unknown topic(s) {unknown}"))
        if self.probe is None and self.answer == "yes" and self.raises is None:
            found.append(
                (
                    "raises_missing",
                    "asks whether the program raises and says yes: name the exception it "
                    "expects, e.g. raises=(RuntimeError, 'a fragment of its message')",
                )
            )
        if self.raises is not None and self.probe is not None:
            both = "has both: a question has a probe or raises, not both"
            found.append(("probe_and_raises", both))
        return found

    def run(self) -> Observation:
        """Run the program in a fresh namespace (global RNG untouched) and observe the answer."""
        if self.mistakes():
            raise ValueError(f"{self.prompt!r} {self.mistakes()[0][1]}")
        namespace: dict[str, Any] = {"torch": torch}
        program = compile(self.code, f"<question: {self.prompt}>", "exec")  # SyntaxError: a bug
        with warnings.catch_warnings(record=True) as caught, torch.random.fork_rng(devices=[]):
            warnings.simplefilter("always")
            try:
                exec(program, namespace)
            except Exception as err:  # the exception is the observation
                if self.probe is not None:
                    raise AssertionError(
                        f"the program of {self.prompt!r} raised {type(err).__name__}: {err}"
                    ) from err
                if self.raises is not None:
                    expected, fragment = self.raises
                    if not isinstance(err, expected) or fragment not in str(err):
                        raise AssertionError(
                            f"the program of {self.prompt!r} raised {type(err).__name__}: {err}; "
                            f"the question is about {expected.__name__} ({fragment!r})"
                        ) from err
                message = clean_message(str(err)).splitlines()[0]
                observed = Observation("yes", f"{type(err).__name__}: {message}")
            else:
                if self.probe is None:
                    observed = Observation("no", _ui("ran_without_error"))
                else:
                    value = eval(self.probe, namespace)
                    observed = Observation(
                        "yes" if value else "no",
                        _ui("probe_is", probe=self.probe, value=bool(value)),
                    )
        seen = tuple(
            f"{w.category.__name__}: {brief_message(str(w.message), warning=True).splitlines()[0]}"
            for w in caught
        )
        return Observation(observed.answer, observed.detail, seen, self._fill(namespace))

    def _fill(self, namespace: dict[str, Any]) -> str:
        def value(expression: str) -> str:
            try:
                return _plain(eval(expression, namespace))
            except Exception as err:
                raise AssertionError(
                    f"the fact of {self.prompt!r} shows {{{expression}}}, which fails after "
                    f"its program ran: {type(err).__name__}: {err}"
                ) from err

        return text.fill(self.fact, value)

    def localized(self, code: str | None = None) -> Question:
        """This question with its prompt, misconception and fact in language `code` (default:
        the current one; English where a translation is missing)."""
        if not self.id:
            return self
        stem, _, key = self.id.partition(":")
        strings = text.translated_table(stem, f"quiz.{key}", code)
        program = strings["code"].strip("\n")  # its comments translated, if at all
        return replace(
            self,
            code=program if text.same_program(program, self.code) else self.code,
            prompt=strings["prompt"],
            misconception=strings["misconception"],
            fact=strings["fact"],
        )


def _plain(value: Any) -> str:
    """A computed value as an explanation prints it: 0.8, not 0.800000011920929; lists plain."""
    if isinstance(value, torch.Tensor):
        value = value.detach().tolist()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(_plain(v) for v in value) + "]"
    return str(value)


def _exception_class(name: str, where: str) -> type[Exception]:
    found = getattr(builtins, name, None)
    if not (isinstance(found, type) and issubclass(found, Exception)):
        raise ValueError(f"{where}: raises names {name!r}, which is not a built-in exception")
    return found


def _notebook_questions(stem: str) -> list[Question]:
    """The questions of one notebook's text file, `helpers/text/en/<stem>.toml`, in its order."""
    found = []
    for qid, entry in text.table(stem, "quiz").items():
        raises = entry.get("raises")
        if raises is not None:
            raises = (_exception_class(raises[0], f"{stem}.toml [quiz.{qid}]"), raises[1])
        found.append(
            Question(
                topic=entry["topic"],
                prompt=entry["prompt"],
                code=entry["code"].strip("\n"),
                answer=entry["answer"],
                misconception=entry["misconception"],
                fact=entry["fact"],
                probe=entry.get("probe"),
                raises=raises,
                draws_on=tuple(entry.get("draws_on", ())),
                id=f"{stem}:{qid}",
            )
        )
    return found


#: Every question, in course order (the text files of the notebooks in ALL_TOPICS).
QUESTIONS: list[Question] = [
    q
    for stem in dict.fromkeys(notebook.removesuffix(".ipynb") for notebook in ALL_TOPICS.values())
    for q in _notebook_questions(stem)
]


def questions(*topics: str) -> list[Question]:
    """The questions on these topics (all questions when none is given), in course order."""
    unknown = [t for t in topics if t not in ALL_TOPICS]
    if unknown:
        raise ValueError(f"unknown topic(s) {unknown}; topics are: {', '.join(ALL_TOPICS)}")
    return [q for q in QUESTIONS if not topics or q.topic in topics]


def _ui(key: str, **values: Any) -> str:
    return text.say("common", f"quiz.{key}", **values)


def _gap(key: str) -> str:
    """The space after a label: none after full-width punctuation (误区：), else one."""
    return "" if _ui(key).endswith(("：", "。")) else " "


def _label(key: str) -> str:
    """A label and the space that follows it in its language."""
    return _ui(key) + _gap(key)


def _choice(answer: str) -> str:
    """The answer ("yes" or "no") in the learner's language."""
    return _ui(answer)


def reveal_html(question: Question, observed: Observation, prediction: str | None = None) -> str:
    """The feedback after a prediction (None: just the answer): verdict, run, misconception."""
    answer = html.escape(_choice(observed.answer))
    if prediction is None:
        verdict = f"<b>{_ui('answer_is', answer=answer)}</b>"
    elif prediction == observed.answer:
        verdict = f'<b style="color: #1a7f37">{_ui("right", answer=answer)}</b>'
    else:
        verdict = f'<b style="color: #cf222e">{_ui("not_quite", answer=answer)}</b>'

    also = _label("also_warned")
    notes = "".join(f"<br/>{also}{html.escape(w)}" for w in observed.warnings)
    return (
        f'<div style="margin: 4px 0 8px 0">{verdict} {_label("running_it")}'
        f"{html.escape(observed.detail)}{notes}<br/>"
        f"<b>{_ui('misconception')}</b>{_gap('misconception')}"
        f"{html.escape(question.misconception)}<br/>"
        f"<b>{_ui('fact')}</b>{_gap('fact')}{html.escape(observed.fact or question.fact)}</div>"
    )


def _inline_code(text: str) -> str:
    """Escaped text with `backticks` turned into <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _question_html(number: int, question: Question) -> str:
    return (
        f"<b>{number}. {_inline_code(question.prompt)}</b>"
        '<pre style="margin: 4px 0; padding: 6px; background: #f6f8fa; font-size: 12px">'
        f"{html.escape(question.code)}</pre>"
    )


def _notebooks_behind(question: Question) -> list[str]:
    """The numbers of the notebooks a question draws on (else its topic's), sorted."""
    return sorted(TOPICS[t][:2] for t in question.draws_on or (question.topic,))


def answer_table(items: list[Question]) -> Table:
    """Each question's stated answer beside what running it gives (they must agree), with the
    notebooks behind it (those it draws on, else its topic's). The table opens folded: its
    answers are for after the questions."""
    rows = []
    for i, q in enumerate((q.localized() for q in items), start=1):
        observed = q.run()
        rows.append(
            {
                "question": f"{i}. {q.prompt}",
                "notebooks": ", ".join(_notebooks_behind(q)),
                "stated": q.answer,
                "observed": observed.answer,
                "agree": q.answer == observed.answer,
            }
        )
    columns = ["question", "notebooks", "stated", "observed", "agree"]
    agreed = sum(r["agree"] for r in rows)
    return Table(
        columns,
        rows,
        folded=text.say("common", "quiz.table_folded", agreed=agreed, count=len(rows)),
    )


class Quiz(LiveWidget):
    """Questions with yes/no buttons; a click reveals the answer and the misconception."""

    def __init__(self, items: list[Question], title: str | None = None, start: int = 1):
        self.items = [q.localized() for q in items]
        self.title = _ui("title") if title is None else _title(title, self.items)
        self.start = start
        self.observed = [q.run() for q in self.items]
        for q, seen in zip(self.items, self.observed, strict=True):
            if q.answer != seen.answer:
                raise AssertionError(
                    f"question {q.prompt!r} says {q.answer!r}, but running it gives "
                    f"{seen.answer!r} ({seen.detail}); this torch behaves differently"
                )
        make = WidgetFactory()
        button_layout = make.new_layout(width="80px")
        self.buttons: list[list[Any]] = []
        self.reveals: list[Any] = []
        boxes = [make("HTML", value=f"<h4 style='margin: 4px 0'>{html.escape(self.title)}</h4>")]
        for number, q in enumerate(self.items, start=self.start):
            reveal = make("HTML")
            buttons = [
                make("Button", description=_choice(c), layout=button_layout) for c in CHOICES
            ]
            for button, choice in zip(buttons, CHOICES, strict=True):
                button.on_click(self._on_click(len(self.reveals), choice))
            box = make(
                "VBox",
                children=[
                    make("HTML", value=_question_html(number, q)),
                    make("HBox", children=buttons),
                    reveal,
                ],
            )
            box.add_class("autograd-question")
            boxes.append(box)
            self.buttons.append(buttons)
            self.reveals.append(reveal)
        widget = make("VBox", children=boxes)
        widget.add_class("autograd-quiz")
        super().__init__(widget, text=self._text(), html_fallback=self._static_html())

    def _on_click(self, index: int, choice: str):
        def click(button: Any) -> None:
            self.answer(index, choice)

        return click

    def answer(self, index: int, prediction: str) -> bool:
        """Record a prediction for question `index` (0-based) and reveal; True when right."""
        q, seen = self.items[index], self.observed[index]
        right = prediction == seen.answer
        for button, choice in zip(self.buttons[index], CHOICES, strict=True):
            chosen = choice == prediction
            button.button_style = ("success" if right else "danger") if chosen else ""
        self.reveals[index].value = reveal_html(q, seen, prediction)
        _record(q, right)
        return right

    def _text(self) -> str:
        """The plain-text form (what a plain renderer shows): the questions only. The answers
        are in the HTML form, each folded under its question, and in the running widget."""
        lines = [_ui("heading", title=self.title, count=len(self.items))]
        for number, q in enumerate(self.items, self.start):
            lines += ["", f"{number}. {q.prompt}", *("    " + line for line in q.code.splitlines())]
        lines += ["", _ui("answers_elsewhere")]
        return "\n".join(lines)

    def _static_html(self) -> str:
        parts = [f"<h4>{html.escape(self.title)}</h4>"]
        for number, (q, seen) in enumerate(zip(self.items, self.observed, strict=True), self.start):
            parts.append(
                f"<div>{_question_html(number, q)}"
                f"<p>{_ui('your_prediction')}</p>"
                f"<details><summary>{_ui('show_answer')}</summary>"
                f"{reveal_html(q, seen)}</details></div>"
            )
        return "".join(parts)


def _title(english: str, items: list[Question]) -> str:
    """A title the notebook gave in English, in the learner's language (its notebook's phrases)."""
    stem = items[0].id.partition(":")[0] if items and items[0].id else "common"
    return text.phrase(stem, english)


def quiz(*topics: str, title: str | None = None, start: int = 1) -> Quiz:
    """A quiz on these topics (all when none is given), numbered from `start`; `title` in English
    (the learner's language comes from the notebook's text file, `[phrases]`)."""
    return Quiz(questions(*topics), title=title, start=start)


#: The first prediction made for each question in this kernel, by question id: True when right.
#: A second click (or a re-run quiz cell) does not change the score: the first guess is the test.
_FIRST_PREDICTIONS: dict[str, bool] = {}
#: The live score of each set of questions: a re-run score cell replaces its board.
_SCOREBOARDS: dict[tuple[str, ...], Score] = {}


def _key(question: Question) -> str:
    """What the score knows a question by: its id (its prompt when it has none)."""
    return question.id or question.prompt


def _record(question: Question, right: bool) -> None:
    key = _key(question)
    if key in _FIRST_PREDICTIONS:
        return
    _FIRST_PREDICTIONS[key] = right
    for board in _SCOREBOARDS.values():
        board.refresh()


class Score(LiveWidget):
    """The learner's score on some questions: how many of their first predictions were right,
    and the notebooks to reread for the ones missed. It updates as the quizzes are answered."""

    def __init__(self, items: list[Question], start: int = 1):
        self.items = list(items)
        self.start = start
        shown = self.summary()
        self.label = WidgetFactory()("HTML", value=html.escape(shown))
        self.label.add_class("autograd-score")
        super().__init__(self.label, text=shown, html_fallback=f"<p>{html.escape(shown)}</p>")
        _SCOREBOARDS[tuple(map(_key, self.items))] = self

    def counts(self) -> tuple[int, int, list[int]]:
        """(answered, right, the numbers of the questions missed)."""
        answered = right = 0
        missed = []
        for number, q in enumerate(self.items, self.start):
            first = _FIRST_PREDICTIONS.get(_key(q))
            if first is None:
                continue
            answered += 1
            right += first
            if not first:
                missed.append(number)
        return answered, right, missed

    def summary(self) -> str:
        """The score as a sentence in the learner's language."""
        answered, right, missed = self.counts()
        if not answered:
            return _ui("score_none", count=len(self.items))
        line = _ui("score", right=right, answered=answered, count=len(self.items))
        if missed:
            numbers = dict(enumerate(self.items, self.start))
            reread = sorted({nb for n in missed for nb in _notebooks_behind(numbers[n])})
            line += " " + _ui(
                "score_missed",
                missed=", ".join(map(str, missed)),
                notebooks=", ".join(reread),
            )
        return line

    def refresh(self) -> None:
        self.label.value = html.escape(self.summary())


def score(*topics: str, start: int = 1) -> Score:
    """The learner's score on the questions of these topics (numbered from `start`), updated as
    they answer the quizzes of this kernel."""
    return Score(questions(*topics), start=start)
