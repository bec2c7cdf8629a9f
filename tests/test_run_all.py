"""The Run-All pass: each notebook, alone, in a fresh kernel, errors not allowed.

nbval (make notebooks) compares outputs; this pass runs the notebooks the way JupyterLab's Run All
does (nbclient, like JupyterLab, also emulates Output widgets and catches magics errors that nbval
lets through).
"""

import nbformat
import pytest
from nbclient import NotebookClient

from tests.notebook_files import IDS, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_run_all_from_a_fresh_kernel(path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            assert out.get("name") != "stderr", f"{path.name}: stderr after {cell.source[:60]!r}"
