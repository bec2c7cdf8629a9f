"""For tests that start a server on this machine: a free port, and the status a URL answers."""

import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request

__all__ = ["free_port", "http_status", "stop_process_group"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now: bind to port 0 and let the system pick one. (Whoever
    binds it later can lose it to another program in between: use it only where the program
    given it cannot pick its own.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
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
