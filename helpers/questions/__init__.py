"""The questions learners ask (notebook 10b): each from a public thread, each answered by a cell.

    from helpers.questions import ask
    ask("backward-twice")   # shows the question, the thread it comes from and the short answer

The questions are data, in `helpers/text/en/10b_questions_learners_ask.toml` (and its
translations): the question, a short title, the answer, the thread's title and address, the
course notebook that teaches the topic in depth (`see`) and, for a bug that one checked step
shows, the doctor's verdict on it (`doctor`). A translation glosses the thread's title and may
cite threads in its own language that ask the same (`local_threads`). The cell of 10b that calls
`ask(id)` runs the behaviour and asserts what the answer says (tests/test_questions.py holds every
question to it).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from helpers.language import language, say, table, translated_table

__all__ = [
    "NOTEBOOK",
    "TEXT",
    "TOPICS",
    "LearnerQuestion",
    "answered_by_the_doctor",
    "ask",
    "learner_questions",
]

NOTEBOOK = "10b_questions_learners_ask.ipynb"
TEXT = "10b_questions_learners_ask"

#: The topics, in the notebook's order; each is a section of 10b.
TOPICS = (
    "graph-lifetime",
    "grad-none",
    "detach-clone",
    "in-place",
    "parameters",
    "grad-modes",
    "optimizer-loop",
    "accumulation-memory",
    "multiple-models",
    "hooks",
    "numerics",
    "higher-order",
    "custom-function",
)


@dataclass(frozen=True)
class LearnerQuestion:
    """One question of the collection, in the current language (the thread's title as the thread
    has it, which a translation follows with a gloss in its own language)."""

    id: str
    topic: str
    short: str
    question: str
    explanation: str
    source_title: str
    source_url: str
    see: str | None = None
    doctor: str | None = None
    #: Threads in the learner's language that ask the same, as (title, url): a translation's own.
    local_threads: tuple[tuple[str, str], ...] = ()

    def _repr_markdown_(self) -> str:
        lines = [f"**{self.short}** · {self.question}", ""]
        lines.append(say(TEXT, "ui.asked_in", title=self.source_title, url=self.source_url))
        if self.local_threads:
            links = [f"[{title}]({url})" for title, url in self.local_threads]
            threads = say(TEXT, "ui.thread_separator").join(links)
            lines += ["", say(TEXT, "ui.also_asked", threads=threads)]
        lines += ["", say(TEXT, "ui.reply", explanation=self.explanation)]
        if self.doctor:
            verdict = say("common", f"doctor.verdict_{self.doctor}")
            lines += ["", say(TEXT, "ui.doctor_finds", verdict=verdict)]
        if self.see:
            lines += [
                "",
                say(TEXT, "ui.in_depth", notebook=self.see, number=self.see.split("_")[0]),
            ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"LearnerQuestion({self.id!r}: {self.short})"


def learner_questions(code: str | None = None) -> dict[str, LearnerQuestion]:
    """Every question of the collection by id, in file order, in language `code` (default: the
    current one)."""
    code = code or language()
    found = {}
    for key in table(TEXT, "question"):
        entry = translated_table(TEXT, f"question.{key}", code)
        found[key] = LearnerQuestion(
            id=key,
            topic=entry["topic"],
            short=entry["short"],
            question=entry["question"],
            explanation=entry["explanation"],
            source_title=entry["source_title"],
            source_url=entry["source_url"],
            see=entry.get("see"),
            doctor=entry.get("doctor"),
            local_threads=tuple((t["title"], t["url"]) for t in entry.get("local_threads", ())),
        )
    return found


def ask(question_id: str) -> LearnerQuestion:
    """Question `question_id` of the collection, shown (in a notebook) as the question, the thread
    it comes from and the short answer; the cell that calls it then shows the behaviour."""
    if not isinstance(question_id, str):
        raise TypeError(
            f"ask() takes a question's id, a string such as 'backward-twice', "
            f"not {type(question_id).__name__}"
        )
    every = learner_questions()
    if question_id not in every:
        close = difflib.get_close_matches(question_id, list(every))
        hint = (
            f"; did you mean {', '.join(map(repr, close))}?"
            if close
            else (f"; the ids are listed in helpers/text/en/{TEXT}.toml")
        )
        raise KeyError(f"no question {question_id!r} in the collection{hint}")
    found = every[question_id]
    _show(found)
    return found


def _show(question: LearnerQuestion) -> None:
    """Display `question` as Markdown in a notebook; print its text elsewhere."""
    from IPython import get_ipython
    from IPython.display import Markdown, display

    if get_ipython() is not None:
        display(Markdown(question._repr_markdown_()))
    else:
        print(question._repr_markdown_())


class _Markdown(str):
    """Text that a notebook shows as Markdown."""

    def _repr_markdown_(self) -> str:
        return str(self)


def answered_by_the_doctor() -> _Markdown:
    """The questions of the collection that 08's doctor answers in one checked step, each with
    its verdict, as a Markdown list (08's "bring your own step" shows it)."""
    lines = [say(TEXT, "ui.doctor_answers", notebook=NOTEBOOK), ""]
    for question in learner_questions().values():
        if question.doctor:
            verdict = say("common", f"doctor.verdict_{question.doctor}")
            lines.append(say(TEXT, "ui.doctor_answer", short=question.short, verdict=verdict))
    return _Markdown("\n".join(lines))
