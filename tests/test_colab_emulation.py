"""Colab, emulated: a fresh virtual environment with Colab's relevant packages (ipywidgets 7.7,
no torchviz, no helpers, this machine's pinned torch; `make compat` does the same with Colab's
own torch), where each notebook's first cell must install what is missing (pointed at this
checkout instead of the repository) and then run top to bottom.
"""

import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.runners import compat
from tests.runners.compat import PIN
from tests.support.notebook_files import CHOSEN

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parent.parent
# What Colab ships that matters here besides its torch (tests/runners/compat.py, from
# googlecolab/backend-info). Colab's torch is 2.11: `make compat` emulates Colab with it; here,
# in `make test`, the machine's pinned torch stands in (an unpinned torch would pull CUDA builds).
COLAB_PACKAGES = [f"torch=={PIN}", *compat.COLAB_PACKAGES]
#: One Chinese twin, run the same way: Colab opens it from its badge.
CHINESE_TWIN = ROOT / "notebooks" / "zh" / "03_detach_and_clone.ipynb"
#: The notebooks run here: the start page (its environment report says Colab) and those that
#: hold a widget besides a quiz (ipywidgets 7 on Colab, 8 here). Their first cell, where Colab's
#: install happens, is the same generated cell in every notebook
#: (tests/tooling/test_course.py); every notebook runs on Colab's torch and packages in `make
#: compat`'s own Colab emulation.
ON_COLAB_HERE = ("00_", "03_", "05_", "06b_")
#: Where the Colab-like environment is kept between runs and clones (XDG's cache folder).
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "autograd-notebooks"


def colab_like_venv() -> Path:
    """A cached virtual environment with COLAB_PACKAGES (rebuilt when the list changes).

    It lives outside the checkout (CACHE), so a fresh clone reuses it: the packages never change
    between runs, and each run uninstalls the course's own packages before the notebooks start.
    """
    key = hashlib.sha256(" ".join([sys.version, *COLAB_PACKAGES]).encode()).hexdigest()[:10]
    home = CACHE / f"colab-venv-{key}"
    python = home / "bin" / "python"
    if not (home / ".ready").exists():
        venv.create(home, with_pip=True, clear=True)
        done = compat.pip_install(python, COLAB_PACKAGES, 900)
        assert done.returncode == 0, f"installing {COLAB_PACKAGES} failed:\n{done.stderr[-2000:]}"
        (home / ".ready").touch()
    compat.start_like_a_new_colab_runtime(python)
    return python


@pytest.mark.skipif(sys.platform != "linux", reason="uses a POSIX virtual environment layout")
def test_every_notebook_installs_what_colab_lacks_and_runs():
    python = colab_like_venv()
    missing = subprocess.run(
        [str(python), "-c", "import torchviz"], capture_output=True, check=False, timeout=60
    )
    assert missing.returncode != 0, "the Colab-like environment must start without torchviz"
    env = dict(os.environ, AUTOGRAD_HELPERS_SOURCE=str(ROOT))
    one_notebook = bool(os.environ.get("COURSE_NOTEBOOK"))  # `make test NB=...`: that one
    colab_notebooks = [p for p in CHOSEN if one_notebook or p.name.startswith(ON_COLAB_HERE)]
    done = subprocess.run(
        [
            str(python),
            str(ROOT / "tests" / "support" / "run_notebooks.py"),
            "--fake-colab",
            *(str(p) for p in colab_notebooks),
            str(CHINESE_TWIN),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    for r in results:
        assert r["error"] is None, f"{r['notebook']} failed in the Colab emulation:\n{r['error']}"
    if colab_notebooks[0].name.startswith("00_"):  # 00's environment report says where it runs
        assert "Running on Google Colab" in results[0]["text"]
    # The installed helpers carry their text files: the twin's quiz and tables speak Chinese.
    assert "道题；交互版" in results[-1]["text"] and "与之共享存储" in results[-1]["text"]
    versions = subprocess.run(
        [str(python), "-c", "import ipywidgets, torchviz, helpers; print(ipywidgets.__version__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert versions.stdout.strip() == "7.7.1"
