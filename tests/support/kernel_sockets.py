"""The kernels the test runs start talk to their client over Unix sockets, not TCP ports.

Over TCP, Jupyter's client picks five free ports, closes them, writes them into the connection
file and starts the kernel, which binds them a moment later. `make test` runs two steps at once,
and the other step opens TCP connections of its own (the distributed runs, the browser, the local
web server): when one of those takes a port in that moment, the kernel cannot bind it, dies, and
nbval reports "Kernel died before replying to kernel_info" for a notebook that is fine (a known
race: jupyter/jupyter_client#154). A Unix socket is a file that only its kernel uses, so no other
process can take it.

    NotebookClient(..., kernel_manager_class=UnixSocketKernelManager)   nbclient's runs
    use_unix_sockets_in_nbval()                                 nbval's (in conftest.py)
    jupyter lab --KernelManager.transport=ipc                   JupyterLab's (tests/browser/)
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from jupyter_client.manager import KernelManager
from traitlets import default


def _socket_prefix() -> str:
    """A path of its own for one kernel's sockets (the kernel adds "-1" to "-5"): absolute, since
    the kernel runs in the notebook's folder and the client in another, and short, since a Unix
    socket's path holds at most 107 bytes."""
    return str(Path(tempfile.gettempdir()) / f"course-kernel-{uuid.uuid4().hex}")


class UnixSocketKernelManager(KernelManager):
    """jupyter_client's KernelManager with the "ipc" transport at a path of its own; the files
    go when the kernel is shut down (KernelManager.cleanup_resources)."""

    @default("transport")
    def _transport_default(self) -> str:
        return "ipc"

    @default("ip")
    def _ip_default(self) -> str:
        return _socket_prefix() if self.transport == "ipc" else super()._ip_default()


def use_unix_sockets_in_nbval() -> None:
    """Have nbval start its kernels with UnixSocketKernelManager (nbval has no option for the
    transport; its kernel module names the KernelManager class it starts)."""
    import nbval.kernel

    if not issubclass(nbval.kernel.KernelManager, KernelManager):
        raise RuntimeError(
            "nbval.kernel.KernelManager is no longer jupyter_client's KernelManager; "
            "tests/support/kernel_sockets.py needs another way to choose nbval's transport"
        )
    nbval.kernel.KernelManager = UnixSocketKernelManager
