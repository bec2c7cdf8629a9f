"""For tests that start a server on this machine: a free port, and the status a URL answers."""

import os
import signal
import subprocess
import urllib.error
import urllib.request

from helpers.ranks.launch import free_port  # the one the three-process run uses for its ranks

__all__ = ["free_port", "http_status", "stop_process_group"]


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
