"""`make lab` serves the course on 127.0.0.1 and only with its token."""

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from tests.local_http import http_status, jupyter_port, stop_process_group

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def lab(tmp_path):
    token = secrets.token_hex(8)
    env = dict(
        os.environ,
        JUPYTER_TOKEN=token,
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    log = tmp_path / "lab.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            ["make", "-s", "lab", "PORT=0", "LAB_ARGS=--no-browser"],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"make lab exited early: {log.read_text()[-2000:]}")
            port = jupyter_port(tmp_path / "runtime")  # PORT=0: the system picks one
            if port is None:
                time.sleep(0.5)
                continue
            base = f"http://127.0.0.1:{port}"
            try:
                if http_status(f"{base}/api/status?token={token}") == 200:
                    break
            except OSError:
                pass  # not listening yet
            time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within 90 s")
        yield base, token
    finally:
        stop_process_group(proc)


def test_lab_answers_with_token_and_refuses_without(lab):
    base, token = lab
    assert http_status(f"{base}/api/status?token={token}") == 200
    assert http_status(f"{base}/api/status") == 403
    assert (
        http_status(f"{base}/api/contents/00_start_here.ipynb?token={token}") == 200
    )  # serves notebooks/
    assert http_status(f"{base}/lab?token={token}") == 200
