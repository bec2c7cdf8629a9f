"""The explainer in a Jupyter kernel: `%load_ext helpers` calls `load`.

Each cell runs with the watch on (IPython's `pre_run_cell` and `post_run_cell` events), so what
the learner's cells do is recorded and nothing outside a cell is. An error that reaches the top of
a cell goes to one handler: a cell run twice or out of order is explained as such
(`helpers.rerun`), an autograd error by its family (`helpers.explain.catalogue`), and anything
else keeps IPython's usual traceback. With an explanation, the full traceback is one click away
(a folded `<details>` below it), and torch's own message stays in the cell's error output.
"""

from __future__ import annotations

import html
import re
from typing import Any

from helpers import rerun
from helpers.explain import explain
from helpers.explain.watch import Watch

__all__ = ["load", "unload"]

_LOADED = "_autograd_notebooks_explainer"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def load(shell: Any) -> bool:
    """Switch the explainer on in this kernel (once); False where there is no IPython shell."""
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    if getattr(shell, _LOADED, None) is not None:
        return True
    watch = Watch()
    starts, stops = (lambda *_: watch.start()), (lambda *_: _stop(watch))
    shell.events.register("pre_run_cell", starts)
    shell.events.register("post_run_cell", stops)
    shell.set_custom_exc((Exception,), lambda *args, **kw: _handler(watch, *args, **kw))
    setattr(shell, _LOADED, (watch, starts, stops))
    setattr(shell, rerun.INSTALLED, True)  # this handler explains re-runs too
    return True


def unload(shell: Any) -> None:
    """`%unload_ext helpers`: the watch off, IPython's own handler back."""
    loaded = getattr(shell, _LOADED, None)
    if loaded is None:
        return
    watch, starts, stops = loaded
    shell.events.unregister("pre_run_cell", starts)
    shell.events.unregister("post_run_cell", stops)
    _stop(watch)
    shell.set_custom_exc((), None)
    setattr(shell, _LOADED, None)
    setattr(shell, rerun.INSTALLED, False)


def _stop(watch: Watch) -> None:
    try:
        watch.stop()
    except (RuntimeError, IndexError):  # not on the stack (a cell that popped modes itself)
        pass


def _handler(watch: Watch, shell: Any, etype: type, value: BaseException, tb: Any, tb_offset=None):
    """IPython's custom exception handler: a re-run first (its story is the cause), then an
    autograd family; otherwise IPython's usual traceback, untouched."""

    def autograd(usual: list[str]) -> list[str]:
        explanation = explain(value, tb, watch)
        if explanation is None:
            shell._showtraceback(etype, value, usual)
            return usual
        from IPython.display import HTML, display

        folded = html.escape(_ANSI.sub("", "\n".join(usual)))
        details = f"<details><summary>traceback</summary><pre>{folded}</pre></details>"
        display(HTML(explanation.as_html() + details))
        short = [f"{etype.__name__}: {value}"]
        shell._showtraceback(etype, value, short)
        return short

    return rerun.handler(shell, etype, value, tb, tb_offset, otherwise=autograd)
