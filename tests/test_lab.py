"""`make lab` serves the course on 127.0.0.1 and only with its token."""

import os
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.support.local_http import http_status, stop_process_group, wait_for_jupyter

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
        base = wait_for_jupyter(proc, "make lab", tmp_path / "runtime", token, log)
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
