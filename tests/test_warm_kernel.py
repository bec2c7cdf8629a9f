"""The kernels the test runs fork from a process that imported torch
(tests/support/warm_kernel.py): each is a new process with the caller's folder and environment,
shares nothing with the kernel before it, and ends with its launcher."""

import os
import time
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from tests.support import warm_kernel

PROBE = (
    "import os, sys\n"
    "print(os.getpid(), os.getcwd(), os.environ['COURSE_WARM_PROBE'], 'torch' in sys.modules,"
    " 'x' in globals(), sep='|')\n"
    "x = 1"
)


@pytest.fixture
def warm_spec(tmp_path, monkeypatch) -> Path:
    warm_kernel.write_spec(tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("COURSE_WARM_PROBE", f"from-the-caller-{os.getpid()}")
    return tmp_path


def _gone(pid: int, within: float = 15) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_each_kernel_is_a_new_process_with_torch_imported_and_the_callers_setup(warm_spec):
    folder = warm_spec / "notebook folder"
    folder.mkdir()
    seen = []
    for _ in range(2):
        nb = new_notebook(cells=[new_code_cell(PROBE)])
        client = NotebookClient(
            nb, kernel_name=warm_kernel.KERNEL_NAME, resources={"metadata": {"path": str(folder)}}
        )
        client.execute()
        seen.append(nb.cells[0].outputs[0]["text"].strip().split("|"))
    (first, *setup), (second, *setup_again) = seen
    # the caller's folder and environment, torch already imported, and no `x` from before
    assert setup == [str(folder), os.environ["COURSE_WARM_PROBE"], "True", "False"]
    assert setup_again == setup
    assert first != second and str(os.getpid()) not in (first, second)
    assert _gone(int(first)) and _gone(int(second)), "a kernel outlived its shutdown"


def test_a_kernel_ends_when_its_launcher_is_killed(warm_spec):
    manager, client = start_new_kernel(kernel_name=warm_kernel.KERNEL_NAME)
    printed = []
    try:
        reply = client.execute_interactive(
            "import os; print(os.getpid())", timeout=60, output_hook=printed.append
        )
        assert reply["content"]["status"] == "ok"
        kernel = int(next(m for m in printed if m["msg_type"] == "stream")["content"]["text"])
        launcher = manager.provisioner.process
        launcher.kill()  # as a kernel manager kills a kernel
        launcher.wait(timeout=30)
        assert _gone(kernel), "the kernel outlived its launcher"
    finally:
        client.stop_channels()
        manager.cleanup_resources()
