"""`helpers`' public names: one list (`helpers._HOME`), each name loaded from its submodule."""

import importlib
import subprocess
import sys

import pytest

import helpers


def test_every_public_name_comes_from_its_submodule():
    for name, module in helpers._HOME.items():
        home = importlib.import_module(f"helpers.{module}")
        assert name in home.__all__, f"helpers.{module} does not export {name}"
        assert getattr(helpers, name) is getattr(home, name)
    assert helpers.__all__ == sorted(helpers._HOME) and dir(helpers) == helpers.__all__


def test_an_unknown_name_says_so():
    with pytest.raises(AttributeError, match="no attribute 'show_grpah'"):
        helpers.show_grpah  # noqa: B018


def test_importing_helpers_loads_no_submodule_and_no_torch():
    code = (
        "import sys, helpers\n"
        "print(sorted(m for m in sys.modules if m.startswith(('helpers.', 'torch'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
