"""The course as a book: one PDF per edition, printed by Chromium from the built website.

    python site/pdf.py [--site DIR] [--out DIR] [--edition CODE ...]   (`make pdf`: into _site/pdf/)

Why Chromium and not Sphinx's LaTeX builder: the site already shows every output as the notebook
carries it (HTML tables, quizzes, widget snapshots, SVG graphs), and Chromium prints exactly that,
with the SVG pictures as vectors and Chinese in the Noto CJK fonts it already uses for the browser
tests. LaTeX would drop every HTML output to its plain-text form (the course's tables, quizzes and
checker messages are HTML) and needs a TeX distribution of several hundred MB with xeCJK.

How: the site is built (site/build.py, from the committed notebooks, never re-run) unless --site
names a built one, and served on 127.0.0.1. Each notebook page, in course order, becomes a chapter
(`CHAPTER`: its article, with the folded answers and solutions gathered at the chapter's end and
a line in their place that links to them, ids made unique across the book, links between pages
made links inside the book). Before them: a title page with where the outputs come from, and the
contents (every chapter and its sections, linked). After them: the glossary (notebook 00's). The
book is one HTML document printed once (A4, page numbers, the headings as the PDF's outline,
tagged for screen readers), with BOOK_CSS. Nothing is fetched from another host.
"""

from __future__ import annotations

import argparse
import functools
import html
import os
import shutil
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

#: How long the book's page may take to load its pictures (ms).
BOOK_LOAD_MS = 300_000

SITE_DIR = Path(__file__).resolve().parent
ROOT = SITE_DIR.parent
sys.path[:0] = [str(ROOT), str(SITE_DIR)]

from course_site import TEXT, book_name, pinned_torch  # noqa: E402

from tooling.course import EDITIONS, NOTEBOOKS, course_notebooks, site_url  # noqa: E402

__all__ = [
    "BOOK_CSS",
    "DEFAULT_OUT",
    "FONTS",
    "PRINTED_AS",
    "book_html",
    "book_name",
    "build_pdfs",
    "print_book",
]

DEFAULT_OUT = ROOT / "_site" / "pdf"
#: The Chromium that prints (the browser tests' own: AUTOGRAD_CHROMIUM, else Debian's).
CHROMIUM = Path(
    os.environ.get("AUTOGRAD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
)
#: The fonts the book is set in, first choice first: Latin, then Chinese (both families cover
#: what the other lacks). tests/test_pdf.py checks that every character of the book is in one
#: of them and that no other font was embedded.
FONTS = {
    "text": ["DejaVu Sans", "Noto Sans CJK SC"],
    "code": ["DejaVu Sans Mono", "Noto Sans Mono CJK SC"],
}
#: Characters the book prints as others: the checkers' colour emoji, which no font of the book
#: has (a print has no colour emoji font), as the check and cross marks DejaVu Sans has. The
#: messages keep their green and red.
PRINTED_AS = {"✅": "✔", "❌": "✘"}
#: A4 less the side margins `print_book` gives Chromium (15 mm each), in CSS pixels (96 per inch).
TEXT_WIDTH_PX = round((210 - 2 * 15) / 25.4 * 96)
#: The book's own words, per edition.
WORDS = {
    "en": {
        "contents": "Contents",
        "answers": "Answers and solutions",
        "see": "see {where}, {number}",
        "outputs": "Every output as committed, from torch {torch}.",
        "site": "The same course online: {url}",
    },
    "zh": {
        "contents": "目录",
        "answers": "答案与解答",
        "see": "见{where}第 {number} 条",
        "outputs": "所有输出均为提交时的输出，来自 torch {torch}。",
        "site": "在线阅读同一门课程：{url}",
    },
}


def _stack(names: list[str], fallback: str) -> str:
    return ", ".join(f'"{n}"' for n in names) + f", {fallback}"


BOOK_CSS = f"""
html {{ font-family: {_stack(FONTS["text"], "sans-serif")}; font-size: 10pt; line-height: 1.45;
        color: #1f2328; background: #fff; }}
code, pre, kbd, samp, .highlight pre {{ font-family: {_stack(FONTS["code"], "monospace")}; }}
pre, .highlight pre {{ white-space: pre-wrap; overflow-wrap: anywhere; font-size: 8pt;
        line-height: 1.35; margin: 0; }}
div.cell_input, div.highlight {{ background: #f6f8fa; border-left: 3px solid #d0d7de;
        padding: 4px 8px; margin: 6px 0; break-inside: avoid-page; }}
div.cell_output {{ margin: 4px 0 10px 0; }}
div.cell_output .output {{ break-inside: avoid-page; }}
div.cell_output pre {{ background: none; border: none; }}
img {{ max-width: 100%; height: auto; break-inside: avoid; }}
table {{ border-collapse: collapse; font-size: 8pt; max-width: 100%; }}
td, th {{ overflow-wrap: anywhere; padding: 1px 4px; }}
h1 {{ font-size: 20pt; break-before: page; margin-top: 0; }}
h2 {{ font-size: 14pt; break-after: avoid; }}
h3, h4 {{ font-size: 11pt; break-after: avoid; }}
a {{ color: #0550ae; text-decoration: none; }}
.book-title {{ break-before: auto; font-size: 28pt; margin-top: 60mm; }}
.book-cover p {{ font-size: 11pt; }}
.book-contents ol {{ list-style: none; padding-left: 0; }}
.book-contents ol ol {{ padding-left: 1.5em; font-size: 9pt; }}
.book-contents > ol > li {{ margin-top: 0.5em; font-weight: 600; }}
.book-contents > ol > li li {{ font-weight: normal; }}
.book-answer-ref {{ font-style: italic; color: #57606a; }}
.book-answers {{ break-before: page; }}
.book-answer {{ border-top: 1px solid #d0d7de; padding-top: 4px; margin-top: 8px; }}
.book-answer-title {{ font-weight: 600; }}
.book-provenance {{ color: #57606a; font-size: 8.5pt; border-top: 1px solid #d0d7de; }}
"""

#: A notebook's page as a chapter (run in the page): returns its title, sections and HTML.
CHAPTER = """([slug, words, printedAs]) => {
    const article = document.querySelector('article.bd-article').cloneNode(true);
    const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (const [from, to] of Object.entries(printedAs)) {
            if (node.nodeValue.includes(from)) node.nodeValue = node.nodeValue.replaceAll(from, to);
        }
    }
    article.querySelectorAll('a.headerlink, script, .prev-next-footer, .d-print-none, '
        + '.toggle-details__container').forEach(e => e.remove());
    const answers = [];
    article.querySelectorAll('details.hide').forEach((details, i) => {
        const number = i + 1;
        const summary = details.querySelector('summary');
        const title = summary.querySelector('.collapsed').textContent.trim();
        summary.remove();
        const answer = document.createElement('div');
        answer.className = 'book-answer';
        answer.id = `answer-${number}`;
        answer.innerHTML = `<p class="book-answer-title">${number}. ${title}</p>`
            + details.innerHTML;
        answers.push(answer.outerHTML);
        const ref = document.createElement('p');
        ref.className = 'book-answer-ref';
        const see = words.see.replace('{where}', words.answers).replace('{number}', number);
        ref.innerHTML = `${title} (<a href="#answer-${number}">${see}</a>)`;
        details.replaceWith(ref);
    });
    if (answers.length) {
        const block = document.createElement('section');
        block.className = 'book-answers';
        block.innerHTML = `<h2 id="answers">${words.answers}</h2>` + answers.join('');
        article.appendChild(block);
    }
    const footer = document.querySelector('.course-provenance');
    if (footer) {
        const p = document.createElement('div');
        p.className = 'book-provenance';
        p.textContent = footer.querySelector('p').textContent.trim();
        article.appendChild(p);
    }
    article.querySelectorAll('img').forEach(img => { img.setAttribute('src', img.src); });
    article.querySelectorAll('[id]').forEach(e => { e.id = `${slug}--${e.id}`; });
    const here = new URL(location.href);
    article.querySelectorAll('a[href]').forEach(a => {
        const url = new URL(a.getAttribute('href'), location.href);
        if (url.origin !== here.origin) return;
        const page = url.pathname.split('/').pop().replace(/\\.html$/, '');
        if (!/^[0-9]/.test(page)) { a.setAttribute('href', url.href); return; }
        const anchor = decodeURIComponent(url.hash.slice(1));
        a.setAttribute('href', anchor ? `#${page}--${anchor}` : `#chapter-${page}`);
    });
    const h1 = article.querySelector('h1');
    h1.id = `chapter-${slug}`;
    const sections = Array.from(article.querySelectorAll('h2'))
        .filter(h => !h.closest('.cell_output, .book-answer'))
        .map(h => ({id: h.id || h.closest('section[id]')?.id, title: h.textContent.trim()}));
    return {title: h1.textContent.trim(), sections, html: article.innerHTML};
}"""


#: What would run off the printed page: code, tables or pictures wider than the text, measured
#: as printed (A4 less the margins).
TOO_WIDE = """() => {
    const width = document.body.clientWidth;
    return Array.from(document.querySelectorAll('pre, table, img, div.output'))
        .filter(e => e.scrollWidth > e.clientWidth + 1
                     || e.getBoundingClientRect().width > width + 1)
        .map(e => `${e.tagName} ${Math.round(e.scrollWidth)} > ${e.clientWidth}: `
                  + (e.innerText || e.getAttribute('alt') || '').slice(0, 60));
}"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def _page_path(edition: str, page: str) -> str:
    sub = EDITIONS[edition]
    return f"{sub}/{page}.html" if sub else f"{page}.html"


def book_html(edition: str, chapters: list[dict], base: str) -> str:
    """The whole book as one HTML document: title page, contents, chapters, glossary."""
    words, site = WORDS[edition], TEXT[edition]
    glossary = f"{chapters[0]['slug']}--glossary"
    contents = "".join(
        f'<li><a href="#chapter-{c["slug"]}">{html.escape(c["title"])}</a><ol>'
        + "".join(
            f'<li><a href="#{s["id"]}">{html.escape(s["title"])}</a></li>'
            for s in c["sections"]
            if s["id"] and s["id"] != glossary
        )
        + "</ol></li>"
        for c in chapters
    )
    glossary_title = next(
        (s["title"] for s in chapters[0]["sections"] if s["id"] == glossary), None
    )
    if glossary_title:
        contents += f'<li><a href="#{glossary}">{html.escape(glossary_title)}</a></li>'
    body = "".join(f'<div class="book-chapter">{c["html"]}</div>' for c in chapters)
    lang = {"en": "en", "zh": "zh-CN"}[edition]
    return f"""<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8"><base href="{base}">
<title>{html.escape(site["title"])}</title>
<link rel="stylesheet" href="_static/pygments.css">
<style>{BOOK_CSS}</style></head><body>
<div class="book-cover"><h1 class="book-title" id="book-title">{html.escape(site["title"])}</h1>
<p>{html.escape(words["outputs"].format(torch=pinned_torch()))}</p>
<p>{html.escape(words["site"].format(url=site_url(edition=edition)))}</p></div>
<nav class="book-contents"><h1 id="book-contents">{words["contents"]}</h1><ol>{contents}</ol></nav>
{body}
<script>
  // The glossary (notebook 00's) closes the book, as a printed book's does.
  const glossary = document.getElementById({glossary!r});
  if (glossary) {{
    const appendix = document.createElement('div');
    appendix.className = 'book-chapter book-glossary';
    const heading = glossary.querySelector('h2');
    const h1 = document.createElement('h1');
    h1.innerHTML = heading.innerHTML;
    heading.replaceWith(h1);
    appendix.appendChild(glossary);
    document.body.appendChild(appendix);
  }}
</script>
</body></html>"""


def print_book(browser, base: str, edition: str, out: Path) -> dict:
    """Print one edition's book into `out`; what went into it (chapters, sections, seconds)."""
    start = time.monotonic()
    names = [p.stem for p in course_notebooks(NOTEBOOKS / EDITIONS[edition])]
    context = browser.new_context(locale={"en": "en-GB", "zh": "zh-CN"}[edition])
    elsewhere: list[str] = []

    def only_this_site(route):
        if route.request.url.startswith(base):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_site)
    page = context.new_page()
    chapters = []
    for name in names:
        page.goto(base + _page_path(edition, name), wait_until="load")
        chapter = page.evaluate(CHAPTER, [name, WORDS[edition], PRINTED_AS])
        chapters.append({"slug": name, **chapter})
    edition_base = base + (f"{EDITIONS[edition]}/" if EDITIONS[edition] else "")
    page.goto(edition_base + "index.html", wait_until="load")
    # the whole book in one page: every chapter's pictures load before "load" fires, which on a
    # busy 2-core machine takes longer than Playwright's default 30 s
    page.set_content(
        book_html(edition, chapters, edition_base), wait_until="load", timeout=BOOK_LOAD_MS
    )
    page.wait_for_function(
        "() => Array.from(document.images).every(i => i.complete)", timeout=BOOK_LOAD_MS
    )
    page.evaluate("document.fonts.ready")
    footer = (
        '<div style="font-size:7pt;width:100%;text-align:center;color:#57606a">'
        '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    page.pdf(
        path=str(out),
        format="A4",
        print_background=True,
        display_header_footer=True,
        header_template="<span></span>",
        footer_template=footer,
        margin={"top": "16mm", "bottom": "18mm", "left": "15mm", "right": "15mm"},
        outline=True,
        tagged=True,
    )
    page.emulate_media(media="print")
    page.set_viewport_size({"width": TEXT_WIDTH_PX, "height": 1000})
    text = page.evaluate("document.body.innerText")
    too_wide = page.evaluate(TOO_WIDE)
    context.close()
    if elsewhere:
        raise SystemExit(f"the {edition} book asked for other hosts: {elsewhere[:5]}")
    return {
        "pdf": out,
        "chapters": chapters,
        "text": text,
        "too_wide": too_wide,
        "seconds": time.monotonic() - start,
    }


def build_pdfs(
    site: Path, out: Path, editions: list[str] | None = None, browser=None
) -> dict[str, dict]:
    """Serve the built site `site` (its html/ folder) and print each edition's book into `out`,
    with `browser` (a Playwright Chromium) or one launched here."""
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site / "html"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        if browser is not None:
            return {e: _print(browser, base, e, out) for e in editions or list(EDITIONS)}
        from playwright.sync_api import sync_playwright

        if not CHROMIUM.exists():
            raise SystemExit(
                f"make pdf prints the site with Chromium, which is missing at {CHROMIUM}: "
                "`make browser-deps` or `sudo apt-get install chromium fonts-noto-cjk`"
            )
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-dev-shm-usage"]
            )
            try:
                return {e: _print(launched, base, e, out) for e in editions or list(EDITIONS)}
            finally:
                launched.close()
    finally:
        server.shutdown()
        server.server_close()


def _print(browser, base: str, edition: str, out: Path) -> dict:
    return print_book(browser, base, edition, out / book_name(edition))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a site built by site/build.py (default: build)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: _site/pdf/")
    parser.add_argument("--edition", action="append", choices=list(EDITIONS))
    args = parser.parse_args(argv)
    site = args.site
    if site is None:
        import build

        site = build.DEFAULT_OUT
        build.build(site)
    books = build_pdfs(site.resolve(), args.out.resolve(), args.edition)
    for edition, book in books.items():
        size = book["pdf"].stat().st_size / 1e6
        print(f"{edition}: {book['pdf']} ({size:.1f} MB, {book['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
