"""The pins, environment.yml, pyproject and the one repository URL agree."""

import re
from pathlib import Path

import tomllib
import yaml

from tooling import course

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {
    "pytorch-cpu": "torch",
    "python-graphviz": "graphviz",
    "matplotlib-base": "matplotlib",
}


def pins():
    text = (ROOT / "constraints.txt").read_text()
    return {
        m.group(1).lower(): m.group(2)
        for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)$", text, re.M)
    }


def test_environment_yml_agrees_with_the_pins():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    locked = pins()
    checked = 0
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep["pip"]:
                name, version = line.split("==")
                assert locked[name.lower()] == version, name
                checked += 1
        elif "=" in dep and not dep.startswith("python="):
            name, version = dep.split("=")
            assert locked[CONDA_TO_PIP.get(name, name)] == version, name
            checked += 1
    assert checked >= 8
    assert "python=3.11" in env["dependencies"]


def test_torch_is_pinned_to_the_cpu_wheel_version():
    assert pins()["torch"] == "2.13.0"
    assert "setuptools" in pins()  # torchviz 0.0.3 imports distutils through setuptools


def test_every_dependency_has_a_reason():
    text = (ROOT / "pyproject.toml").read_text()
    block = text[text.index("dependencies = [") : text.index("[project.urls]")]
    deps = [line for line in block.splitlines() if line.strip().startswith('"')]
    assert deps and all("#" in line for line in deps)


def test_ipywidgets_floor_admits_colab_7():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "ipywidgets>=7.6" in project["dependencies"]
    assert not any(d.startswith("torch==") for d in project["dependencies"])


def test_one_repository_url_everywhere():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["urls"]["Repository"] == course.REPOSITORY
    readme = (ROOT / "README.md").read_text()
    assert course.binder_url() in readme
    urls = set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", readme))
    assert urls <= {course.REPOSITORY}, urls


def test_binder_postbuild_installs_without_deps():
    text = (ROOT / "postBuild").read_text()
    assert text.startswith("#!/bin/bash") and "set -e" in text
    assert "pip install --no-deps ." in text


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert [
        line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))
    ] == ["make test"]


#: Import name -> the distribution that provides it, where the two differ.
DISTRIBUTION = {"PIL": "pillow", "IPython": "ipython", "yaml": "pyyaml"}
#: Helper modules that are maintainer tooling (not imported by notebooks): dev extras suffice.
TOOLING = {"tooling/course.py", "tooling/editions.py", "tooling/code_text.py"}


def _requirement_names(requirements):
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def third_party_imports(path: Path) -> set[str]:
    """The top-level names of the modules a Python file imports, standard library left out."""
    import ast
    import sys

    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "helpers"}


def test_every_third_party_import_of_the_helpers_is_a_declared_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = _requirement_names(project["dependencies"])
    dev = runtime | _requirement_names(project["optional-dependencies"]["dev"])
    missing = {}
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        declared = dev if name in TOOLING else runtime
        for module in third_party_imports(path):
            if DISTRIBUTION.get(module, module).lower() not in declared:
                missing.setdefault(name, set()).add(module)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_import_scan_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os\ndef f():\n    from PIL import Image\n    import torch.nn\n")
    assert third_party_imports(source) == {"PIL", "torch"}


def test_the_layout_table_names_every_helpers_module():
    """A row per group (helpers/ and each of its subpackages), naming each of its modules (a
    module per notebook is named by the notebook)."""
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    rows = {
        line.split("`")[1]: line for line in contributing.splitlines() if line.startswith("| `")
    }
    folders = [
        ROOT / "helpers",
        *sorted(p.parent for p in (ROOT / "helpers").glob("*/__init__.py")),
        ROOT / "tooling",
    ]
    for folder in folders:
        name = folder.relative_to(ROOT).as_posix() + "/"
        assert name in rows, f"CONTRIBUTING.md's layout table has no row for {name}"
        if "per notebook" in rows[name]:  # helpers/exercises/: named after the notebooks
            continue
        modules = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        missing = sorted(m for m in modules if f"`{m}`" not in rows[name])
        assert not missing, f"CONTRIBUTING.md's layout table lacks {name} modules: {missing}"


def test_the_system_install_says_what_to_run_by_hand_in_english_and_chinese(tmp_path):
    """Without apt-get or brew (or without passwordless sudo), `make install` cannot install dot
    and the Chinese fonts: it says what to run by hand, and a Chinese learner reads it too."""
    import shutil
    import subprocess

    bin_dir = tmp_path / "bin"  # only the programs the script needs besides what it installs
    bin_dir.mkdir()
    for program in ("bash", "uname", "id", "cat"):
        (bin_dir / program).symlink_to(shutil.which(program))
    done = subprocess.run(
        [str(bin_dir / "bash"), str(ROOT / ".ci" / "system-packages")],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Could not install: graphviz" in done.stderr
    assert "无法自动安装：graphviz" in done.stderr
    assert "Debian/Ubuntu：sudo apt-get install graphviz" in done.stderr


def test_the_learners_package_ships_no_maintainer_tooling():
    """Colab and Binder install `helpers` alone: nothing in it may import tooling/, and the
    package list pyproject.toml gives setuptools does not take tooling/ in."""
    import setuptools

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = setuptools.find_packages(str(ROOT), include=include)
    assert "helpers" in shipped and not [p for p in shipped if p.startswith("tooling")], shipped
    uses = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "helpers").rglob("*.py")
        if re.search(r"^\s*(from|import) tooling\b", path.read_text(encoding="utf-8"), re.M)
    ]
    assert not uses, f"these modules of the package import the maintainers' tooling: {uses}"
