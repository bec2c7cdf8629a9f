"""tooling.course: the generated cells and addresses."""

import re

import pytest

from tooling import course


def _as_python(cell: str) -> str:
    """A cell as IPython runs it: `%load_ext helpers` becomes a call of get_ipython()."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell)


def test_setup_cell_installs_only_on_colab_and_never_torch():
    source = course.setup_cell_source()
    guard = 'if "google.colab" in sys.modules and importlib.util.find_spec("helpers") is None:'
    assert guard in source
    assert "torchviz==0.0.3" in source and course.REPOSITORY in source
    assert "torch==" not in source.replace("torchviz==", "")
    compile(_as_python(source), "setup", "exec")


class _Shell:
    def __init__(self):
        self.magics = []

    def run_line_magic(self, name, line, _stack_depth=1):
        self.magics.append((name, line))


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_setup_cell_off_colab_only_loads_the_explainer(capsys, edition):
    shell = _Shell()
    source = course.setup_cell_source(edition)
    assert source.splitlines()[-1] == "%load_ext helpers"  # a line the learner sees
    try:
        exec(_as_python(source), {"get_ipython": lambda: shell})
    finally:
        from helpers.language import set_language

        set_language("en")  # the Chinese cell set it, as it does in its notebook
    assert shell.magics == [("load_ext", "helpers")]
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


def _exercise_notebook():
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    return new_notebook(
        cells=[
            new_markdown_cell("# T\n\n## 1. A lesson\n\n**1.** not a quiz question here"),
            new_code_cell("lesson = 1"),
            new_markdown_cell("## Check yourself\n\nPredict first.\n\n**1.** Is it None?"),
            new_code_cell("answer_1 = None"),
            new_markdown_cell("**2.** And this?\n\n<details><summary>Answer</summary>no</details>"),
            new_code_cell("answer_2 = 2"),
            new_markdown_cell("**More questions.** Click your prediction."),
            new_code_cell("quiz('leaf')"),
            new_markdown_cell("## Exercises\n\n### Exercise 1"),
            new_code_cell("attempt = 1"),
            new_markdown_cell("**Solution** (one of many):"),
            new_code_cell("# NBVAL_IGNORE_OUTPUT\n# why\nsolution = 1"),
        ]
    )


def test_answers_and_solutions_are_found_by_the_cell_before_them():
    assert course.hidden_cells(_exercise_notebook()) == {3: "answer", 5: "answer", 11: "solution"}


def test_sync_folds_answers_and_solutions_for_jupyterlab_colab_and_myst(tmp_path):
    import nbformat

    path = tmp_path / "01_x.ipynb"
    nbformat.write(_exercise_notebook(), path)
    changes = [c for c in course.sync_notebook(path) if "should open" in c]
    assert changes == [
        "01_x.ipynb: cell 4 should open collapsed (it holds the answer)",
        "01_x.ipynb: cell 6 should open collapsed (it holds the answer)",
        "01_x.ipynb: cell 12 should open collapsed (it holds the solution)",
    ]
    cells = nbformat.read(path, as_version=4).cells
    for index, kind in ((3, "answer"), (5, "answer"), (11, "solution")):
        cell = cells[index]
        assert cell.metadata.jupyter == {"source_hidden": True, "outputs_hidden": True}
        assert cell.metadata.cellView == "form" and cell.metadata.tags == [course.HIDE_TAG]
        title = f"# @title {course.HIDDEN_TITLES[kind]}\n"
        assert cell.source.startswith(title) and cell.source.count("@title") == 1
    assert cells[11].source.endswith("# NBVAL_IGNORE_OUTPUT\n# why\nsolution = 1")
    for index in (1, 7, 9):  # a lesson, a quiz call, an attempt: open as they are
        assert cells[index].metadata == {} and "@title" not in cells[index].source
    assert not [c for c in course.sync_notebook(path) if "should open" in c]  # nothing left


def test_a_cell_that_stops_being_an_answer_opens_again(tmp_path):
    import nbformat

    path = tmp_path / "01_x.ipynb"
    nbformat.write(_exercise_notebook(), path)
    course.sync_notebook(path)
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].source = "## Check yourself\n\nPredict first."  # question 1 removed
    nbformat.write(nb, path)
    changes = [c for c in course.sync_notebook(path) if "should open" in c]
    assert changes == ["01_x.ipynb: cell 4 should open expanded"]
    cell = nbformat.read(path, as_version=4).cells[3]
    assert cell.source == "answer_1 = None" and cell.metadata == {}


def test_the_time_estimate_counts_prose_code_questions_and_exercises(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from helpers.quiz import questions

    def minutes(cells):
        path = tmp_path / "01_x.ipynb"
        nbformat.write(new_notebook(cells=cells), path)
        return course.minutes_to_work_through(path)

    prose = new_markdown_cell("word " * (course.WORDS_PER_MINUTE * 20))  # 20 minutes of reading
    setup = new_code_cell("# not the lesson\n", metadata={"tags": [course.SETUP_TAG]})
    assert minutes([prose, setup]) == 20
    lines = course.CODE_LINES_PER_MINUTE * 10  # 10 minutes of code, in one cell
    code = new_code_cell("\n".join(["x = 1", "# a comment is not counted", ""] * lines))
    assert minutes([prose, code]) == 5 * round((30 + course.MINUTES_PER_CODE_CELL) / 5)
    cells = [new_code_cell("") for _ in range(20)]  # their outputs only
    quiz_call = new_code_cell('quiz("leaf", "detach", title="Both", start=3)')
    asked = len(questions("leaf", "detach")) * course.MINUTES_PER_QUESTION
    expected = 20 + 21 * course.MINUTES_PER_CODE_CELL + asked
    assert minutes([prose, *cells, quiz_call]) == 5 * round(expected / 5)
    exercise = new_markdown_cell("## Exercises\n\n### Exercise 1: a title\n\n**1.** A question?")
    extra = course.MINUTES_PER_EXERCISE + course.MINUTES_PER_QUESTION
    assert minutes([prose, exercise]) == 5 * round((20 + extra) / 5)
    solution = [new_markdown_cell("**Solution**"), new_code_cell("\n".join(["y = 2"] * lines))]
    assert minutes([prose, *solution]) == 20  # a folded solution is not read on the way
    assert minutes([new_markdown_cell("# Tiny")]) == 5  # never "0 min"


#: What the independent estimate below covered: every notebook but 05b, the engine, 08b, the errors
#: explained, and 10b, the questions learners ask, which came later (the same model times them for
#: the TOC).
LATER = ("05b_", "08b_", "10b_")
ESTIMATED = [p for p in course.notebook_paths() if not p.name.startswith(LATER)]


def test_every_exercise_is_counted_however_its_heading_is_written():
    """ "### Exercise 1: ...", "### Exercise: ..." and "**Exercise 1.** ..." each count once; the
    section heading "## Exercises" does not."""
    import nbformat

    said = re.compile(r"^(#+ |\*\*)Exercise\b(?!s)", re.M)
    counted = {}
    for path in course.notebook_paths():
        nb = nbformat.read(path, as_version=4)
        prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        counted[course.notebook_key(path)] = len(course._EXERCISE.findall(prose))
        assert counted[course.notebook_key(path)] == len(said.findall(prose)), path.name
    assert (counted["04"], counted["07"], counted["07b"], counted["09b"], counted["09c"]) == (
        3, 1, 2, 1, 1,
    )  # fmt: skip
    assert sum(counted.values()) == 37


def test_the_estimate_states_its_error_against_both_independent_reads():
    """Not pinned to either outside figure: the model lies between the two estimates, and what
    the table of contents says of its error is computed from them."""
    error = course.estimate_error()
    keys = [course.notebook_key(p) for p in ESTIMATED]
    assert sorted(course.INDEPENDENT_BY_NOTEBOOK) == sorted(keys)
    assert error.model_total == sum(course.minutes_to_work_through(p) for p in ESTIMATED)
    assert course.INDEPENDENT_TOTAL[0] <= error.model_total <= error.second_total
    ratios = [
        course.minutes_to_work_through(p) / course.INDEPENDENT_BY_NOTEBOOK[course.notebook_key(p)]
        for p in ESTIMATED
    ]
    assert (error.lowest, error.highest) == (min(ratios), max(ratios))
    toc = course.toc_markdown()
    assert f"the model says {course._hours(error.model_total)}" in toc
    assert f"per notebook {min(ratios):.2f} to {max(ratios):.2f} times the second" in toc
    assert f"up to {1 / min(ratios):.1f} times the time shown" in toc
    assert f"倍（中位数 {error.median:.2f}）" in course.toc_markdown("zh")
    later = [course.notebook_key(p) for p in course.notebook_paths() if p not in ESTIMATED]
    assert later == ["05b", "08b", "10b"]  # the notebooks written after both estimates
    assert "Two independent estimates (both without 05b, 08b and 10b)" in toc
    assert "两份独立估计（都不含 05b、08b 和 10b）" in course.toc_markdown("zh")


def test_the_core_path_is_the_required_notebooks_and_both_readmes_give_it():
    paths = {course.notebook_key(p): p for p in course.notebook_paths()}
    assert set(course.CORE_PATH) <= set(paths)
    assert not any(course.notebook_title(paths[k]).startswith("Optional") for k in course.CORE_PATH)
    core = sum(course.minutes_to_work_through(paths[k]) for k in course.CORE_PATH)
    text = course.core_path_text()
    assert text.startswith("**The core path** (00 to 06, 08 and 10: ")
    assert f"takes about {course._hours(core)};" in text
    assert "the other 9 notebooks (07, 09 and the optional ones)" in text
    for readme, edition in ((course.README_EN, "en"), (course.README_ZH, "zh")):
        assert course.core_path_text(edition) in readme.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="no core-path block"):
        course.readme_core_path("# a README\n", "en")


def test_start_here_counts_the_notebooks_it_opens():
    import nbformat

    nb = nbformat.read(course.NOTEBOOKS / "00_start_here.ipynb", as_version=4)
    twin = nbformat.read(course.NOTEBOOKS / "zh" / "00_start_here.ipynb", as_version=4)
    words = {15: "Fifteen", 16: "Sixteen", 17: "Seventeen", 18: "Eighteen", 19: "Nineteen"}
    paths = course.notebook_paths()
    optional = sum(course.notebook_title(p).startswith("Optional") for p in paths)
    numbers = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    last = course.notebook_key(paths[-1])
    said = f"{words[len(paths)]} notebooks (00 to {last}, "
    assert said + f"{numbers[optional]} of them optional)" in nb.cells[0].source
    said_zh = f"{len(paths)} 个笔记本（00 到 {last}，其中 {optional} 个是选修）"
    assert said_zh in twin.cells[0].source


def test_the_table_of_contents_gives_each_notebook_and_the_course_a_time():
    toc = course.toc_markdown()
    for path in course.notebook_paths():
        line = next(x for x in toc.splitlines() if f"`{path.name}`" in x)
        assert line.endswith(f"· about {course.minutes_to_work_through(path)} min"), line
    assert "In all about " in toc


def test_start_here_states_the_rates_the_estimate_uses():
    import nbformat

    nb = nbformat.read(course.NOTEBOOKS / "00_start_here.ipynb", as_version=4)
    prose = " ".join(c.source for c in nb.cells if c.cell_type == "markdown").replace("\n", " ")
    assert f"prose at {course.WORDS_PER_MINUTE} words a minute" in prose and "Brysbaert" in prose
    assert f"{60 // course.CODE_LINES_PER_MINUTE} s per line of code" in prose
    assert f"{round(60 * course.MINUTES_PER_CODE_CELL)} s per cell's output" in prose
    assert course.MINUTES_PER_QUESTION == 1 and "a minute per question" in prose
    assert f"{course.MINUTES_PER_EXERCISE} minutes per exercise" in prose


def test_course_notebooks_take_an_optional_letter_and_keep_course_order(tmp_path):
    names = ["07_z.ipynb", "06b_deeper.ipynb", "00_start.ipynb", "06_core.ipynb", "10_last.ipynb"]
    for name in [*names, "6_short.ipynb", "06bb_two_letters.ipynb", "notes.ipynb", "06_x.txt"]:
        (tmp_path / name).write_text("{}")
    found = [p.name for p in course.course_notebooks(tmp_path)]
    assert found == ["00_start.ipynb", "06_core.ipynb", "06b_deeper.ipynb", "07_z.ipynb",
                     "10_last.ipynb"]  # fmt: skip
    names = [p.name for p in course.notebook_paths()]
    assert (
        names.index("06b_split_learning_deeper.ipynb")
        == names.index("06_split_backward_three_models.ipynb") + 1
    )


def test_the_chinese_readme_titles_its_course_table_by_the_notebooks_own_titles():
    assert course.sync_readme(write=False) == [], "run `python -m tooling.course sync`"
    zh = course.NOTEBOOKS / "zh"
    row = "| [05 旧的标题](notebooks/zh/05_freeing_the_graph.ipynb) | 内容 |"
    title = course.notebook_title(zh / "05_freeing_the_graph.ipynb")
    assert course.readme_course_table(f"前言\n\n{row}\n") == (
        f"前言\n\n| [05 {title}](notebooks/zh/05_freeing_the_graph.ipynb) | 内容 |\n"
    )
    assert course.readme_course_table("| [English](README.md) | x |") == (
        "| [English](README.md) | x |"
    )  # only rows that link a twin
