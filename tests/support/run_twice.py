"""Run every code cell of notebooks twice in a row, as a learner who presses Shift-Enter twice does,
and report each error, as JSON on stdout.

    python tests/support/run_twice.py NOTEBOOK ...

Each notebook gets a fresh kernel, forked from a process that has imported torch
(warm_kernel.py, beside this file). Cells run top to bottom; each code cell runs, then at once
again, and the next cell runs after the second run. Each result lists the errors: the cell's id,
which run (1 or 2), the exception's name, and the text the learner saw in its place. Needs only
nbclient and nbformat.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import warm_kernel  # beside this file
from kernel_sockets import UnixSocketKernelManager  # beside this file

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _advice_patterns() -> list[re.Pattern]:
    """Where an explanation says which cell to run again from (`rerun.run_from`), per language."""
    from helpers.language import LANGUAGES, translated_table

    templates = [translated_table("common", "rerun", code)["run_from"] for code in LANGUAGES]
    return [re.compile(re.escape(t.split("{cell}")[0]) + r"(\d+)") for t in templates]


def errors_in(outputs: list) -> list[dict]:
    """The error outputs of one cell run: exception name and the text shown (colours removed)."""
    return [
        {"ename": o.get("ename", ""), "shown": ANSI.sub("", "\n".join(o.get("traceback", [])))}
        for o in outputs
        if o.get("output_type") == "error"
    ]


def run(path: Path) -> dict:
    """Execute one notebook's code cells twice each; return its name, errors and seconds."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name=warm_kernel.KERNEL_NAME,
        kernel_manager_class=UnixSocketKernelManager,
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    found = []
    by_count: dict[int, int] = {}  # execution count -> the index of the cell that ran
    start = time.monotonic()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            for attempt in (1, 2):
                client.execute_cell(cell, index)
                by_count[cell.execution_count] = index
                errors = errors_in(cell.outputs)
                for error in errors:
                    error.update(cell=cell.get("id", str(index)), run=attempt)
                    error["advice_works"] = follow_advice(client, nb, index, error, by_count)
                found += errors
    return {
        "notebook": path.as_posix(),
        "errors": found,
        "seconds": round(time.monotonic() - start, 2),
    }


def follow_advice(client, nb, index: int, error: dict, by_count: dict[int, int]) -> bool | None:
    """Do what the explanation says ("run In [k] again ... and the cells after it, in order"):
    run the cells from that one to the failing one; True when the failing cell then runs clean.
    None when the explanation names no cell."""
    named = next((m for p in _advice_patterns() if (m := p.search(error["shown"]))), None)
    if named is None or int(named.group(1)) not in by_count:
        return None
    first = by_count[int(named.group(1))]
    for k in range(first, index + 1):
        if nb.cells[k].cell_type == "code":
            client.execute_cell(nb.cells[k], k)
            by_count[nb.cells[k].execution_count] = k
    return not errors_in(nb.cells[index].outputs)


def main() -> int:
    """Command line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args()
    with warm_kernel.spec_on_path():
        json.dump([run(p.resolve()) for p in args.notebooks], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
