"""The README's examples (both editions) run as written and print what the README says: the
doctor's, and the explainer's under `python -m helpers.explain` (run as a script, this file
rewrites the explainer's printed block in both READMEs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
DOCTOR = "<!-- doctor example:"
EXPLAIN = "<!-- explain example:"
PIN = re.search(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M).group(1)


def example(readme: str, mark: str = DOCTOR) -> tuple[str, str]:
    """The python block after the marker, and the text block after it."""
    text = (ROOT / readme).read_text(encoding="utf-8")
    assert text.count(mark) == 1, f"{readme} has no single marker {mark}"
    after = text[text.index(mark) :]
    code = re.search(r"```python\n(.*?)```", after, re.S).group(1)
    printed = re.search(r"```text\n(.*?)```", after, re.S).group(1)
    return code, printed


def numbers_masked(text: str) -> str:
    return re.sub(r"\d+\.\d+", "<number>", text)


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_doctor_example_prints_what_the_readme_shows(readme, tmp_path):
    code, printed = example(readme)
    (tmp_path / "train.py").write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr
    if torch.__version__.split("+")[0] == PIN:
        assert run.stdout == printed
    else:  # another release may round the last digits of a step differently
        assert numbers_masked(run.stdout) == numbers_masked(printed)
    assert "train.py:" in printed and "encoder.weight, encoder.bias" in printed


def explained(code: str, language: str, folder: Path) -> str:
    (folder / "train.py").write_text(code, encoding="utf-8")
    program = (
        "import sys\nfrom helpers.language import set_language\n"
        f"set_language({language!r})\nfrom helpers.explain.__main__ import main\n"
        "sys.exit(main(['train.py']))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", program], cwd=folder, env=env, capture_output=True, text=True
    )
    assert run.returncode == 1, run.stderr
    return run.stderr[re.search(r"^autograd[:：]", run.stderr, re.M).start() :]


@pytest.mark.parametrize(("readme", "language"), [("README.md", "en"), ("README.zh.md", "zh")])
def test_the_explain_example_prints_what_the_readme_shows(readme, language, tmp_path):
    code, printed = example(readme, EXPLAIN)
    assert explained(code, language, tmp_path).strip() == printed.strip()


if __name__ == "__main__":  # writes what the example prints into both READMEs
    import tempfile

    for readme, language in [("README.md", "en"), ("README.zh.md", "zh")]:
        code, printed = example(readme, EXPLAIN)
        with tempfile.TemporaryDirectory() as folder:
            now = explained(code, language, Path(folder))
        path = ROOT / readme
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace(f"```text\n{printed}```", f"```text\n{now}```", 1))
