"""When autograd raises in your own code: what happened, the line that caused it, and a fix.

    %load_ext helpers                 # in a notebook: every cell is watched from now on
    python -m helpers.explain train.py     # a script, watched from its first line

While it is on, a small watch (`helpers.explain.watch`) writes down the in-place calls, the
backward calls and the cuts your code makes, each with its line. When an autograd error reaches
the top, `explain` reads those records, the failing graph and the traceback, and names the family
of the error (`helpers.explain.catalogue`), the lines that matter, and the fix. When it cannot tell
the cause it says nothing, and the error shows as torch raised it; an error in the explainer
itself never replaces yours.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import torch

from helpers.doctor.watching import bare_traceback
from helpers.explain.catalogue import FAMILIES, scene_of
from helpers.explain.explanation import Edit, Explanation, Place
from helpers.explain.watch import Watch

__all__ = ["FAMILIES", "Edit", "Explanation", "Place", "Watch", "explain", "off", "on", "watch"]

#: The watch of this process while the explainer is on (one per thread would be needed for
#: threads that raise: the explainer watches the thread that switched it on).
_WATCH: list[Watch] = []


def watch() -> Watch | None:
    """The running watch: the script's (`on`), else the one watching this notebook cell
    (`%load_ext helpers`, so that a cell may catch an error and call `explain(err)` itself), or
    None when the explainer is off."""
    if _WATCH:
        return _WATCH[0]
    stack = torch.overrides._get_current_function_mode_stack()
    return next((mode for mode in reversed(stack) if isinstance(mode, Watch)), None)


def explain(
    error: BaseException, tb: Any = None, records: Watch | None = None
) -> Explanation | None:
    """The explanation of `error` (raised with traceback `tb`, its own by default), from the
    records of `records` (the running watch by default); None when no family can tell the cause.
    Never raises."""
    try:
        scene = scene_of(tb if tb is not None else error.__traceback__, records or watch())
        message = str(error)
        for family in FAMILIES:
            if family.words in message:
                return family.explain(error, scene)
    except Exception:  # never let the explainer hide the learner's error
        return None
    return None


def on() -> Watch:
    """Switch the explainer on for the rest of this script: the watch, and an excepthook that
    explains an autograd error that ends the script (the traceback is printed first, as ever)."""
    if not _WATCH:
        _WATCH.append(Watch().start())
        sys.excepthook = _excepthook
    return _WATCH[0]


def off() -> None:
    """Switch it off again: the watch stops and Python's own excepthook is back."""
    if _WATCH:
        _WATCH.pop().stop()
    if sys.excepthook is _excepthook:
        sys.excepthook = sys.__excepthook__


def _excepthook(etype: type, value: BaseException, tb: Any) -> None:
    # Python's own hook prints the error's own traceback whatever it is handed: print this one
    traceback.print_exception(etype, value, bare_traceback(tb))
    explanation = explain(value, tb)
    if explanation is not None:
        print("\n" + explanation.as_text(), file=sys.stderr)
