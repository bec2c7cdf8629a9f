"""Fixtures for the browser tests: one JupyterLab server, one Chromium and one build of the site
for the whole session.

JupyterLab serves a temporary copy of notebooks/ (a test never rewrites committed files), with its
own config, runtime, workspace and user-settings folders. The settings turn off notebook windowing
(every cell stays in the DOM) and the news/update notifications. Chromium is Debian's
/usr/bin/chromium, driven by Playwright; Playwright's own browser download is never used.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ci import skip_or_fail
from tests.support.local_http import stop_process_group, wait_for_jupyter

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("AUTOGRAD_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = ROOT / ".artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",  # needed when running as root (containers, CI)
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: (The news prompt is not silenced here: the course's overrides.json must do it, as for a learner.)
USER_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


def missing_message(path: Path) -> str:
    """What to do when Chromium is not at `path`."""
    return (
        f"the browser tests need Chromium at {path}, which is missing. Install it with "
        "`sudo apt-get install chromium` (Debian/Ubuntu) or `make browser-deps`, then re-run; "
        "Playwright's own browser download is not used."
    )


def require_chromium(path: Path | None = None) -> Path:
    """The Chromium to drive (default: `CHROMIUM`); skips, or in CI fails, when it is missing."""
    path = CHROMIUM if path is None else path
    if not path.exists():
        skip_or_fail(missing_message(path))
    return path


@dataclass
class Lab:
    """A running JupyterLab: its address, token and the folder it serves."""

    base: str
    token: str
    root: Path
    log: Path

    def url(self, workspace: str = "browser-tests") -> str:
        """The address of JupyterLab in a fresh (reset) workspace, nothing open."""
        return f"{self.base}/lab/workspaces/{workspace}?reset&token={self.token}"


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    return require_chromium()


@pytest.fixture(scope="session")
def lab(tmp_path_factory, chromium_path) -> Lab:
    tmp = tmp_path_factory.mktemp("lab")
    served = tmp / "notebooks"
    served.mkdir()
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copy2(notebook, served / notebook.name)
    (served / "zh").mkdir()  # the Chinese edition, one folder down as in the repository
    for notebook in sorted((ROOT / "notebooks" / "zh").glob("*.ipynb")):
        shutil.copy2(notebook, served / "zh" / notebook.name)
    settings = tmp / "user-settings"
    for plugin, values in USER_SETTINGS.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    token = secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
        IPYTHONDIR=str(tmp / "ipython"),
        MPLCONFIGDIR=str(tmp / "matplotlib"),
    )
    log = tmp / "lab.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        # the system picks a free port as it binds (tests/support/local_http.py says why)
        "--port=0",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True",
        f"--ServerApp.root_dir={served}",
        # its kernels talk over Unix sockets, as nbval's do (tests/support/kernel_sockets.py says
        # why);
        # each is named after the kernel's connection file in JUPYTER_RUNTIME_DIR
        "--KernelManager.transport=ipc",
    ]
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        base = wait_for_jupyter(proc, "jupyter lab", tmp / "runtime", token, log)
        yield Lab(base, token, served, log)
    finally:
        stop_process_group(proc)


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(chromium_path), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@dataclass
class LabPage:
    """One JupyterLab page for the whole session; notebooks are opened in it one at a time."""

    page: object
    errors: list[str]


@pytest.fixture(scope="session")
def lab_page(browser, lab) -> LabPage:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(lab.url())
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.commands.hasCommand('docmanager:open')"
        " && !document.querySelector('#jupyterlab-splash')",
        timeout=90_000,
        polling=250,
    )
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
    try:
        yield LabPage(page, errors)
    finally:
        context.close()


#: What `make site` runs.
SITE_BUILD = ROOT / "site" / "build.py"


@pytest.fixture(scope="session")
def site_build(tmp_path_factory) -> dict:
    """Build the site as `make site` does, into a temporary folder; its folder and time. Built
    once for the session: the site's pages and both books are read from the same build."""
    out = tmp_path_factory.mktemp("site")
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SITE_BUILD), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = time.monotonic() - start
    if done.returncode:
        pytest.fail(f"site/build.py failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}")
    return {"out": out, "html": out / "html", "seconds": seconds, "log": done.stdout}
