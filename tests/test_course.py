"""helpers.course: the generated cells and addresses."""

from helpers import course


def test_setup_cell_installs_only_on_colab_and_never_torch():
    source = course.setup_cell_source()
    guard = 'if "google.colab" in sys.modules and importlib.util.find_spec("helpers") is None:'
    assert guard in source
    assert "torchviz==0.0.3" in source and course.REPOSITORY in source
    assert "torch==" not in source.replace("torchviz==", "")
    compile(source, "setup", "exec")


def test_setup_cell_does_nothing_off_colab(capsys):
    namespace = {}
    exec(course.setup_cell_source(), namespace)
    assert capsys.readouterr() == ("", "")


def test_badges_point_at_the_notebook():
    text = course.badge_markdown("01_leaf_nodes.ipynb")
    assert course.colab_url("01_leaf_nodes.ipynb") in text
    assert "blob/main/notebooks/01_leaf_nodes.ipynb" in text
    assert "urlpath=lab/tree/notebooks/01_leaf_nodes.ipynb" in text


def test_toc_lists_every_notebook_with_its_title():
    toc = course.toc_markdown()
    for path in course.notebook_paths():
        assert f"]({path.name})" in toc


def test_check_command_reports_stale_cells(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(cells=[new_markdown_cell("# T"), new_markdown_cell("x"), new_code_cell("y")])
    nb.cells[1].metadata["tags"] = [course.BADGE_TAG]
    nb.cells[2].metadata["tags"] = [course.SETUP_TAG]
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    assert course.main(["check", str(path)]) == 1
    assert course.main(["sync", str(path)]) == 0
    assert course.main(["check", str(path)]) == 0


def test_widget_ids_are_renumbered_in_order_of_use():
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    child, parent = "b" * 32, "a" * 32
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": parent, "version_major": 2}}
    cell = new_code_cell("w")
    cell.outputs = [nbformat.v4.new_output("display_data", data=view)]
    nb = new_notebook(cells=[cell])
    nb.metadata["widgets"] = {
        course.WIDGET_STATE: {
            "state": {
                child: {"state": {}},
                parent: {"state": {"children": [f"IPY_MODEL_{child}"]}},
            },
            "version_major": 2,
            "version_minor": 0,
        }
    }
    course.stabilise_widget_ids(nb)
    state = nb.metadata.widgets[course.WIDGET_STATE]["state"]
    first, second = f"{1:032x}", f"{2:032x}"
    assert list(state) == [first, second]
    assert state[first]["state"]["children"] == [f"IPY_MODEL_{second}"]
    assert (
        nb.cells[0].outputs[0].data[course.WIDGET_STATE.replace("state", "view")]["model_id"]
        == first
    )
