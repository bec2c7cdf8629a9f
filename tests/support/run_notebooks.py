"""Run notebooks top to bottom in fresh kernels and report what happened, as JSON on stdout.

    python tests/support/run_notebooks.py [--fake-colab | --warm] [--shuffle SEED] NOTEBOOK ...

Used by the fault and Colab-emulation tests, which run it in a changed environment (no `dot` on
PATH, no network, a Colab-like virtual environment). Needs only nbclient and nbformat.

Each notebook gets a fresh kernel, so one notebook can depend on another only through a file that
one writes and the other reads in the notebooks' folder. With `--warm` the kernel is forked from a
process that has imported torch (warm_kernel.py, beside this file), as nbval's and the re-runs'
are: the offline pass. Emulated Colab starts ordinary kernels, as Colab does, and so does
JupyterLab in the browser tests: a kernel's cold start is proved there. Each result lists the
files the notebook created or changed there (`files_written`): with none, the order cannot
matter, and a shuffled run checks that claim in an order nobody chose.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
from pathlib import Path

FAKE_COLAB = (
    "import sys, types\n"
    "sys.modules['google'] = types.ModuleType('google')\n"
    "sys.modules['google.colab'] = types.ModuleType('google.colab')"
)


def folder_state(folder: Path) -> dict[str, int]:
    """Every file under `folder` (relative path) -> its modification time in nanoseconds."""
    return {
        p.relative_to(folder).as_posix(): p.stat().st_mtime_ns
        for p in folder.rglob("*")
        if p.is_file()
    }


def run(path: Path, fake_colab: bool, kernel_name: str = "python3") -> dict:
    """Execute one notebook; return its name, error (or None), all text it showed, the files it
    created or changed in its folder, and the seconds Run All took (kernel start included)."""
    import nbformat
    from kernel_sockets import UnixSocketKernelManager  # beside this file
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbformat.v4 import new_code_cell

    nb = nbformat.read(path, as_version=4)
    if fake_colab:
        nb.cells.insert(0, new_code_cell(FAKE_COLAB))
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name=kernel_name,
        kernel_manager_class=UnixSocketKernelManager,
        resources={"metadata": {"path": str(path.parent)}},
    )
    error = None
    before = folder_state(path.parent)
    start = time.monotonic()
    try:
        client.execute()
    except CellExecutionError as err:
        error = str(err)[-3000:]
    seconds = time.monotonic() - start
    after = folder_state(path.parent)
    written = sorted(name for name, mtime in after.items() if before.get(name) != mtime)
    texts, stderr = [], []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("name") == "stderr":
                stderr.append(out.get("text", ""))
            texts.append(out.get("text", "") + str(out.get("data", {}).get("text/plain", "")))
    return {
        "notebook": path.name,
        "error": error,
        "stderr": stderr,
        "text": "\n".join(texts),
        "files_written": written,
        "seconds": round(seconds, 2),
    }


def main() -> int:
    """Command line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("notebooks", nargs="+", type=Path)
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--fake-colab", action="store_true")
    chosen.add_argument("--warm", action="store_true", help="kernels forked with torch imported")
    parser.add_argument(
        "--shuffle", type=int, default=None, help="shuffle the order with this seed"
    )
    args = parser.parse_args()
    order = list(args.notebooks)
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(order)
    if args.warm:
        import warm_kernel  # beside this file

        kernels = warm_kernel.spec_on_path()
    else:
        kernels = contextlib.nullcontext("python3")
    with kernels as kernel_name:
        results = [run(p.resolve(), args.fake_colab, kernel_name) for p in order]
    json.dump(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
