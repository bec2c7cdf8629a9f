"""The course website's pieces that need no build: its address, the links each page shows, the
links that leave an edition, what a page changes in a notebook, and where the site is published.
(tests/browser/test_site.py builds the site and reads every page in Chromium.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.site_modules import load_site_module
from tooling import course

ROOT = Path(__file__).resolve().parent.parent
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def site():
    return load_site_module("course_site")


@pytest.fixture(scope="module")
def build():
    return load_site_module("build")


def test_the_site_address_follows_the_one_repository_url():
    owner, name = course.REPOSITORY.removeprefix("https://github.com/").split("/")
    assert course.SITE == f"https://{owner}.github.io/{name}/"
    assert course.site_url() == course.SITE
    assert course.site_url(edition="zh") == course.SITE + "zh/"
    assert course.site_url("05_freeing_the_graph.ipynb", "zh") == (
        course.SITE + "zh/05_freeing_the_graph.html"
    )


def test_the_readme_names_the_site_and_how_to_build_it():
    readme = (ROOT / "README.md").read_text()
    assert course.SITE in readme
    assert "make site" in readme


def test_make_site_builds_into_an_ignored_folder_and_the_workflow_publishes_it():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^site: .*\n\t\$\(BIN\)/python site/build.py", makefile, re.M)
    assert re.search(r"^\.PHONY:.*\bsite\b", makefile, re.M)  # site/ is also a folder
    assert "_site/" in (ROOT / ".gitignore").read_text().splitlines()
    workflow = (ROOT / ".github" / "workflows" / "site.yml").read_text()
    assert "make site" in workflow and "path: _site/html" in workflow
    assert "actions/deploy-pages" in workflow
    assert "fetch-depth: 0" in workflow  # a page's commit date needs the notebook's history


def test_a_notebook_page_links_its_twin_and_colab_and_binder(site):
    name = "05_freeing_the_graph"
    en, zh = site.page_links("en", name), site.page_links("zh", name)
    assert [t["href"] for t in en["twins"]] == [f"zh/{name}.html"]
    assert [t["href"] for t in zh["twins"]] == [f"../{name}.html"]
    assert en["colab"] == course.colab_url(f"{name}.ipynb", "en")
    assert zh["colab"] == course.colab_url(f"{name}.ipynb", "zh")
    assert zh["binder"] == course.binder_url(f"{name}.ipynb", "zh")
    assert [t["label"] for t in en["twins"]] == ["中文"]
    assert [t["label"] for t in zh["twins"]] == ["English"]


def test_the_home_and_search_pages_have_twins_and_only_notebooks_open_in_colab(site):
    home = site.page_links("en", "index")
    assert home["twins"][0]["href"] == "zh/index.html"
    assert home["colab"] == course.colab_url("00_start_here.ipynb", "en")
    search = site.page_links("zh", "search")
    assert search["twins"][0]["href"] == "../search.html"
    assert search["colab"] is None and search["binder"] is None


@pytest.mark.parametrize(
    ("edition", "docname", "target", "expected"),
    [
        ("en", "00_start_here", "zh/00_start_here.ipynb", "zh/00_start_here.html"),
        ("zh", "00_start_here", "../00_start_here.ipynb", "../00_start_here.html"),
        (
            "zh",
            "03_detach_and_clone",
            "../03_detach_and_clone.ipynb#x",
            "../03_detach_and_clone.html#x",
        ),
        (
            "en",
            "00_start_here",
            "../COMPATIBILITY.md",
            f"{course.REPOSITORY}/blob/{course.BRANCH}/COMPATIBILITY.md",
        ),
        (
            "zh",
            "00_start_here",
            "../../COMPATIBILITY.md",
            f"{course.REPOSITORY}/blob/{course.BRANCH}/COMPATIBILITY.md",
        ),
        ("en", "01_leaf_nodes", "../NO_SUCH_FILE.md", None),  # left for MyST to report
        ("en", "01_leaf_nodes", "zh/99_no_such_notebook.ipynb", None),
        ("en", "01_leaf_nodes", "../../../etc/passwd", None),  # never outside the repository
    ],
)
def test_links_that_leave_the_edition(site, edition, docname, target, expected):
    assert site.resolve_link(edition, docname, target) == expected


def test_an_anchor_the_notebook_sets_in_html_resolves_only_if_it_is_there(site):
    raw = '<a id="Tidy-up"></a>'
    assert site.resolve_link("zh", "07_split_across_processes", "Tidy-up", raw) == "#Tidy-up"
    assert site.resolve_link("zh", "07_split_across_processes", "#Tidy-up", raw) == "#Tidy-up"
    assert site.resolve_link("zh", "07_split_across_processes", "Nowhere", raw) is None


def test_headings_get_jupyterlab_anchors(site):
    assert site.jupyter_anchor("Tidy up") == "Tidy-up"
    assert site.jupyter_anchor(" 1. The post's network ") == "1.-The-post's-network"


def test_the_chinese_search_knows_every_glossary_term(site):
    lines = site.search_terms().splitlines()
    assert [line.split()[0] for line in lines] == [t["zh"] for t in course.glossary()]
    assert site.ChineseSearch.language_name == "English"  # the stemmer its JavaScript ships


EVERY_NOTEBOOK = [
    (edition, path)
    for edition, sub in course.EDITIONS.items()
    for path in course.course_notebooks(course.NOTEBOOKS / sub)
]


@pytest.mark.parametrize(
    ("edition", "path"), EVERY_NOTEBOOK, ids=[f"{e}/{p.name}" for e, p in EVERY_NOTEBOOK]
)
def test_a_page_keeps_every_source_and_output_and_titles_the_folded_cells(build, edition, path):
    committed = json.loads(path.read_text(encoding="utf-8"))
    page = build.prepare_notebook(committed, edition)
    assert "widgets" not in page["metadata"]
    assert len(page["cells"]) == len(committed["cells"])
    titles = course.HIDDEN_TITLES_BY_EDITION[edition].values()
    for ours, theirs in zip(page["cells"], committed["cells"], strict=True):
        assert ours["source"] == theirs["source"] and ours.get("outputs") == theirs.get("outputs")
        tags = ours["metadata"].get("tags", [])
        generated = {course.BADGE_TAG, course.SETUP_TAG} & set(tags)
        assert ("remove-cell" in tags) == bool(generated), tags
        if course.HIDE_TAG in tags:
            assert ours["metadata"]["mystnb"]["code_prompt_show"] in titles
        for output in theirs.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:  # the page shows the snapshot: a picture or a table
                assert {"text/html", "image/svg+xml", "image/png"} & set(data), path.name
    assert committed == json.loads(path.read_text(encoding="utf-8"))  # the input is untouched


def test_the_home_page_lists_the_notebooks_in_course_order(build):
    for edition, sub in course.EDITIONS.items():
        text = build.home_page(edition)
        toctree = text[text.index("```{toctree}") :].split("```")[1]
        listed = [line for line in toctree.splitlines()[2:] if line]
        assert listed == [p.stem for p in course.course_notebooks(course.NOTEBOOKS / sub)]
        assert course.REPOSITORY in text


def test_the_pinned_torch_comes_from_the_constraints(site, tmp_path):
    assert re.fullmatch(r"\d+\.\d+\.\d+", site.pinned_torch())
    pins = tmp_path / "constraints.txt"
    pins.write_text("numpy==2.0.0\ntorch==9.8.7\n")
    assert site.pinned_torch(pins) == "9.8.7"
    pins.write_text("numpy==2.0.0\n")
    with pytest.raises(ValueError, match="pins no torch release"):
        site.pinned_torch(pins)


def test_the_releases_a_notebook_runs_on_come_from_the_compatibility_table(site, tmp_path):
    table = tmp_path / "COMPATIBILITY.md"
    table.write_text(
        "| notebook | code hash | torch 2.4.1 | torch 2.15.0 |\n|---|---|---|---|\n"
        "| `01_a.ipynb` | `abc` | pass 3.8 s | FAIL: RuntimeError |\n"
        "| `02_b.ipynb` | `def` | pass 3.1 s | pass 4.0 s |\n"
    )
    assert site.releases_passing("01_a.ipynb", table) == ["2.4.1"]
    assert site.releases_passing("02_b.ipynb", table) == ["2.4.1", "2.15.0"]
    assert site.releases_passing("03_c.ipynb", table) == []
    real = site.releases_passing("01_leaf_nodes.ipynb")
    assert len(real) >= 3, real  # the committed table: the releases tried


@pytest.mark.parametrize("edition", list(course.EDITIONS))
def test_a_notebook_page_says_where_it_stands(site, edition):
    from urllib.parse import parse_qs, urlsplit

    shown = site.provenance(edition, "05_freeing_the_graph")
    pin = site.pinned_torch()
    assert f"torch {pin}" in shown["line"]
    others = [r for r in site.releases_passing("05_freeing_the_graph.ipynb") if r != pin]
    assert site.TEXT[edition]["list_separator"].join(others) in shown["line"] and others
    assert re.search(r"\d{4}-\d{2}-\d{2}", shown["line"]), shown["line"]  # the commit's date
    report = urlsplit(shown["report_href"])
    assert f"{report.scheme}://{report.netloc}{report.path}" == f"{course.REPOSITORY}/issues/new"
    fields = parse_qs(report.query)
    assert "05_freeing_the_graph.ipynb" in fields["title"][0]
    body = fields["body"][0]
    assert course.site_url("05_freeing_the_graph.ipynb", edition) in body and pin in body
    assert site.TEXT[edition]["language"] in body
    assert shown["download_href"] == "05_freeing_the_graph.ipynb"
    assert site.provenance(edition, "index") is None  # not a notebook's page


def test_a_graph_picture_says_its_summary_and_its_nodes(site):
    text = (
        "autograd graph: 4 nodes, 3 edges (2 function, 1 leaf, 1 output)\n"
        "y [3]  <output>\n└── MulBackward0  <function>\n    └── AccumulateGrad  <function>\n"
        "        └── w [3]  <leaf>"
    )
    assert site.picture_alternative(text) == (
        "autograd graph: 4 nodes, 3 edges (2 function, 1 leaf, 1 output): y [3] (output), "
        "MulBackward0 (function), AccumulateGrad (function), w [3] (leaf)"
    )


def test_a_figure_picture_says_its_description_and_a_widget_its_state(site):
    assert site.picture_alternative("[figure: loss curves, 10 steps]") == (
        "Figure: loss curves, 10 steps"
    )
    widget = "Graph explorer: detach=False\n\nInteractive: run it.\nautograd graph: 2 nodes"
    assert site.picture_alternative(widget) == (
        "Graph explorer: detach=False: Interactive: run it. autograd graph: 2 nodes"
    )
    assert site.picture_alternative("  \n") == ""


def test_each_picture_is_found_by_the_name_its_file_gets(site):
    svg = '<svg xmlns="http://www.w3.org/2000/svg">\n<title>g</title>\n</svg>'
    png = "iVBORw0KGgo="  # base64 of a PNG's first bytes is enough for a name
    shown = [
        {"image/svg+xml": svg, "text/plain": "[figure: a]"},
        {"image/png": png, "text/plain": ["[figure: ", "b]"]},
        {"text/html": "<b>x</b>", "image/png": png},  # shown as HTML, not as a picture
    ]
    nb = {"cells": [{"cell_type": "code", "outputs": [{"data": data} for data in shown]}]}
    import base64
    import hashlib
    import os

    svg_name = hashlib.sha256(os.linesep.join(svg.splitlines()).encode()).hexdigest()
    png_name = hashlib.sha256(base64.b64decode(png)).hexdigest()
    assert site.picture_alternatives(nb) == {svg_name: "Figure: a", png_name: "Figure: b"}
