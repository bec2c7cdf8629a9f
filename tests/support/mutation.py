"""Tracebacks as they are outside `make mutate`.

mutmut measures a module by putting each of its functions behind a trampoline: a call goes
through mutmut's `trampoline` and then runs the function's body under another name
(`x_call__mutmut_orig`, or a mutant's). Both frames stand in every traceback through the
module, where a test of the frames the watch leaves would see them. These filters take out
those frames, and only those: outside a mutation run there are none, and they change nothing.
"""

from __future__ import annotations

import re


def _trampolined(text: str) -> bool:
    return "/mutmut/" in text or "__mutmut_" in text


def frames_outside_mutmut(frames: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """(file, line, function) frames without mutmut's."""
    return [f for f in frames if not (_trampolined(f[0]) or _trampolined(f[2]))]


def entries_outside_mutmut(entries: list[str]) -> list[str]:
    """IPython's structured traceback (one entry a frame) without mutmut's frames."""
    return [entry for entry in entries if not _trampolined(entry)]


_FRAME = re.compile(r'^  File "[^\n]*\n(?:    [^\n]*\n)*', re.MULTILINE)


def text_outside_mutmut(text: str) -> str:
    """A traceback printed by Python without mutmut's frames (each a `File` line and the
    source lines below it)."""
    return _FRAME.sub(
        lambda m: "" if _trampolined(m.group(0).splitlines()[0]) else m.group(0), text
    )
