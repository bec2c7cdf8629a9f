"""For tests that start a server on this machine: the address a Jupyter server got once it
answers, the status a URL answers. No port is picked for a server beforehand: each binds one the
system gives it."""

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

__all__ = ["http_status", "jupyter_port", "stop_process_group", "wait_for_jupyter"]


def jupyter_port(runtime: Path) -> int | None:
    """The port a Jupyter server started with `--port=0` got from the system: read from the
    jpserver-<pid>.json it writes into its runtime folder once it has bound it (None before).
    A port chosen here and handed to the server could be taken by another program before the
    server binds it; port 0 leaves no such gap."""
    for info in runtime.glob("jpserver-*.json"):
        try:
            return int(json.loads(info.read_text())["port"])
        except (ValueError, KeyError):
            return None  # still being written
    return None


def wait_for_jupyter(
    proc: subprocess.Popen, what: str, runtime: Path, token: str, log: Path, seconds: float = 90
) -> str:
    """The address of the Jupyter server `proc` started with `--port=0`, once it answers with
    `token`; the test fails, with the end of the server's log, if it exits first or does not
    answer within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited early:\n{log.read_text()[-3000:]}")
        port = jupyter_port(runtime)
        if port is not None:
            base = f"http://127.0.0.1:{port}"
            try:
                if http_status(f"{base}/api/status?token={token}", timeout=2) == 200:
                    return base
            except OSError:
                pass  # bound, not answering yet
        time.sleep(0.3)
    pytest.fail(f"{what} did not answer within {seconds:g} s:\n{log.read_text()[-3000:]}")


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
