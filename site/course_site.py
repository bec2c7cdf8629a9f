"""The course website's Sphinx extension (site/conf.py loads it).

- Every page links to its twin in the other edition and, for a notebook, to the notebook in Colab
  and Binder (tooling.course.colab_url and binder_url, with the page's edition).
- Links in a notebook that leave its edition resolve to the site's page of the twin (en's
  `zh/00_start_here.ipynb`, zh's `../00_start_here.ipynb`) or, for a file of the repository that is
  not a notebook (`../COMPATIBILITY.md`), to the file on GitHub; an anchor set in the notebook's
  own HTML (`<a id="...">`) resolves to itself. Anything else stays for MyST to report.
- The Chinese search index knows the glossary's terms as words (jieba's user dictionary), and its
  JavaScript finds its stemmer (`ChineseSearch`).
- Every picture of a notebook's output has a text alternative: the text form its output carries
  (`picture_alternative`; the course's graphs and figures describe themselves in text/plain), so a
  screen reader says what the picture shows, not the name of its file.
- A folded cell's summary is named by its own words ("Answer: ..."), not by an aria-label that
  hides them from speech input.
- Heading anchors are JupyterLab's (`## Tidy up` -> `#Tidy-up`), so a notebook's links to its own
  headings work on the site as they do in JupyterLab.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import posixpath
import re
import subprocess
import urllib.parse
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.search.zh import SearchChinese
from sphinx.transforms.post_transforms import SphinxPostTransform

from tooling.course import (
    BRANCH,
    EDITIONS,
    NOTEBOOKS,
    REPOSITORY,
    ROOT,
    binder_url,
    colab_url,
    course_notebooks,
    glossary,
    site_url,
)

__all__ = [
    "TEXT",
    "ChineseSearch",
    "book_name",
    "book_url",
    "jupyter_anchor",
    "page_links",
    "picture_alternative",
    "picture_alternatives",
    "pinned_torch",
    "provenance",
    "releases_passing",
    "resolve_link",
    "search_terms",
    "setup",
]

#: The site's own words, per edition (the notebooks carry everything else).
TEXT = {
    "en": {
        "language": "English",
        "title": "How PyTorch autograd really works",
        "twin_title": "This page in English",
        "colab_title": "Open this notebook in Colab",
        "binder_title": "Open this notebook in JupyterLab on Binder",
        "hide": "Hide the cell",
        "show": "Show the cell",
        "intro": (
            "A numbered series of Jupyter notebooks that shows how PyTorch's autograd really "
            "works, by running it: why `.grad` is `None` on an intermediate tensor, what "
            "`detach()` and `clone()` do, why a second `backward()` fails, and how to pass "
            "gradients by hand between separately optimised models. Every claim is a cell that "
            "runs and checks itself; every picture is drawn from live tensors."
        ),
        "reading": (
            "These pages show each notebook as it ran, with its outputs. The interactive parts "
            "(sliders, toggles, quizzes) appear as the picture or text they start with; to use "
            "them, open the notebook in Colab or Binder with the links at the top of each page. "
            "Answers and solutions are folded: predict first, then open them."
        ),
        "contents": "The course",
        "elsewhere": "The notebooks, the helpers and the tests: [the repository]({repository}).",
        "book": (
            "The whole course as a book, to print or to read offline (`make pdf` prints it from "
            "these pages): [PDF, English]({en}), [PDF, 中文]({zh})."
        ),
        "made_by": "Outputs made by torch {pin}",
        "made_on": ", committed on {date}",
        "runs_on": "; this notebook also runs top to bottom on torch {releases}",
        "compatibility": "(the compatibility table)",
        "list_separator": ", ",
        "full_stop": ".",
        "report": "Report a problem with this page",
        "download": "Download this notebook",
        "issue_title": "Problem with {notebook} ({language} edition)",
        "issue_body": (
            "Page: {page}\nEdition: {language}\nOutputs made by torch {pin}\n"
            "My torch release (if I ran it): \n\nWhat is wrong:\n"
        ),
    },
    "zh": {
        "language": "中文",
        "title": "PyTorch autograd 到底如何工作",
        "twin_title": "这一页的中文版",
        "colab_title": "在 Colab 中打开这个笔记本",
        "binder_title": "在 Binder 上用 JupyterLab 打开这个笔记本",
        "hide": "收起单元格",
        "show": "展开单元格",
        "intro": (
            "一套编了号的 Jupyter 笔记本，通过实际运行代码来讲清 PyTorch 的 autograd（自动求导）"
            "到底如何工作：为什么中间张量的 `.grad` 是 `None`，`detach()` 和 `clone()` 究竟做了"
            "什么，为什么第二次 `backward()` 会失败，以及如何在分别优化的几个模型之间手动传递"
            "梯度。每个论断都是一个能运行、并检查自己的单元格；每张图都从真实的张量生成。"
        ),
        "reading": (
            "这些页面展示每个笔记本运行后的样子，连同输出。交互部分（滑块、开关、测验）显示为"
            "它们一开始的图片或文字；要动手操作，请用每页顶部的链接在 Colab 或 Binder 中打开"
            "笔记本。答案和解答是折叠的：先预测，再展开。"
        ),
        "contents": "课程",
        "elsewhere": "笔记本、helpers 和测试都在[代码仓库]({repository})中。",
        "book": (
            "整门课程也是一本书，可以打印或离线阅读（`make pdf` 从这些页面打印而成）："
            "[PDF，中文]({zh})，[PDF, English]({en})。"
        ),
        "made_by": "输出由 torch {pin} 生成",
        "made_on": "，提交于 {date}",
        "runs_on": "；这个笔记本也能在 torch {releases} 上从头运行到尾",
        "compatibility": "（兼容性表）",
        "list_separator": "、",
        "full_stop": "。",
        "report": "报告这一页的问题",
        "download": "下载这个笔记本",
        "issue_title": "{notebook} 有问题（{language}）",
        "issue_body": (
            "页面：{page}\n版本：{language}\n输出由 torch {pin} 生成\n"
            "我的 torch 版本（如果运行过）：\n\n问题是：\n"
        ),
    },
}

#: Pages every edition has besides the notebooks (Sphinx makes the last two).
COMMON_PAGES = ("index", "search", "genindex")


def book_name(edition: str) -> str:
    """The file name of an edition's PDF (site/pdf.py prints it; the site publishes it at its
    root): autograd-notebooks-en.pdf."""
    return f"autograd-notebooks-{edition}.pdf"


def book_url(edition: str) -> str:
    """Where the published site serves an edition's PDF."""
    return site_url() + book_name(edition)


def jupyter_anchor(title: str) -> str:
    """A heading's anchor as JupyterLab makes it: the title with spaces as hyphens."""
    return title.strip().replace(" ", "-")


def _site_folder(edition: str) -> str:
    """Where an edition's pages are, relative to the site's root ("." for English)."""
    return EDITIONS[edition] or "."


def _href(from_edition: str, to_edition: str, page: str) -> str:
    """The relative address of `page` of `to_edition`, from a page of `from_edition`."""
    target = posixpath.join(_site_folder(to_edition), page)
    return posixpath.relpath(target, _site_folder(from_edition))


def _notebook_names(edition: str) -> list[str]:
    return [p.name for p in course_notebooks(NOTEBOOKS / EDITIONS[edition])]


def page_links(edition: str, pagename: str) -> dict:
    """The links a page shows in its header: its twins, and Colab and Binder for a notebook.

    The home page opens the edition's first notebook (00_start_here) in Colab and Binder.
    """
    twins = []
    for other in EDITIONS:
        if other == edition:
            continue
        names = {Path(n).stem for n in _notebook_names(other)} | set(COMMON_PAGES)
        if pagename in names:
            twins.append(
                {
                    "lang": other,
                    "label": TEXT[other]["language"],
                    "title": TEXT[other]["twin_title"],
                    "href": _href(edition, other, f"{pagename}.html"),
                }
            )
    notebooks = _notebook_names(edition)
    notebook = f"{pagename}.ipynb" if f"{pagename}.ipynb" in notebooks else None
    if pagename == "index":
        notebook = notebooks[0]
    words = TEXT[edition]
    links = {
        "twins": twins,
        "colab": None,
        "binder": None,
        "colab_title": words["colab_title"],
        "binder_title": words["binder_title"],
    }
    if notebook:
        links["colab"] = colab_url(notebook, edition)
        links["binder"] = binder_url(notebook, edition)
    return links


def pinned_torch(constraints: Path = ROOT / "constraints.txt") -> str:
    """The torch release the committed outputs come from: the pin in constraints.txt."""
    found = re.search(r"^torch==([\w.+]+)", constraints.read_text(encoding="utf-8"), re.M)
    if found is None:
        raise ValueError(f"{constraints} pins no torch release (a line torch==X.Y.Z)")
    return found.group(1)


def releases_passing(notebook: str, table: Path = ROOT / "COMPATIBILITY.md") -> list[str]:
    """The torch releases on which `notebook` ran clean, read from COMPATIBILITY.md's row."""
    text = table.read_text(encoding="utf-8") if table.exists() else ""
    header = re.search(r"^\| notebook \| code hash \|(.*)\|$", text, re.M)
    row = re.search(rf"^\| `{re.escape(notebook)}` \| [^|]* \|(.*)\|$", text, re.M)
    if header is None or row is None:
        return []
    versions = [c.strip().removeprefix("torch ") for c in header.group(1).split("|")]
    cells = [c.strip() for c in row.group(1).split("|")]
    return [v for v, c in zip(versions, cells, strict=True) if c.startswith("pass")]


def _committed_on(path: Path) -> str | None:
    """The date of the last commit that changed `path` (YYYY-MM-DD), or None outside git."""
    try:
        found = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", str(path)],
            cwd=ROOT, capture_output=True, text=True, timeout=30, check=False,
        ).stdout.strip()  # fmt: skip
    except OSError:
        return None
    return found or None


def provenance(edition: str, pagename: str) -> dict | None:
    """Where a notebook's page stands: the torch release and date of its outputs, the releases
    it also runs on (COMPATIBILITY.md), a prefilled issue about the page and its download."""
    notebook = f"{pagename}.ipynb"
    if notebook not in _notebook_names(edition):
        return None
    words, pin = TEXT[edition], pinned_torch()
    path = NOTEBOOKS / EDITIONS[edition] / notebook
    line = words["made_by"].format(pin=pin)
    date = _committed_on(path)
    if date:
        line += words["made_on"].format(date=date)
    others = [r for r in releases_passing(notebook) if r != pin]
    if others:
        line += words["runs_on"].format(releases=words["list_separator"].join(others))
    language = words["language"]
    page = site_url(notebook, edition)
    query = urllib.parse.urlencode(
        {
            "title": words["issue_title"].format(notebook=notebook, language=language),
            "body": words["issue_body"].format(page=page, language=language, pin=pin),
        }
    )
    return {
        "line": line,
        "compatibility": words["compatibility"],
        "full_stop": words["full_stop"],
        "compatibility_href": f"{REPOSITORY}/blob/{BRANCH}/COMPATIBILITY.md",
        "report": words["report"],
        "report_href": f"{REPOSITORY}/issues/new?{query}",
        "download": words["download"],
        "download_href": notebook,
    }


_RAW_ID = r"""\bid\s*=\s*["']{}["']"""


def resolve_link(edition: str, docname: str, target: str, raw_html: str = "") -> str | None:
    """Where a notebook's link that Sphinx cannot resolve leads on the site, or None.

    `target` is the link as written in notebook `docname` of `edition`; `raw_html` is the HTML the
    notebook's Markdown holds (for anchors it sets with `<a id=...>`).
    """
    if target.startswith("#") or not re.search(r"[/.#]", target):
        # "#anchor", or the bare id MyST keeps of an id link it could not resolve
        anchor = target.removeprefix("#")
        return f"#{anchor}" if re.search(_RAW_ID.format(re.escape(anchor)), raw_html) else None
    path, _, fragment = target.partition("#")
    here = posixpath.dirname(posixpath.join("notebooks", EDITIONS[edition], f"{docname}.ipynb"))
    in_repository = posixpath.normpath(posixpath.join(here, path))
    suffix = f"#{fragment}" if fragment else ""
    for other in EDITIONS:
        folder = posixpath.normpath(posixpath.join("notebooks", EDITIONS[other]))
        name = posixpath.basename(in_repository)
        if posixpath.dirname(in_repository) == folder and name in _notebook_names(other):
            page = Path(name).with_suffix(".html").name
            return _href(edition, other, page) + suffix
    if not in_repository.startswith("..") and (ROOT / in_repository).is_file():
        return f"{REPOSITORY}/blob/{BRANCH}/{in_repository}{suffix}"
    return None


class LinksOutOfTheEdition(SphinxPostTransform):
    """Resolve the links `resolve_link` knows, before MyST reports what is left unresolved."""

    default_priority = 5  # MyST's reference resolver runs at 9

    def run(self, **kwargs) -> None:
        edition = self.config.course_edition
        raw_html = "\n".join(n.astext() for n in self.document.findall(nodes.raw))
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst" or node.get("refdomain"):
                continue
            uri = resolve_link(edition, self.env.docname, node["reftarget"], raw_html)
            if uri is None:
                continue
            reference = nodes.reference("", "", *node.children, refuri=uri, internal=True)
            node.replace_self(reference)


#: Output forms myst-nb shows as a picture, and how it writes each picture's file (its name is the
#: SHA-256 of these bytes: myst_nb.core.render.NbElementRenderer.render_image).
_PICTURES = {
    "image/svg+xml": lambda content: os.linesep.join(content.splitlines()).encode("utf-8"),
    "image/png": lambda content: base64.b64decode(content),
}
#: Forms a page shows before a picture (site/conf.py never shows the widget view).
_SHOWN_BEFORE_A_PICTURE = ("text/html",)
_TREE = re.compile(r"^[\s│├└─]+")


def picture_alternative(text: str) -> str:
    """What a picture says, in one line, from the text form its output carries: a graph's summary
    and then its nodes in the order the text tree lists them ("y scalar (output), SumBackward0
    (function), ..."); a figure's description ("[figure: loss curves ...]") as a sentence."""
    text = text.strip()
    if text.startswith("[figure:") and text.endswith("]"):
        return "Figure: " + text[len("[figure:") : -1].strip()
    lines = [_TREE.sub("", line).strip() for line in text.splitlines()]
    lines = [re.sub(r"<([^<>]+)>", r"(\1)", re.sub(r"\s+", " ", line)) for line in lines if line]
    if not lines:
        return ""
    said = lines[0]
    for k, line in enumerate(lines[1:]):
        if said.endswith((".", ":", ";")):
            said += " "
        else:  # the first line is the summary, the rest a list
            said += ": " if k == 0 else ", "
        said += line
    return said


def picture_alternatives(nb: dict) -> dict[str, str]:
    """Each picture a notebook's page shows, by the name myst-nb gives its file (without the
    extension), mapped to its alternative (`picture_alternative` of the output's text/plain)."""
    found = {}
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if any(form in data for form in _SHOWN_BEFORE_A_PICTURE):
                continue
            form = next((f for f in _PICTURES if f in data), None)
            if form is None:
                continue
            content = data[form] if isinstance(data[form], str) else "".join(data[form])
            name = hashlib.sha256(_PICTURES[form](content)).hexdigest()
            text = data.get("text/plain", "")
            found[name] = picture_alternative(text if isinstance(text, str) else "".join(text))
    return found


class PictureAlternatives(SphinxPostTransform):
    """Give each picture of a notebook's outputs its alternative (`picture_alternatives`)."""

    default_priority = 10
    formats = ("html",)

    def run(self, **kwargs) -> None:
        source = Path(self.env.doc2path(self.env.docname))
        if source.suffix != ".ipynb":
            return
        alternatives = picture_alternatives(json.loads(source.read_text(encoding="utf-8")))
        for image in self.document.findall(nodes.image):
            name = Path(image["uri"]).stem
            if alternatives.get(name):
                image["alt"] = alternatives[name]


def visit_folded_cell(self, node) -> None:
    """myst-nb's folded cell, with a summary named by its visible words: myst-nb's own
    `aria-label="Toggle hidden content"` replaced them for a screen reader and failed WCAG 2.5.3
    (label in name) on every folded answer."""
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n<summary>\n')
    for state, prompt in (("collapsed", "prompt_show"), ("expanded", "prompt_hide")):
        words = html.escape(node[prompt])
        self.body.append(f'<p class="{state} admonition-title">{words}</p>\n')
    self.body.append("</summary>\n")


def depart_folded_cell(self, node) -> None:
    self.body.append("</details>\n")


def add_page_links(app: Sphinx, pagename: str, templatename: str, context: dict, doctree):
    """Give the templates the page's links (course-links.html shows them)."""
    links = page_links(app.config.course_edition, pagename)
    context["course_links"] = links
    context["course_provenance"] = provenance(app.config.course_edition, pagename)
    alternates = "".join(
        f'<link rel="alternate" hreflang="{t["lang"]}" href="{t["href"]}" />\n'
        for t in links["twins"]
    )
    context["metatags"] = context.get("metatags", "") + alternates


def search_terms() -> str:
    """The glossary's Chinese terms as a jieba user dictionary (word, frequency, part of speech)."""
    return "".join(f"{term['zh']} 100000 n\n" for term in glossary())


def teach_search_the_glossary(app: Sphinx, config) -> None:
    """For the Chinese index: write `search_terms` where Sphinx keeps its state, and use it."""
    if config.html_search_language != "zh":
        return
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # it reports loading its dictionary on stderr
    path = Path(app.doctreedir) / "search-terms.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(search_terms(), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(path)}


class ChineseSearch(SearchChinese):
    """Sphinx's Chinese search index, with the stemmer its JavaScript can find.

    Sphinx 9.0 names the stemmer after the language (`window.Stemmer = ChineseStemmer`) but ships
    the English one for Chinese (Latin words in Chinese text), so every page of the edition threw
    "ChineseStemmer is not defined" and search found nothing (sphinx-doc/sphinx#14229, fixed by
    #14416, not yet released in 9.0.4). The name below only picks the stemmer's class.
    """

    language_name = "English"


def setup(app: Sphinx) -> dict:
    app.add_config_value("course_edition", "en", "env", types=[str])
    app.add_search_language(ChineseSearch)
    app.connect("config-inited", teach_search_the_glossary)
    app.add_post_transform(LinksOutOfTheEdition)
    app.add_post_transform(PictureAlternatives)
    app.add_node(HideCodeCellNode, override=True, html=(visit_folded_cell, depart_folded_cell))
    app.connect("html-page-context", add_page_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
