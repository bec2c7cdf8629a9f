"""The README's explainer example (both editions) runs as written under `python -m
helpers.explain` and prints, after the traceback, what the README shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- explain example:"


def example(readme: str) -> tuple[str, str]:
    text = (ROOT / readme).read_text(encoding="utf-8")
    assert text.count(MARK) == 1, f"{readme} has no single explain example marker"
    after = text[text.index(MARK) :]
    code = re.search(r"```python\n(.*?)```", after, re.S).group(1)
    printed = re.search(r"```text\n(.*?)```", after, re.S).group(1)
    return code, printed


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
    code, printed = example(readme)
    assert explained(code, language, tmp_path).strip() == printed.strip()


if __name__ == "__main__":  # writes what the example prints into both READMEs
    import tempfile

    for readme, language in [("README.md", "en"), ("README.zh.md", "zh")]:
        code, printed = example(readme)
        with tempfile.TemporaryDirectory() as folder:
            now = explained(code, language, Path(folder))
        path = ROOT / readme
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace(f"```text\n{printed}```", f"```text\n{now}```", 1))
