"""The questions of notebook 10: a final check, not a rerun of the notebooks' own quizzes.

Each question mixes ideas from several notebooks (`draws_on`, the course topics it combines), and
many apply them to code the course never showed (`transfer`: other operations and modules, the
same rules). None repeats a prompt or a program of another notebook (tests/test_quiz_final.py).

The questions themselves are data, in `helpers/text/en/10_check_yourself.toml` (and its
translations); `helpers.quiz` builds them into `Question`s, which run their programs to compute
every answer live, like all of the course's questions.
"""

from __future__ import annotations

__all__ = ["NOTEBOOK", "TOPICS"]

NOTEBOOK = "10_check_yourself.ipynb"

#: The final check's topics, one per section of notebook 10, in order.
TOPICS = ("final_gradients", "final_memory", "final_handoffs", "final_beyond")
