"""The pins, environment.yml, pyproject and the one repository URL agree."""

import re
from pathlib import Path

import tomllib
import yaml

from helpers import course

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
