"""`make pdf`: the course as one PDF per edition (site/pdf.py), checked as a printed book.

Both books are printed once for the module, from the session's build of the site (conftest.py). For
each: every notebook is a chapter of the PDF's outline, in course order, with its sections; every
folded answer and solution is gathered at its chapter's end; the glossary closes the book; every
font is embedded and is one of the book's fonts, and every character of the book is in one of them
(so none is printed as a missing-glyph box); the SVG pictures stay vectors (the only images in the
PDF are the notebooks' PNG figures); nothing is wider than the page; the page count is within its
bound. Pictures of a few pages: .artifacts/screenshots/pdf-*.png.
"""

from __future__ import annotations

import json
import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

from tests.support.site_modules import load_site_module
from tooling.course import EDITIONS, HIDE_TAG, NOTEBOOKS, course_notebooks

pytestmark = pytest.mark.browser

pypdf = pytest.importorskip("pypdf", reason="the PDF tests need pypdf: pip install -e '.[dev]'")
pdfium = pytest.importorskip("pypdfium2", reason="the PDF tests need pypdfium2 (.[dev])")
TTFont = pytest.importorskip("fontTools.ttLib").TTFont

ROOT = Path(__file__).resolve().parents[2]
#: Pages per edition: the course is about 335 pages today (338 in English, 331 in Chinese, with
#: 05b). Fewer than the floor means content went missing; more than the ceiling, that something
#: prints far larger than it should.
PAGES = (250, 420)
#: What one book may weigh (it is published beside the site).
MAX_MB = 25
#: Fonts the pictures ask for, not the text: the SVG figures name the generic `sans-serif`, which
#: Chromium draws in Liberation Sans (its stand-in for Arial) here.
PICTURE_FONTS = ["Liberation Sans"]
PICTURES = {"en/first": 0, "en/chapter": 5, "zh/contents": 1, "zh/graph": 30}


@pytest.fixture(scope="module")
def pdf_module():
    return load_site_module("pdf")


@pytest.fixture(scope="module")
def books(tmp_path_factory, browser, pdf_module, site_build) -> dict:
    out = tmp_path_factory.mktemp("book")
    return pdf_module.build_pdfs(site_build["out"], out / "pdf", browser=browser)


def _outline(reader, items=None, depth=0) -> list[tuple[int, str]]:
    """The PDF's outline as (depth, title), in order."""
    found = []
    for item in reader.outline if items is None else items:
        if isinstance(item, list):
            found += _outline(reader, item, depth + 1)
        else:
            found.append((depth, item.title.strip()))
    return found


def _notebooks(edition: str) -> list[dict]:
    return [
        json.loads(p.read_text(encoding="utf-8"))
        for p in course_notebooks(NOTEBOOKS / EDITIONS[edition])
    ]


def _first_heading(nb: dict) -> str:
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and (m := re.search(r"^# (.+)$", source, re.M)):
            return m[1].strip()
    raise AssertionError("a notebook without a title")


def _squeezed(text: str) -> str:
    """Text without spaces, and with Sphinx's curly quotes straight again."""
    text = text.translate(str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"'}))
    return re.sub(r"\s+", "", text)


def _plain(markdown: str) -> str:
    return re.sub(r"[`*]", "", markdown).strip()


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_every_notebook_is_a_chapter_with_its_sections_in_course_order(books, edition):
    book = books[edition]
    reader = pypdf.PdfReader(book["pdf"])
    # (Chromium's outline joins a heading's wrapped lines without a space: compare without any.)
    outline = [(depth, _squeezed(title)) for depth, title in _outline(reader)]
    top = [title for depth, title in outline if depth == 0]
    titles = [_squeezed(_plain(_first_heading(nb))) for nb in _notebooks(edition)]
    chapters = [t for t in top if t in titles]
    assert chapters == titles, (top, titles)
    for chapter in book["chapters"]:  # each chapter's sections are in the outline, under it
        start = outline.index((0, _squeezed(chapter["title"])))
        end = next((i for i in range(start + 1, len(outline)) if outline[i][0] == 0), None)
        under = {title for _, title in outline[start + 1 : end]}
        sections = [s for s in chapter["sections"] if not str(s["id"]).endswith("--glossary")]
        missing = [s["title"] for s in sections if _squeezed(s["title"]) not in under]
        assert not missing, (chapter["title"], missing)
    assert top[-1].startswith(("Glossary", "术语表")), top[-1]


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_every_answer_and_solution_is_gathered_at_its_chapters_end(books, edition):
    for nb, chapter in zip(_notebooks(edition), books[edition]["chapters"], strict=True):
        folded = sum(HIDE_TAG in c.get("metadata", {}).get("tags", []) for c in nb["cells"])
        assert chapter["html"].count('class="book-answer"') == folded, chapter["title"]
        assert chapter["html"].count('class="book-answer-ref"') == folded, chapter["title"]
        if folded:
            where = chapter["html"].rindex
            assert where("book-answers") > where("book-answer-ref"), chapter["title"]
        assert "<details" not in chapter["html"] or "cell_output" in chapter["html"]


def _fonts(reader) -> dict[str, bool]:
    """Every font the PDF uses: its name (subset prefix dropped) -> whether it is embedded."""
    fonts = {}
    for page in reader.pages:
        resources = page.get("/Resources") or {}
        for font in (resources.get("/Font") or {}).values():
            font = font.get_object()
            descendants = font.get("/DescendantFonts")
            described = descendants[0].get_object() if descendants else font
            descriptor = described.get("/FontDescriptor")
            descriptor = descriptor.get_object() if descriptor else {}
            # A Type 3 font (Chromium's form for CJK outlines) is named by its descriptor.
            name = str(
                font.get("/BaseFont")
                or descriptor.get("/FontName")
                or descriptor.get("/FontFamily")
            )
            name = name.split("+")[-1].lstrip("/")
            embedded = font.get("/Subtype") == "/Type3" or any(
                k in descriptor for k in ("/FontFile", "/FontFile2", "/FontFile3")
            )
            fonts[name] = fonts.get(name, True) and embedded
    return fonts


def _font_file(family: str) -> Path:
    done = subprocess.run(
        ["fc-match", "-f", "%{family}\n%{file}", family], capture_output=True, text=True
    )
    found, path = done.stdout.split("\n", 1)
    assert family in found.split(","), f"the book's font {family!r} is not installed ({found})"
    return Path(path.strip())


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_every_font_is_embedded_and_every_character_has_a_glyph(books, pdf_module, edition):
    reader = pypdf.PdfReader(books[edition]["pdf"])
    fonts = _fonts(reader)
    assert fonts and all(fonts.values()), {n: e for n, e in fonts.items() if not e}
    families = [f for stack in pdf_module.FONTS.values() for f in stack]
    ours = {re.sub(r"[^A-Za-z]", "", f).lower() for f in [*families, *PICTURE_FONTS]}
    others = [n for n in fonts if not any(o in re.sub(r"[^A-Za-z]", "", n).lower() for o in ours)]
    assert not others, f"fonts other than the book's were used (a fallback for a glyph): {others}"
    covered = set()
    for family in families:
        with TTFont(_font_file(family), fontNumber=0, lazy=True) as font:
            covered |= set(font.getBestCmap())
    text = books[edition]["text"]
    missing = sorted(
        {ch for ch in text if ord(ch) not in covered and unicodedata.category(ch)[0] not in "CZ"}
    )
    assert not missing, f"characters no font of the book has: {missing}"


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_svg_pictures_stay_vectors_and_nothing_is_wider_than_the_page(books, edition):
    book = books[edition]
    reader = pypdf.PdfReader(book["pdf"])
    images = set()
    for page in reader.pages:
        xobjects = (page.get("/Resources") or {}).get("/XObject") or {}
        for ref in xobjects.values():
            obj = ref.get_object()
            if obj.get("/Subtype") == "/Image":
                images.add(ref.idnum if hasattr(ref, "idnum") else id(obj))
    pngs = sum(
        "image/png" in o.get("data", {}) and "text/html" not in o.get("data", {})
        for nb in _notebooks(edition)
        for c in nb["cells"]
        for o in c.get("outputs", [])
    )
    # Each PNG figure is one image (a soft mask may come with it); no SVG became one.
    assert pngs <= len(images) <= 2 * pngs + 4, (len(images), pngs)
    assert not book["too_wide"], book["too_wide"][:10]


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_the_book_has_a_bounded_size_and_its_pages_look_printed(books, screenshots, edition):
    path = books[edition]["pdf"]
    reader = pypdf.PdfReader(path)
    assert PAGES[0] <= len(reader.pages) <= PAGES[1], len(reader.pages)
    assert path.stat().st_size < MAX_MB * 1e6, path.stat().st_size
    document = pdfium.PdfDocument(str(path))
    for name, index in PICTURES.items():
        if not name.startswith(edition):
            continue
        picture = document[index].render(scale=1.0).to_pil().convert("L")
        low, high = picture.getextrema()
        assert high - low > 100, f"page {index + 1} of the {edition} book looks blank"
        picture.save(screenshots / f"pdf-{name.replace('/', '-')}.png")


def test_the_readmes_and_the_site_link_both_books(pdf_module):
    course_site = load_site_module("course_site")
    build = load_site_module("build")
    for edition in EDITIONS:
        url = course_site.book_url(edition)
        assert url.endswith("/" + pdf_module.book_name(edition)), url
        for readme in ("README.md", "README.zh.md"):
            assert url in (ROOT / readme).read_text(encoding="utf-8"), (readme, edition)
        for home in EDITIONS:
            assert f"]({url})" in build.home_page(home), (home, edition)
