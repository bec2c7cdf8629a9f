"""tooling.editions: the Chinese twins stay in step with the English notebooks."""

import json
import re

import nbformat
import pytest

from tests.support.notebook_files import NOTEBOOKS
from tooling import course, editions
from tooling.editions import build_twin, english_hash, problems, todo, translate, twin_path


def test_every_english_notebook_has_a_twin_in_step():
    found = [line for path in NOTEBOOKS for line in problems(path)]
    assert found == [], "\n".join(found[:40])


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A course folder with one English notebook; the twins go to its zh/ subfolder."""
    monkeypatch.setattr(course, "NOTEBOOKS", tmp_path)
    monkeypatch.setattr(editions, "NOTEBOOKS", tmp_path)
    nb = nbformat.v4.new_notebook()
    cells = [
        nbformat.v4.new_markdown_cell("", metadata={"tags": ["course-badges"]}),
        nbformat.v4.new_code_cell("", metadata={"tags": ["colab-setup"]}),
        nbformat.v4.new_markdown_cell("# Leaves\n\nA leaf tensor keeps its gradient."),
        nbformat.v4.new_code_cell("x = 2\nprint(x)"),
        nbformat.v4.new_markdown_cell("Next: [02](02_b.ipynb) and [the list](../LIST.md)."),
    ]
    cells[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text="the answer is 2\n")]
    for n, cell in enumerate(cells):
        cell.id = f"c{n:02d}"
    nb.cells = cells
    nbformat.write(nb, tmp_path / "01_a.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "02_b.ipynb")
    (tmp_path / "zh").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "zh" / "02_b.ipynb")
    course.sync_notebook(tmp_path / "01_a.ipynb")
    return tmp_path


def chinese(folder):
    return {
        "c02": "# 叶子节点\n\n叶子张量会保留它的梯度。",
        "c04": "下一步：[02](02_b.ipynb) 和 [列表](../../LIST.md)。",
    }


def english(folder):
    return folder / "01_a.ipynb"


def test_a_new_twin_copies_the_code_and_asks_for_every_translation(folder):
    twin = build_twin(english(folder))
    assert twin == folder / "zh" / "01_a.ipynb" == twin_path(english(folder))
    cells = nbformat.read(twin, as_version=4).cells
    assert cells[3].source == "x = 2\nprint(x)" and cells[3].outputs[0].text == "the answer is 2\n"
    assert 'set_language("zh")' in cells[1].source and "notebooks/zh/01_a.ipynb" in cells[0].source
    assert set(todo(twin)) == {"c02", "c04"}
    assert problems(english(folder)) == [
        "zh/01_a.ipynb cell 3 (c02): untranslated",
        "zh/01_a.ipynb cell 5 (c04): a link leads nowhere: ../LIST.md",
        "zh/01_a.ipynb cell 5 (c04): untranslated",
    ]


def test_translations_are_marked_kept_by_a_rebuild_and_go_stale(folder):
    (folder.parent / "LIST.md").write_text("list")
    twin = build_twin(english(folder))
    translate(twin, chinese(folder))
    assert problems(english(folder)) == []
    source = nbformat.read(english(folder), as_version=4)
    assert nbformat.read(twin, as_version=4).cells[2].metadata["translation"] == {
        "en": english_hash(source.cells[2].source)
    }
    source.cells[2].source += " Only leaves."
    source.cells[3].source = "x = 3\nprint(x)"
    nbformat.write(source, english(folder))
    assert "zh/01_a.ipynb cell 4 (c03): its code differs from the English; make zh" in problems(
        english(folder)
    )
    build_twin(english(folder))  # the code follows; the translation stays, now stale
    assert problems(english(folder)) == [
        "zh/01_a.ipynb cell 3 (c02): stale, the English changed after its translation"
    ]
    assert todo(twin)["c02"]["translation"] == chinese(folder)["c02"]
    with pytest.raises(ValueError, match="not prose a translator writes"):
        translate(twin, {"c03": "代码"})
    with pytest.raises(KeyError, match="has no cell 'c99'"):
        translate(twin, {"c99": "x"})


def test_outputs_may_differ_only_by_translation_with_the_same_numbers(folder):
    (folder.parent / "LIST.md").write_text("list")
    twin = build_twin(english(folder))
    translate(twin, chinese(folder))

    def with_output(text, mime=None):
        nb = nbformat.read(twin, as_version=4)
        if mime is None:
            nb.cells[3].outputs[0].text = text
        else:
            nb.cells[3].outputs = [
                nbformat.v4.new_output("display_data", data={mime: text, "text/plain": "x"})
            ]
        nbformat.write(nb, twin)
        return problems(english(folder))

    where = "zh/01_a.ipynb cell 4 (c03), output 1"
    assert with_output("答案是 2\n") == []
    assert with_output("the answer is 3\n") == [
        f"{where}: stream differs from the English, and not by a translation"
    ]
    assert with_output("答案是 3\n") == [
        f"{where}: stream shows other numbers than the English (2, 3)"
    ]
    cited = "答案是 2；中文社区也问过：[第7章的问题](https://github.com/a/b/issues/173)\n"
    assert with_output(cited) == []  # a link the English lacks: a thread cited in the twin
    beside = "答案是 3；中文社区也问过：[第2章](https://github.com/a/b/issues/2)\n"
    assert with_output(beside) == [  # the numbers outside that link are still compared
        f"{where}: stream shows other numbers than the English (2, 3)"
    ]
    assert with_output("iVBOR", "image/png") == [f"{where}: of another kind than the English"]
    source = nbformat.read(english(folder), as_version=4)
    source.cells[3].outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": "iVBOR", "text/plain": "x"})
    ]
    nbformat.write(source, english(folder))
    assert with_output("iVBOR", "image/png") == []
    assert with_output("iVBOX", "image/png") == [
        f"{where}: its picture (image/png) is not the English"
    ]


def _twin_picture(folder, svg: str, **english_parts):
    """A course whose English cell 4 shows `svg` filled with `english_parts`, and its twin; a
    function that gives the twin's picture other parts and returns what the check finds."""
    (folder.parent / "LIST.md").write_text("list")
    source = nbformat.read(english(folder), as_version=4)
    source.cells[3].outputs = [
        nbformat.v4.new_output("display_data", data={"image/svg+xml": svg.format(**english_parts)})
    ]
    nbformat.write(source, english(folder))
    twin = build_twin(english(folder))
    translate(twin, chinese(folder))

    def drawn(**parts):
        nb = nbformat.read(twin, as_version=4)
        nb.cells[3].outputs[0].data["image/svg+xml"] = svg.format(**parts)
        nbformat.write(nb, twin)
        return problems(english(folder))

    return drawn


def test_a_snapshot_may_translate_its_text_but_not_its_numbers_or_pictures(folder):
    svg = '<svg><text x="{x}">{words} 3</text><image href="data:image/png;base64,{png}"/></svg>'
    snapshot = _twin_picture(folder, svg, x=10, words="steps", png="AAA")

    where = "zh/01_a.ipynb cell 4 (c03), output 1"
    assert snapshot(x=14, words="步骤", png="AAA") == []
    assert snapshot(x=14, words="步骤", png="AAB") == [
        f"{where}: a picture inside its snapshot is not the English"
    ]
    assert snapshot(x=14, words="步骤 4", png="AAA") == [
        f"{where}: image/svg+xml shows other numbers than the English (4)"
    ]
    assert snapshot(x=14, words="steps", png="AAA") == [
        f"{where}: its picture (image/svg+xml) is not the English"
    ]


def test_a_picture_may_name_other_fonts_and_nothing_else(folder):
    svg = '<svg><g font-family="{font}"><text x="{x}">steps 3</text></g></svg>'
    drawn = _twin_picture(folder, svg, font="monospace", x=10)

    assert drawn(font="DejaVu Sans Mono,Noto Sans Mono CJK SC,monospace", x=10) == []
    assert drawn(font="DejaVu Sans Mono,Noto Sans Mono CJK SC,monospace", x=12) == [
        "zh/01_a.ipynb cell 4 (c03), output 1: its picture (image/svg+xml) is not the English"
    ]


def test_a_picture_in_other_fonts_does_not_hide_its_outputs_other_kinds(folder):
    svg = '<svg><g font-family="{font}"><text>steps</text></g></svg>'
    (folder.parent / "LIST.md").write_text("list")

    def shown(font, text):
        data = {"image/svg+xml": svg.format(font=font), "text/plain": text}
        return [nbformat.v4.new_output("display_data", data=data)]

    source = nbformat.read(english(folder), as_version=4)
    source.cells[3].outputs = shown("monospace", "steps 3")
    nbformat.write(source, english(folder))
    translated_twin(folder)
    edit_twin(folder, lambda nb: setattr(nb.cells[3], "outputs", shown("Noto Sans CJK SC", "步 4")))
    where = "zh/01_a.ipynb cell 4 (c03), output 1"
    assert problems(english(folder)) == [
        f"{where}: text/plain shows other numbers than the English (3, 4)"
    ]


def test_a_translation_uses_the_glossary_terms(folder):
    (folder.parent / "LIST.md").write_text("list")
    twin = build_twin(english(folder))
    translate(twin, {**chinese(folder), "c02": "# 叶子\n\n叶子张量会保留它的导数。"})
    assert problems(english(folder)) == [
        "zh/01_a.ipynb cell 3 (c02): the glossary's terms are missing: gradient → 梯度"
    ]
    assert editions._missing_terms("Call `x.grad` on a `tensor`.", "调用") == []


def test_the_command_line_lists_and_applies_translations(folder, tmp_path, capsys):
    (folder.parent / "LIST.md").write_text("list")
    assert editions.main(["build", str(english(folder))]) == 0
    assert capsys.readouterr().out.startswith("built ")
    twin = twin_path(english(folder))
    assert editions.main(["todo", str(twin)]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"c02", "c04"}
    wanted = tmp_path / "zh.json"
    wanted.write_text(json.dumps(chinese(folder), ensure_ascii=False), encoding="utf-8")
    assert editions.main(["translate", str(twin), str(wanted)]) == 0
    said = "translated 2 Markdown cell(s), 0 comment(s) or printed string(s)\n"
    assert capsys.readouterr().out == said
    assert editions.main(["check", str(english(folder))]) == 0
    assert "every twin is in step" in capsys.readouterr().out


ROOT = course.ROOT


def test_each_readme_links_the_other_at_its_top():
    assert "](README.zh.md)" in "\n".join((ROOT / "README.md").read_text().splitlines()[:5])
    assert "](README.md)" in "\n".join((ROOT / "README.zh.md").read_text().splitlines()[:5])


def test_the_chinese_readme_leads_to_every_twin_and_its_links_resolve():
    text = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    targets = editions._MARKDOWN_LINK.findall(text)
    for path in NOTEBOOKS:
        assert f"notebooks/zh/{path.name}" in targets, path.name
    for target in targets:
        if not target.startswith(("http", "#")):
            assert (ROOT / target).exists(), target


def test_the_chinese_readme_has_no_english_prose_outside_code():
    text = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    prose = editions._CODE_SPAN.sub(" ", text)
    english = [line for line in prose.splitlines() if editions._ENGLISH_RUN.search(line)]
    assert english == []


def test_both_starting_notebooks_link_the_other_edition():
    english = nbformat.read(ROOT / "notebooks" / "00_start_here.ipynb", as_version=4)
    chinese = nbformat.read(ROOT / "notebooks" / "zh" / "00_start_here.ipynb", as_version=4)
    assert "](zh/00_start_here.ipynb)" in english.cells[0].source
    assert "](../00_start_here.ipynb)" in chinese.cells[0].source


def edit_twin(folder, change):
    """Apply change(notebook) to the twin of 01_a and save it."""
    twin = twin_path(english(folder))
    nb = nbformat.read(twin, as_version=4)
    change(nb)
    nbformat.write(nb, twin)


def translated_twin(folder):
    (folder.parent / "LIST.md").write_text("list")
    twin = build_twin(english(folder))
    translate(twin, chinese(folder))
    return twin


def test_todo_gives_a_translator_the_english_and_the_translation_to_revise(folder):
    twin = build_twin(english(folder))
    source = nbformat.read(english(folder), as_version=4)
    assert todo(twin) == {
        "c02": {"status": "untranslated", "english": source.cells[2].source},
        "c04": {"status": "untranslated", "english": source.cells[4].source},
    }
    translate(twin, chinese(folder))
    source.cells[2].source += " Only leaves."
    nbformat.write(source, english(folder))
    assert todo(twin) == {
        "c02": {
            "status": "stale",
            "english": source.cells[2].source,
            "translation": chinese(folder)["c02"],
        }
    }


def test_each_kind_of_out_of_step_cell_is_named(folder):
    twin = translated_twin(folder)
    where = "zh/01_a.ipynb cell"
    edit_twin(folder, lambda nb: setattr(nb.cells[1], "source", "import helpers"))
    assert problems(english(folder)) == [f"{where} 2 (c01): the setup cell is stale; make zh"]
    build_twin(english(folder))
    translate(twin, {"c02": "# Leaves\n\nA leaf tensor keeps its gradient."})
    assert problems(english(folder)) == [
        f"{where} 3 (c02): marked translated, but holds no Chinese"
    ]
    translate(twin, {"c02": "# 树\n\n树会保留它的导数。"})
    assert problems(english(folder)) == [
        f"{where} 3 (c02): the glossary's terms are missing: "
        "leaf node → 叶子, gradient → 梯度, tensor → 张量"
    ]
    assert editions._missing_terms("Gradients flow back.", "导数") == ["gradient → 梯度"]
    translate(
        twin,
        {"c04": "下一步：[02](02_b.ipynb#top)、[网站](https://pytorch.org)、[无](nowhere.md)。"},
    )
    assert problems(english(folder))[1:] == [f"{where} 5 (c04): a link leads nowhere: nowhere.md"]


def test_a_missing_twin_and_a_raw_cell_do_not_stop_the_check(folder):
    assert problems(english(folder)) == [
        f"01_a.ipynb: no Chinese twin ({folder.name}/zh/01_a.ipynb); make zh"
    ]
    source = nbformat.read(english(folder), as_version=4)
    raw = nbformat.v4.new_raw_cell("raw text")
    raw.id = "r01"
    source.cells.insert(2, raw)
    nbformat.write(source, english(folder))
    build_twin(english(folder))
    assert "zh/01_a.ipynb cell 4 (c02): untranslated" in problems(english(folder))


def test_outputs_split_into_several_writes_compare_as_one(folder):
    twin = translated_twin(folder)

    def outputs(*parts):
        edit_twin(folder, lambda nb: setattr(nb.cells[3], "outputs", list(parts)))
        return problems(english(folder))

    def stream(text, name="stdout"):
        return nbformat.v4.new_output("stream", name=name, text=text)

    assert outputs(stream("答案是 "), stream("2\n")) == []
    where = "zh/01_a.ipynb cell 4 (c03)"
    assert outputs(stream("答案是 "), stream("2\n", "stderr")) == [
        f"{where}: 2 outputs, the English 1"
    ]
    picture = nbformat.v4.new_output("display_data", data={"text/plain": "p"})
    source = nbformat.read(english(folder), as_version=4)
    source.cells[3].outputs = [picture, stream("the answer is 2\n")]
    nbformat.write(source, english(folder))
    assert outputs(picture, stream("答案"), stream("是 "), stream("2\n")) == []
    assert outputs(picture, picture) == [f"{where}, output 2: of another kind than the English"]
    assert twin.exists()


def test_each_output_and_each_of_its_kinds_is_compared(folder):
    translated_twin(folder)

    def display(kind="display_data", **data):
        return nbformat.v4.new_output(
            kind, data=data, **({"execution_count": 1} if kind == "execute_result" else {})
        )

    def compare(english_outputs, twin_outputs):
        source = nbformat.read(english(folder), as_version=4)
        source.cells[3].outputs = english_outputs
        nbformat.write(source, english(folder))
        edit_twin(folder, lambda nb: setattr(nb.cells[3], "outputs", twin_outputs))
        return problems(english(folder))

    where = "zh/01_a.ipynb cell 4 (c03), output"
    plain = {"text/plain": "x"}
    assert compare([display("execute_result", **plain)], [display(**plain)]) == [
        f"{where} 1: of another kind than the English"
    ]
    assert compare(
        [display(**{"text/plain": "a"}), display(**{"text/plain": "b"})],
        [display(**{"image/png": "i"}), display(**{"text/plain": "c"})],
    ) == [
        f"{where} 1: of another kind than the English",
        f"{where} 2: text/plain differs from the English, and not by a translation",
    ]
    assert compare(
        [display(**{"text/html": "<b>loss</b>", "text/plain": "loss 2"})],
        [display(**{"text/html": "<b>loss</b>", "text/plain": "loss 3"})],
    ) == [f"{where} 1: text/plain differs from the English, and not by a translation"]
    assert compare(
        [display(**{"image/png": "iVBOR", "text/plain": "a"})],
        [display(**{"image/png": "iVBOX", "text/plain": "b"})],
    ) == [
        f"{where} 1: its picture (image/png) is not the English",
        f"{where} 1: text/plain differs from the English, and not by a translation",
    ]
    widget = "application/vnd.jupyter.widget-view+json"
    assert (
        compare(
            [display(**{widget: {"model_id": "a1"}})], [display(**{widget: {"model_id": "b2"}})]
        )
        == []
    )
    assert compare(
        [display(**{"application/json": {"loss": 2}})],
        [display(**{"application/json": {"loss": 3}})],
    ) == [f"{where} 1: application/json differs from the English, and not by a translation"]
    error = nbformat.v4.new_output("error", ename="E", evalue="v", traceback=[])
    assert compare([error], [error]) == []


def test_a_snapshot_number_in_a_text_node_of_its_own_is_compared(folder):
    svg = "<svg><text>{words}</text><text>{n}</text></svg>"
    source = nbformat.read(english(folder), as_version=4)
    source.cells[3].outputs = [
        nbformat.v4.new_output(
            "display_data", data={"image/svg+xml": svg.format(words="steps", n=3)}
        )
    ]
    nbformat.write(source, english(folder))
    translated_twin(folder)
    edit_twin(
        folder,
        lambda nb: (
            nb.cells[3].outputs[0].data.update({"image/svg+xml": svg.format(words="步骤", n=4)})
        ),
    )
    assert problems(english(folder)) == [
        "zh/01_a.ipynb cell 4 (c03), output 1: "
        "image/svg+xml shows other numbers than the English (3, 4)"
    ]


def test_english_left_in_a_twins_outputs_is_listed_once_per_line(folder):
    twin = translated_twin(folder)
    long = "Every single word here is English " * 5
    outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="答案是 2\nthe answer is two\n"),
        nbformat.v4.new_output("stream", name="stdout", text="the answer is two\n"),
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/html": "<td>loss went down very slowly &amp; surely</td><td>损失</td>",
                "text/plain": "x",
            },
        ),
        nbformat.v4.new_output("display_data", data={"text/plain": "Only plain text shown here"}),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"}),
        nbformat.v4.new_output("stream", name="stdout", text=long),
    ]
    edit_twin(folder, lambda nb: setattr(nb.cells[3], "outputs", outputs))
    assert editions.english_in_outputs(twin) == [
        "cell 4 (c03): the answer is two",
        "cell 4 (c03): loss went down very slowly & surely",
        "cell 4 (c03): Only plain text shown here",
        f"cell 4 (c03): {long.strip()[:120]}",
    ]
    assert len(long.strip()) > 120


def test_the_command_line_checks_the_notebooks_it_is_given_and_says_what_is_wrong(
    folder, tmp_path, capsys
):
    twin = translated_twin(folder)
    other = nbformat.v4.new_notebook()
    other.cells = [nbformat.v4.new_markdown_cell("# Backward")]
    nbformat.write(other, folder / "02_b.ipynb")
    assert editions.main(["check", str(english(folder))]) == 0
    assert capsys.readouterr().out == "every twin is in step with its English notebook\n"
    edit_twin(folder, lambda nb: setattr(nb.cells[1], "source", "import helpers"))
    assert editions.main(["check"]) == 1  # every notebook of the folder
    assert capsys.readouterr().out.splitlines() == [
        "zh/01_a.ipynb cell 2 (c01): the setup cell is stale; make zh",
        "zh/02_b.ipynb: its cells are not the English cells in order; make zh",
    ]
    assert editions.main(["check", str(english(folder)), str(folder / "02_b.ipynb")]) == 1
    assert len(capsys.readouterr().out.splitlines()) == 2
    edit_twin(
        folder,
        lambda nb: setattr(
            nb.cells[3],
            "outputs",
            [
                nbformat.v4.new_output(
                    "stream",
                    name="stdout",
                    text="Still all in English here\nAnd this line as well\n",
                )
            ],
        ),
    )
    assert editions.main(["english", str(twin)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "cell 4 (c03): Still all in English here",
        "cell 4 (c03): And this line as well",
    ]
    source = nbformat.read(english(folder), as_version=4)
    source.cells[2].source += " Only leaves."
    nbformat.write(source, english(folder))
    assert editions.main(["todo", str(twin)]) == 0
    assert "叶子节点" in capsys.readouterr().out  # the translation to revise, readable
    for wrong in ([], ["nope"], ["english"], ["todo"]):
        assert editions.main(wrong) == 2
        assert "python -m tooling.editions check" in capsys.readouterr().out


def test_the_committed_twins_carry_marks_this_module_recognises():
    folder = ROOT / "notebooks"
    twin = folder / "zh" / "01_leaf_nodes.ipynb"
    source = {c.get("id"): c.source for c in nbformat.read(folder / twin.name, as_version=4).cells}
    marks = [
        (c.metadata.get("translation", {}).get("en"), source.get(c.get("id")))
        for c in nbformat.read(twin, as_version=4).cells
        if c.cell_type == "markdown"
    ]
    assert sum(mark == english_hash(text) for mark, text in marks if mark) > len(marks) // 2


def _english_code(folder, source):
    """Give 01_a's code cell (cell 4, c03) a new source."""
    nb = nbformat.read(english(folder), as_version=4)
    nb.cells[3].source = source
    nbformat.write(nb, english(folder))


CODE = 'x = 2  # the answer\nprint(f"the answer is {x:.1f}", x)'
CODE_ZH = {"# the answer": "# 答案", 'f"the answer is {x:.1f}"': 'f"答案是 {x:.1f}"'}


def test_a_twins_code_says_its_comments_and_printed_strings_in_chinese(folder):
    _english_code(folder, CODE)
    twin = translated_twin(folder)
    where = "zh/01_a.ipynb cell 4 (c03)"
    assert todo(twin) == {"code": dict.fromkeys(CODE_ZH, "")}
    assert problems(english(folder)) == [
        f"{where}: 2 comment(s) or printed string(s) untranslated: # the answer"
    ]
    first, second = list(CODE_ZH.items())
    translate(twin, {"code": dict([first])})
    translate(twin, {"code": dict([second])})  # the first translation stays
    code = nbformat.read(twin, as_version=4).cells[3].source
    assert code == 'x = 2  # 答案\nprint(f"答案是 {x:.1f}", x)'
    assert todo(twin) == {} and problems(english(folder)) == []
    build_twin(english(folder))  # a rebuild keeps the words
    assert nbformat.read(twin, as_version=4).cells[3].source == code
    _english_code(folder, CODE + "  # and more")
    build_twin(english(folder))
    assert todo(twin) == {"code": {"# and more": ""}}


def test_a_twins_code_cannot_drift_under_its_translated_words(folder):
    _english_code(folder, CODE)
    twin = translated_twin(folder)
    translate(twin, {"code": CODE_ZH})
    where = "zh/01_a.ipynb cell 4 (c03)"
    edit_twin(
        folder, lambda nb: setattr(nb.cells[3], "source", nb.cells[3].source.replace("2", "3"))
    )
    assert problems(english(folder)) == [f"{where}: its code differs from the English; make zh"]
    edit_twin(
        folder, lambda nb: setattr(nb.cells[3], "source", nb.cells[3].source.replace("3", "2"))
    )
    assert problems(english(folder)) == []
    edit_twin(
        folder,
        lambda nb: setattr(nb.cells[3], "source", nb.cells[3].source.replace("答案是", "是")),
    )
    assert problems(english(folder)) == [
        f"{where}: its comments or printed strings are not its translations; make zh"
    ]
    build_twin(english(folder))
    edit_twin(folder, lambda nb: nb.metadata.translation.code.update({"# the answer": "答案"}))
    assert problems(english(folder))[0] == (
        "zh/01_a.ipynb: '# the answer' is translated as '答案', not as one comment or string"
    )


def test_translated_words_keep_a_folded_cells_title_and_every_cells_words(folder):
    nb = nbformat.read(english(folder), as_version=4)
    nb.cells[3].source = CODE
    solution = nbformat.v4.new_markdown_cell("**Solution.** Try it first.")
    answer = nbformat.v4.new_code_cell("y = 3  # the solution")
    solution.id, answer.id = "c05", "c06"
    nb.cells += [solution, answer]
    nbformat.write(nb, english(folder))
    course.sync_notebook(english(folder))  # folds the solution under its title line
    twin = translated_twin(folder)
    assert translate(twin, {"c05": "**解答。** 先自己试试。"}) == ["c05"]
    assert translate(twin, {"code": {"# the solution": "# 解答"}}) == ["code"]
    assert translate(twin, {"code": CODE_ZH}) == ["code"]  # the words of another cell
    title = course.HIDDEN_TITLES_BY_EDITION["zh"]["solution"]
    translated = nbformat.read(twin, as_version=4)
    assert translated.cells[6].source == f"# @title {title}\ny = 3  # 解答"
    assert editions.code_words(translated) == {**CODE_ZH, "# the solution": "# 解答"}
    assert problems(english(folder)) == []


def test_words_no_cell_says_any_more_leave_the_twin(folder):
    _english_code(folder, CODE)
    twin = translated_twin(folder)
    translate(twin, {"code": CODE_ZH})
    _english_code(folder, "x = 2")
    build_twin(english(folder))
    assert editions.code_words(nbformat.read(twin, as_version=4)) == {}


def test_translate_refuses_words_only_the_setup_cell_says(folder):
    from tooling import code_text

    said = [t.text for t in code_text.texts(course.setup_cell_source("en"))]
    comment = next(t for t in said if t.startswith("#"))
    twin = translated_twin(folder)
    with pytest.raises(KeyError, match="no cell of its code says"):
        translate(twin, {"code": {comment: "# 设置"}})


@pytest.mark.parametrize(
    ("words", "error", "says"),
    [
        ({"# not in the code": "# 无"}, KeyError, "no cell of its code says '# not in the code'"),
        ({"# the answer": "答案"}, ValueError, "a comment must stay one comment"),
        ({'f"the answer is {x:.1f}"': 'f"答案是 {x}"'}, ValueError, "the same {fields}"),
    ],
)
def test_translate_refuses_words_the_code_does_not_say_or_of_another_kind(
    folder, words, error, says
):
    _english_code(folder, CODE)
    twin = translated_twin(folder)
    before = twin.read_text(encoding="utf-8")
    with pytest.raises(error, match=re.escape(says)):
        translate(twin, {"code": words})
    assert twin.read_text(encoding="utf-8") == before


def _figure_png(losses, chinese=False):
    import base64

    from helpers import language
    from helpers.ranks import split_display

    language.set_language("zh" if chinese else "en")
    try:
        figure = split_display.loss_figure(losses, losses)
        return base64.b64encode(figure.png()).decode()
    finally:
        language.set_language("en")


def test_a_figure_may_say_its_words_in_chinese_when_it_shows_the_same_data(folder):
    english_png, chinese_png = _figure_png([1.0, 0.5]), _figure_png([1.0, 0.5], chinese=True)
    other_data = _figure_png([1.0, 0.4], chinese=True)
    assert english_png != chinese_png
    (folder.parent / "LIST.md").write_text("list")
    source = nbformat.read(english(folder), as_version=4)
    source.cells[3].outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": english_png})
    ]
    nbformat.write(source, english(folder))
    twin = translated_twin(folder)

    def shown(png):
        nb = nbformat.read(twin, as_version=4)
        nb.cells[3].outputs[0].data["image/png"] = png
        nbformat.write(nb, twin)
        return problems(english(folder))

    where = "zh/01_a.ipynb cell 4 (c03), output 1"
    assert shown(chinese_png) == []
    assert shown(other_data) == [f"{where}: its picture (image/png) is not the English"]
    svg = '<svg><text>{words}</text><image href="data:image/png;base64,{png}"/></svg>'
    snapshot = _twin_picture(folder, svg, words="steps", png=english_png)
    assert snapshot(words="步骤", png=chinese_png) == []
    assert snapshot(words="步骤", png=other_data) == [
        f"{where}: a picture inside its snapshot is not the English"
    ]


def _png_with(text_chunks: dict[str, str]) -> bytes:
    import io

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    for key, value in text_chunks.items():
        info.add_text(key, value)
    out = io.BytesIO()
    Image.new("RGB", (4, 3), "white").save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def test_a_pictures_data_fingerprint_is_read_however_its_base64_is_written():
    import base64

    png = _png_with({"Software": "course", "Data": "loss 1.0 0.5"})
    plain = base64.b64encode(png).decode()
    assert editions._png_data(plain) == "loss 1.0 0.5"
    assert editions._png_data(base64.encodebytes(png).decode()) == "loss 1.0 0.5"  # 76 a line
    assert editions._png_data(f"data:image/png;base64,{plain}") == "loss 1.0 0.5"
    assert editions._png_data(base64.b64encode(_png_with({"Software": "x"})).decode()) is None
    assert editions._png_data(base64.b64encode(b"GIF89a").decode()) is None
    assert editions._png_data("not base64 at all!") is None


#: English a helper once spliced into the Chinese edition's outputs, each a pattern of a line a
#: native reader met: the grad column, compare_models' note, 07's wire log and cosine range,
#: 07b's scaler and buckets, 09c's event chain and saved values, 10b's verdicts and hook chain,
#: 00's check.
SPLICED = {
    "grad column": r"\bshape \[[\d, ]*\], norm \d",
    "compared runs": r"\d+ of \d+ the same|个在「?[A-Za-z_ ]+」?和",
    "wire log": r"rank \d → rank \d\s+(activation|gradient) ",
    "cosine range": r"[+-]\d\.\d\d to [+-]\d",
    "who scaled": r"the engine \(scale_grads",
    "buckets": r"bucket \d+: \d+ bytes",
    "compile events": r"forward compiled|backward called|backward compiled",
    "saved mark": r"\[saved for backward\]",
    "hook chain": r"module hook \(|post-accumulate hook \(",
    "verdicts": r"'left out'",
    "environment check": r"^(All set\.|Check: )",
}


def spliced_english(path) -> list[str]:
    """The output lines of a twin that carry English a helper spliced in (SPLICED)."""
    found = []
    for n, cell in enumerate(nbformat.read(path, as_version=4).cells, start=1):
        for output in cell.get("outputs", []):
            text = output.get("text", "") + output.get("data", {}).get("text/plain", "")
            for line in text.splitlines():
                found += [
                    f"{path.name} cell {n} ({what}): {line.strip()[:100]}"
                    for what, pattern in SPLICED.items()
                    if re.search(pattern, line)
                ]
    return found


def test_no_twin_output_carries_english_a_helper_spliced_in():
    found = [line for path in NOTEBOOKS for line in spliced_english(twin_path(path))]
    assert found == [], "\n".join(found)


def test_a_term_written_in_another_form_is_found_outside_code():
    assert editions.other_forms("读取中间张量的梯度，而 `中间张量` 在代码里不算。") == [
        "中间张量 → 中间变量"
    ]
    assert editions.other_forms("黑塞矩阵（Hessian）乘以 v；`torch.func.hessian`") == []
    assert editions.other_forms("完整的 Hessian 矩阵") == ["Hessian → 黑塞矩阵"]
    link = "[06 · 拆分的反向传播](06_split_backward_three_models.ipynb)"
    assert editions.other_forms(f"见 {link}") == [
        "[06 · 拆分的反向传播] → [06 · 拆分反向传播](06_split_backward_three_models.ipynb)"
    ]
    assert editions.other_forms("Adam 的滑动平均；微批量") == []
    assert editions.other_forms("批归一化会更新它的滑动平均") == [
        "批归一化会更新它的滑动平均 → 滑动统计量"
    ]


def test_the_chinese_edition_writes_each_term_one_way():
    found = [
        f"{where}: {form}"
        for where, text in editions.chinese_edition_text().items()
        for form in editions.other_forms(text)
    ]
    assert found == [], "\n".join(found)
