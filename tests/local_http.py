"""For tests that start a server on this machine: a free port, and the status a URL answers."""

import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the system picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url: str, timeout: float = 5) -> int:
    """The HTTP status `url` answers with; OSError when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def stop_process_group(proc: subprocess.Popen) -> None:
    """End a server started with start_new_session=True, and everything it started."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
