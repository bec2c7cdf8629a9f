"""The README's doctor example (both editions) runs as written and prints what the README says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- doctor example:"
PIN = re.search(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M).group(1)


def example(readme: str) -> tuple[str, str]:
    """The python block after the marker, and the text block after it."""
    text = (ROOT / readme).read_text(encoding="utf-8")
    assert text.count(MARK) == 1, f"{readme} has no single doctor example marker"
    after = text[text.index(MARK) :]
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
