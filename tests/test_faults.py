"""What real learners' machines do to the course: no `dot`, no network, any notebook order."""

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.graph import missing_dot_message
from tests.support.ci import skip_or_fail
from tests.support.notebook_files import CHOSEN

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "tests" / "support" / "run_notebooks.py"
VENV_BIN = str(Path(sys.executable).parent)


def graph_pictures(notebook: Path) -> list[str]:
    """The text form of each graph picture the committed notebook shows (SVG, not in a widget)."""
    texts = []
    for cell in json.loads(notebook.read_text())["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/svg+xml" in data and "application/vnd.jupyter.widget-view+json" not in data:
                plain = data["text/plain"]
                texts.append("".join(plain) if isinstance(plain, list) else plain)
    return texts


def isolation_available() -> bool:
    """True when this process may run a command in a fresh network namespace (root on Linux)."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = subprocess.run(
        ["unshare", "-n", "true"], capture_output=True, text=True, timeout=30, check=False
    )
    return probe.returncode == 0


def offline_command(command: list[str], path: str) -> list[str]:
    """`command` in a new network namespace with only loopback up, and PATH set to `path`."""
    script = f'{shutil.which("ip")} link set lo up && exec /usr/bin/env PATH="$0" "$@"'
    return [shutil.which("unshare"), "-n", "/bin/sh", "-c", script, path, *command]


def test_network_isolation_is_available_in_ci():
    if os.environ.get("CI") != "true":
        pytest.skip("only required in CI, which runs as root")
    assert isolation_available(), "CI must be able to run the offline notebook pass (unshare -n)"


def test_notebooks_run_without_dot_offline_in_shuffled_order(capsys):
    assert shutil.which("dot", path=VENV_BIN) is None
    seed = int(os.environ.get("SHUFFLE_SEED", random.randrange(10_000)))
    command = [sys.executable, str(RUNNER), "--warm", "--shuffle", str(seed), *map(str, CHOSEN)]
    offline = isolation_available()
    if offline:
        probe = offline_command(
            [sys.executable, "-c", "print(open('/proc/net/route').read())"], VENV_BIN
        )
        routes = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=True)
        assert len(routes.stdout.strip().splitlines()) <= 1, "the namespace still has routes"
        command = offline_command(command, VENV_BIN)
    env = dict(os.environ, PATH=VENV_BIN)
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env=env, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    with capsys.disabled():
        order = ", ".join(r["notebook"][:2] for r in results)
        print(f"\n  offline={offline} shuffle seed={seed} order: {order}")
    for r in results:
        assert r["error"] is None, f"{r['notebook']} failed without dot/offline:\n{r['error']}"
        # nothing written next to the notebooks, so no notebook can depend on another's run
        assert not r["files_written"], f"{r['notebook']} wrote {r['files_written']}"
        assert not r["stderr"], f"{r['notebook']} wrote to stderr: {r['stderr']}"
        # every graph picture (show_graph, split_graphs) shows its text and what to install
        pictures = graph_pictures(ROOT / "notebooks" / r["notebook"])
        for text in pictures:
            assert text in r["text"], f"{r['notebook']}: without dot, a graph shows nothing"
        advice = r["text"].count(missing_dot_message())
        assert advice >= len(pictures), f"{r['notebook']}: {len(pictures)} graphs, {advice} advice"
    if any(graph_pictures(ROOT / "notebooks" / r["notebook"]) for r in results):
        assert any("`dot` program is not installed" in r["text"] for r in results)
    assert [r["notebook"] for r in results] != [] and len(results) == len(CHOSEN)
    if not offline:  # every check above held, but with the network up: say so, never pass
        skip_or_fail("ran with the network up: cutting it needs `unshare -n` (root on Linux)")


def test_the_runner_reports_the_files_a_notebook_writes_next_to_it(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    tidy, messy = tmp_path / "01_tidy.ipynb", tmp_path / "02_messy.ipynb"
    connection = "from ipykernel import get_connection_info; print(get_connection_info())"
    nbformat.write(new_notebook(cells=[new_code_cell(connection)]), tidy)
    writes = "open('scratch.txt', 'w').write('state for the next notebook')"
    nbformat.write(new_notebook(cells=[new_code_cell(writes)]), messy)
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(tidy), str(messy)],
        capture_output=True, text=True, timeout=300, check=True,
    )
    results = {r["notebook"]: r for r in json.loads(done.stdout)}
    assert results["01_tidy.ipynb"]["files_written"] == []
    assert results["02_messy.ipynb"]["files_written"] == ["scratch.txt"]
    # its kernel talks over Unix sockets, which no other step's TCP connection can take
    assert '"transport": "ipc"' in results["01_tidy.ipynb"]["text"]


def test_the_offline_pass_forks_its_kernels_warm_and_colab_starts_them_cold(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    notebook = tmp_path / "00_probe.ipynb"
    probe = "import sys; print('torch imported before the first cell:', 'torch' in sys.modules)"
    nbformat.write(new_notebook(cells=[new_code_cell(probe)]), notebook)
    said = {}
    for flag in ("--warm", "--fake-colab"):
        done = subprocess.run(
            [sys.executable, str(RUNNER), flag, str(notebook)],
            capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        (result,) = json.loads(done.stdout)
        said[flag] = result["text"].strip()
    assert said == {
        "--warm": "torch imported before the first cell: True",
        "--fake-colab": "torch imported before the first cell: False",
    }
