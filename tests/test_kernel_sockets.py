"""The test runs' kernels talk over Unix sockets of their own, so that no TCP connection of a step
running beside them can take a kernel's port (tests/support/kernel_sockets.py)."""

import json
from pathlib import Path
from types import SimpleNamespace

import nbval.kernel
import pytest
from jupyter_client.manager import KernelManager

import conftest
from tests.support import kernel_sockets

ASK = "from ipykernel import get_connection_info; print(get_connection_info())"


@pytest.fixture
def nbval_as_installed(monkeypatch):
    """nbval's kernel module as installed, put back after the test."""
    monkeypatch.setattr(nbval.kernel, "KernelManager", KernelManager)
    return nbval.kernel


def test_nbval_kernel_in_another_folder_answers_over_its_own_unix_sockets(
    nbval_as_installed, tmp_path
):
    kernel_sockets.use_unix_sockets_in_nbval()
    folder = tmp_path / "the notebook's folder"  # nbval runs the kernel in the notebook's folder
    folder.mkdir()
    manager, client = nbval_as_installed.start_new_kernel(kernel_name="python3", cwd=str(folder))
    printed = []
    try:
        reply = client.execute_interactive(ASK, timeout=60, output_hook=printed.append)
        assert reply["content"]["status"] == "ok"
        text = next(m["content"]["text"] for m in printed if m["msg_type"] == "stream")
        assert json.loads(text)["transport"] == "ipc"  # the connection file the kernel read
        info = manager.get_connection_info()
        sockets = [Path(f"{info['ip']}-{info[f'{c}_port']}") for c in ("shell", "iopub", "hb")]
        assert info["transport"] == "ipc" and Path(info["ip"]).is_absolute()
        assert all(s.is_socket() for s in sockets)
    finally:
        client.stop_channels()
        manager.shutdown_kernel()
    assert not any(s.exists() for s in sockets), "a kernel's socket files outlived it"


def test_every_kernel_manager_has_sockets_of_its_own():
    first, second = (kernel_sockets.UnixSocketKernelManager() for _ in range(2))
    assert first.transport == second.transport == "ipc"
    assert first.ip != second.ip
    assert len(f"{first.ip}-99999".encode()) <= 107  # what a Unix socket's path can hold
    tcp = kernel_sockets.UnixSocketKernelManager(transport="tcp")
    assert tcp.ip == "127.0.0.1"


def _config(**options) -> SimpleNamespace:
    return SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))


@pytest.mark.parametrize("option", ["nbval", "nbval_lax"])
def test_conftest_gives_nbval_unix_sockets_when_nbval_runs(nbval_as_installed, option):
    conftest.pytest_configure(_config(**{option: True}))
    assert nbval_as_installed.KernelManager is kernel_sockets.UnixSocketKernelManager


def test_conftest_leaves_nbval_alone_when_it_does_not_run(nbval_as_installed):
    conftest.pytest_configure(_config())
    assert nbval_as_installed.KernelManager is KernelManager


def test_a_changed_nbval_is_named_rather_than_patched(nbval_as_installed, monkeypatch):
    monkeypatch.setattr(nbval.kernel, "KernelManager", object)
    with pytest.raises(RuntimeError, match=r"tests/support/kernel_sockets\.py needs another way"):
        kernel_sockets.use_unix_sockets_in_nbval()
