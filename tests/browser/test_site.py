"""The course website (`make site`) as a reader sees it: every page of both editions in Chromium.

The site is built once for the session (site/build.py: both editions, from the committed
notebooks, warnings as errors) into a temporary folder and served on 127.0.0.1; every request to
another host is refused and reported, so the pages are proved to work offline. For every page: it
loads without a script error or a failed request; no link to a page or an anchor of the site is
broken; every picture loads and has a size; each code cell shows its outputs in the form the
notebook's output carries (a widget's snapshot, never a widget placeholder); answers and solutions
are folded; the header links to the page's twin in the other edition and to the notebook in Colab
and Binder. Search finds pages in both languages. Every page, folded cells opened, in both colour
schemes (a Chinese notebook's page in the light one: its elements are its English twin's), has no
serious or critical violation of WCAG 2.1 A and AA by axe-core (pinned in
tests/browser/package.json, installed from npm by `make browser-deps`, injected from disk), and
every picture of an output has a text alternative that says what it shows. Each page loads once
and every check reads it in turn (TestEveryPage); the audit switches it from the light scheme to
the dark one as the theme's switch does. Screenshots: .artifacts/screenshots/site-*.png.
"""

from __future__ import annotations

import functools
import html
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.runners.compat import PIN  # the torch release the committed outputs come from
from tests.support.ci import skip_or_fail
from tests.support.site_modules import load_site_module
from tooling.course import (
    EDITIONS,
    HIDE_TAG,
    NOTEBOOKS,
    REPOSITORY,
    binder_url,
    colab_url,
    course_notebooks,
)

pytestmark = pytest.mark.browser

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser tests need Playwright: pip install -e '.[dev]'"
)

ROOT = Path(__file__).resolve().parents[2]
#: `make site` must stay quick: both editions on two cores (about 20 s here).
BUILD_BUDGET_S = 120
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: The form a page shows of an output: the first of these the output carries (site/conf.py drops
#: the widget view and JavaScript; the rest is myst-nb's order), and how the page marks it.
SHOWN_AS = {
    "text/html": "html",
    "image/svg+xml": "img",
    "image/png": "img",
    "image/gif": "img",
    "image/jpeg": "img",
    "text/markdown": "markdown",
    "text/latex": "latex",
    "text/plain": "text",
}
#: What JupyterLab, the widget manager or mystmd show where a widget cannot be drawn.
PLACEHOLDERS = re.compile(
    r"Loading widget|kernel connection is required|Error displaying widget", re.IGNORECASE
)
#: axe-core, as `make browser-deps` installs it (npm ci in tests/browser/, from its lock file).
AXE = ROOT / "tests" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
#: What the audit holds every page to: WCAG 2.1, levels A and AA.
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
#: The theme's two colour schemes, as its switch stores a reader's choice.
SCHEMES = ("light", "dark")
SCREENSHOT_PAGES = {
    "en/index": "site-en-home.png",
    "en/05_freeing_the_graph": "site-en-05_freeing_the_graph.png",
    "zh/index": "site-zh-home.png",
    "zh/03_detach_and_clone": "site-zh-03_detach_and_clone.png",
}


def _names(edition: str) -> list[str]:
    return [p.stem for p in course_notebooks(NOTEBOOKS / EDITIONS[edition])]


#: Every page of the site: each edition's home page, notebooks (in course order), search, index.
PAGES = [
    f"{edition}/{page}"
    for edition in EDITIONS
    for page in ["index", *_names(edition), "search", "genindex"]
]


def page_path(page_id: str) -> str:
    """The page's path in the site: "en/05_x" -> "05_x.html", "zh/05_x" -> "zh/05_x.html"."""
    edition, page = page_id.split("/")
    sub = EDITIONS[edition]
    return f"{sub}/{page}.html" if sub else f"{page}.html"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="session")
def site_url(site_build) -> str:
    """The built site, served on 127.0.0.1 by a thread of this process."""
    handler = functools.partial(_QuietHandler, directory=str(site_build["html"]))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class Reader:
    """One browser tab on the site; it records what a page did wrong while it loaded."""

    def __init__(self, context, base: str):
        self.base = base
        self.page = context.new_page()
        self.problems: list[str] = []
        self.page.on("pageerror", lambda err: self.problems.append(f"script error: {err}"))
        self.page.on(
            "console",
            lambda msg: msg.type == "error" and self.problems.append(f"console: {msg.text}"),
        )
        self.page.on(
            "response",
            lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"),
        )

    def open(self, path: str) -> None:
        self.problems.clear()
        response = self.page.goto(self.base + path, wait_until="load")
        assert response is not None and response.status == 200, (path, response)
        self.page.wait_for_load_state("networkidle")


@pytest.fixture(scope="session")
def site_context(browser, site_url):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB")
    context.add_init_script(f"localStorage.setItem('mode', '{SCHEMES[0]}');")
    elsewhere: list[str] = []

    def only_this_site(route):
        if route.request.url.startswith(site_url):
            route.continue_()
        else:  # the site must work offline: nothing may come from another host
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_site)
    try:
        yield context, elsewhere
    finally:
        context.close()


@pytest.fixture
def reader(site_context, site_url) -> Reader:
    context, _ = site_context
    tab = Reader(context, site_url)
    try:
        yield tab
    finally:
        tab.page.close()


# --- what each page should show, from the staged notebook it was built from -------------------


def staged_notebook(site_build, page_id: str) -> dict | None:
    edition, page = page_id.split("/")
    path = site_build["out"] / "editions" / edition / "source" / f"{page}.ipynb"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def shown_cells(nb: dict) -> list[dict]:
    """The code cells a page shows (in order), each with the forms its outputs are shown in."""
    cells = []
    for index, cell in enumerate(nb["cells"]):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] != "code" or "remove-cell" in tags:
            continue
        kinds, widgets = [], []
        for output in cell.get("outputs", []):
            if output["output_type"] == "stream":
                kinds.append("stream")
                continue
            if output["output_type"] == "error":
                kinds.append("error")
                continue
            data = output.get("data", {})
            kinds.append(next((SHOWN_AS[m] for m in SHOWN_AS if m in data), "nothing"))
            if WIDGET_VIEW in data:
                widgets.append(kinds[-1])
        cells.append(
            {"index": index, "kinds": kinds, "widgets": widgets, "folded": HIDE_TAG in tags}
        )
    return cells


PAGE_CELLS = """() => Array.from(document.querySelectorAll('.bd-article div.cell')).map(cell => {
    const out = cell.querySelector('.cell_output');
    const kinds = out ? Array.from(out.children).map(o =>
        o.tagName === 'IMG' ? 'img'
        : o.classList.contains('text_html') ? 'html'
        : o.classList.contains('stream') ? 'stream'
        : o.classList.contains('text_plain') ? 'text'
        : o.classList.contains('output') ? o.className
        : /^(P|UL|OL|H[1-6]|BLOCKQUOTE)$/.test(o.tagName) ? 'markdown'  // a text/markdown output,
        : o.tagName.toLowerCase())                                   // rendered in place
        .filter((kind, i, all) => !(kind === 'markdown' && all[i - 1] === 'markdown')) : [];
    const details = cell.querySelector(':scope > details.hide');
    return {kinds, folded: !!details, open: !!details && details.open,
            summary: details ? details.querySelector('summary').innerText.trim() : null,
            scripts: Array.from(cell.querySelectorAll('script')).map(s => s.type)};
})"""

PICTURES = """() => Array.from(document.images).map(i => ({
    src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0,
    width: i.getBoundingClientRect().width, height: i.getBoundingClientRect().height}))"""

OPEN_ALL = """() => document.querySelectorAll('details').forEach(d => { d.open = true; })"""
CLOSE_ALL = """() => document.querySelectorAll('details').forEach(d => { d.open = false; })"""

#: Outputs wider than their box at the test's 1280-pixel window: a table or picture cut off.
TOO_WIDE = """() => Array.from(document.querySelectorAll('.bd-article .cell_output > *'))
    .filter(o => o.scrollWidth > o.clientWidth + 1)
    .map(o => `${o.clientWidth} < ${o.scrollWidth}: ${o.innerText.slice(0, 60)}`)"""

LINKS = """() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"""


class LinkChecker:
    """Whether a same-site address exists, and whether its page has an anchor (cached)."""

    def __init__(self):
        self.pages: dict[str, tuple[int, str]] = {}

    def fetch(self, url: str) -> tuple[int, str]:
        if url not in self.pages:
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = response.read().decode("utf-8", "replace")
                    self.pages[url] = (response.status, body)
            except urllib.error.HTTPError as err:
                self.pages[url] = (err.code, "")
        return self.pages[url]

    def broken(self, url: str) -> str | None:
        address, _, fragment = url.partition("#")
        status, body = self.fetch(urllib.parse.urlsplit(address)._replace(query="").geturl())
        if status != 200:
            return f"{url}: HTTP {status}"
        anchor = urllib.parse.unquote(fragment)
        if anchor and not re.search(rf"""\bid=["']{re.escape(html.escape(anchor))}["']""", body):
            return f"{url}: no anchor #{anchor}"
        return None


@pytest.fixture(scope="session")
def link_checker() -> LinkChecker:
    return LinkChecker()


# --- the build ---------------------------------------------------------------------------------


def test_the_site_builds_both_editions_quickly_with_every_notebook(site_build):
    html_dir = site_build["html"]
    for page_id in PAGES:
        assert (html_dir / page_path(page_id)).is_file(), page_id
    assert site_build["seconds"] < BUILD_BUDGET_S, site_build["seconds"]
    # The home page lists the notebooks in course order (it is also the sidebar's contents).
    for edition in EDITIONS:
        home = (html_dir / page_path(f"{edition}/index")).read_text(encoding="utf-8")
        toctree = home[home.index('class="toctree-wrapper') :]
        listed = re.findall(r'href="([0-9][^"#]*)\.html"', toctree)
        assert listed[: len(_names(edition))] == _names(edition), listed


def test_the_staged_notebooks_keep_every_committed_source_and_output(site_build):
    build = load_site_module("build")
    for edition in EDITIONS:
        for path in course_notebooks(NOTEBOOKS / EDITIONS[edition]):
            committed = json.loads(path.read_text(encoding="utf-8"))
            staged = staged_notebook(site_build, f"{edition}/{path.stem}")
            assert staged == build.prepare_notebook(committed, edition)
            assert len(staged["cells"]) == len(committed["cells"]), path
            for ours, theirs in zip(staged["cells"], committed["cells"], strict=True):
                assert ours["source"] == theirs["source"], path
                assert ours.get("outputs") == theirs.get("outputs"), path


# --- every page in Chromium, loaded once and read by every check in turn ------------------------


@pytest.fixture(scope="class", params=PAGES)
def page_id(request) -> str:
    return request.param


@pytest.fixture(scope="class")
def opened(site_context, site_url, page_id) -> Reader:
    """The page `page_id`, as a reader opens it (in the light scheme, offline), for all the checks
    of TestEveryPage: pytest runs a page's checks one after another, so each page loads once."""
    context, elsewhere = site_context
    elsewhere.clear()
    tab = Reader(context, site_url)
    tab.open(page_path(page_id))
    try:
        yield tab
    finally:
        tab.page.close()


@pytest.fixture(scope="session")
def axe_source() -> str:
    if not AXE.is_file():
        skip_or_fail(
            f"the accessibility audit needs axe-core at {AXE.relative_to(ROOT)}: "
            "`make browser-deps` installs it (npm ci --prefix tests/browser)"
        )
    return AXE.read_text(encoding="utf-8")


AUDIT = """async (tags) => {
    const result = await axe.run(document, {runOnly: {type: 'tag', values: tags},
                                            resultTypes: ['violations']});
    return result.violations.map(v => ({rule: v.id, impact: v.impact, help: v.help,
        where: v.nodes.slice(0, 3).map(n => n.target.join(' ') + '  ' + n.html.slice(0, 120))}));
}"""


def serious(violations: list[dict]) -> list[str]:
    """The violations that fail the audit (serious or critical), one line each."""
    return [
        f"{v['rule']} ({v['impact']}): {v['help']}\n    " + "\n    ".join(v["where"])
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]


SCHEME_SWITCH = """(scheme) => {
    localStorage.setItem('mode', scheme);
    document.documentElement.dataset.mode = scheme;
    document.documentElement.dataset.theme = scheme;
}"""
BACKGROUND = "() => getComputedStyle(document.body).backgroundColor"


def show_scheme(page, scheme: str) -> None:
    """Switch the open page to `scheme` as the theme's switch does (its stored choice and the
    two attributes its style sheets follow), and check that the page's colours followed."""
    before = page.evaluate(BACKGROUND)
    page.evaluate(SCHEME_SWITCH, scheme)
    assert page.evaluate("document.documentElement.dataset.theme") == scheme
    assert page.evaluate(BACKGROUND) != before, f"the page did not turn {scheme}"


PICTURE_ALTERNATIVES = """() => Array.from(document.querySelectorAll('.bd-article img'))
    .map(i => ({src: i.getAttribute('src'), alt: i.getAttribute('alt')}))"""


class TestEveryPage:
    """Every page of both editions (PAGES), each loaded once."""

    def test_it_shows_everything_offline(
        self, site_build, site_context, opened, link_checker, screenshots, page_id
    ):
        _, elsewhere = site_context
        path = page_path(page_id)
        edition, page = page_id.split("/")
        page_handle = opened.page
        text = page_handle.evaluate("() => document.body.textContent")  # folded cells too
        assert not PLACEHOLDERS.search(text), PLACEHOLDERS.search(text).group(0)
        scripts = page_handle.evaluate(
            "() => Array.from(document.querySelectorAll('script[type]')).map(s => s.type)"
        )
        assert not [s for s in scripts if "widget" in s], scripts

        nb = staged_notebook(site_build, page_id)
        if nb is not None:
            expected, shown = shown_cells(nb), page_handle.evaluate(PAGE_CELLS)
            assert len(shown) == len(expected), (len(shown), len(expected))
            for cell, seen in zip(expected, shown, strict=True):
                where = f"{path}, cell {cell['index'] + 1}"
                assert seen["kinds"] == cell["kinds"], (where, seen["kinds"], cell["kinds"])
                assert seen["folded"] == cell["folded"] and not seen["open"], (where, seen)
                assert not [s for s in seen["scripts"] if "widget" in s], (where, seen["scripts"])
                if cell["folded"]:  # titled as in Colab: "Answer: ..." / "Solution: ..."
                    titled = re.match(r"(Answer|Solution|答案|解答)", seen["summary"])
                    assert titled, seen["summary"]
                # a widget shows its snapshot: the picture or table its output carries
                assert all(kind in ("img", "html") for kind in cell["widgets"]), (where, cell)
        if nb is not None or page == "index":
            notebook = f"{page}.ipynb" if nb is not None else f"{_names(edition)[0]}.ipynb"
            links = page_handle.evaluate(
                """() => ({colab: document.querySelector('.course-colab').href,
                           binder: document.querySelector('.course-binder').href})"""
            )
            assert links == {
                "colab": colab_url(notebook, edition),
                "binder": binder_url(notebook, edition),
            }
        if edition == "zh":
            assert re.search(r"[\u4e00-\u9fff]", text), f"{path}: no Chinese on the page"
        if nb is not None:  # where the page stands, and its two links
            stands = page_handle.evaluate(
                """() => {const f = document.querySelector('.course-provenance');
                           return f && {text: f.innerText,
                                        report: f.querySelector('.course-report').href,
                                        download: f.querySelector('.course-download').href}}"""
            )
            assert stands, f"{path}: no provenance footer"
            assert f"torch {PIN}" in stands["text"], stands["text"]
            assert stands["report"].startswith(f"{REPOSITORY}/issues/new?"), stands["report"]
            assert stands["download"] == opened.base + page_path(page_id).replace(".html", ".ipynb")

        twins = page_handle.evaluate(
            "() => Array.from(document.querySelectorAll('.course-twin')).map(a => a.href)"
        )
        assert twins == [
            opened.base + page_path(f"{other}/{page}") for other in EDITIONS if other != edition
        ]

        page_handle.evaluate(OPEN_ALL)  # folded answers hold pictures too
        page_handle.wait_for_function(
            "() => Array.from(document.images).every(i => i.complete)", timeout=15_000
        )
        pictures = page_handle.evaluate(PICTURES)
        broken = [p["src"] for p in pictures if not p["ok"] or p["width"] < 1 or p["height"] < 1]
        assert not broken, f"{path}: pictures not shown: {broken}"
        if nb is not None:
            drawn = sum(k == "img" for c in shown_cells(nb) for k in c["kinds"])
            in_article = page_handle.evaluate(
                "() => document.querySelectorAll('.bd-article .cell_output img').length"
            )
            assert in_article == drawn, (in_article, drawn)

        cut = page_handle.evaluate(TOO_WIDE)
        assert not cut, f"{path}: outputs wider than the page (scroll sideways to read): {cut}"

        same_site = {u for u in page_handle.evaluate(LINKS) if u.startswith(opened.base)}
        dead = sorted(filter(None, map(link_checker.broken, same_site)))
        assert not dead, f"{path}: broken links:\n" + "\n".join(dead)
        assert not opened.problems, f"{path}: {opened.problems}"
        assert not elsewhere, f"{path} fetched from other hosts: {elsewhere}"

        if page_id in SCREENSHOT_PAGES:
            page_handle.evaluate(CLOSE_ALL)  # as a reader first sees the page
            picture = screenshots / SCREENSHOT_PAGES[page_id]
            page_handle.screenshot(path=str(picture), full_page=True)



    def test_every_picture_of_an_output_says_what_it_shows(self, site_build, opened, page_id):
        """Each picture's alternative is the text form of its output (`picture_alternative`),
        never empty and never the picture's file name; a page that is no notebook shows none."""
        nb = staged_notebook(site_build, page_id)
        pictures = opened.page.evaluate(PICTURE_ALTERNATIVES)
        content = [p for p in pictures if "/_images/" in f"/{p['src']}"]
        if nb is None:
            assert content == [], (page_id, content)
            return
        expected = load_site_module("course_site").picture_alternatives(nb)
        assert len(content) == sum(k == "img" for c in shown_cells(nb) for k in c["kinds"])
        for picture in content:
            alt, name = picture["alt"] or "", Path(picture["src"]).stem
            assert alt and "_images" not in alt and name not in alt, (page_id, picture)
            assert alt == html.unescape(expected[name]) or alt == expected[name], (
                alt,
                expected[name],
            )
            assert words(alt) >= 4, f"{page_id}: an alternative that says too little: {alt!r}"

    def test_it_passes_the_accessibility_audit(
        self, site_build, opened, axe_source, screenshots, page_id
    ):
        """No serious or critical WCAG 2.1 A/AA violation, folded answers opened: in the light
        scheme the page opened in, then switched to dark as the theme's switch does. A Chinese
        notebook's page is audited in the light scheme only: it holds the same cells and outputs
        as its English twin (tests/tooling/test_editions.py), so the same elements in the same
        dark colours, which the English page's audit has measured."""
        page = opened.page
        assert page.evaluate("document.documentElement.dataset.theme") == SCHEMES[0]
        # With the theme's fade-in switched off, so that axe measures the colours of opened
        # answers, not a frame of the animation.
        page.add_style_tag(content="* { animation: none !important; transition: none !important; }")
        page.add_script_tag(content=axe_source)
        twin = page_id.startswith("zh/") and staged_notebook(site_build, page_id) is not None
        for scheme in SCHEMES[:1] if twin else SCHEMES:
            if scheme != SCHEMES[0]:
                show_scheme(page, scheme)
            page.evaluate(OPEN_ALL)
            found = serious(page.evaluate(AUDIT, WCAG_TAGS))
            assert not found, f"{page_path(page_id)} ({scheme}):\n" + "\n".join(found)
        if page_id == "en/08_grad_modes_and_why_nothing_learns":
            page.evaluate(CLOSE_ALL)
            page.screenshot(path=str(screenshots / "site-en-08-dark.png"), full_page=True)


def test_the_audit_finds_what_it_should(site_context, site_url, axe_source):
    """The audit fails a page that has the faults the site had before: light grey on the theme's
    grey, a picture named by its file, a summary whose aria-label hides its words."""
    page = site_context[0].new_page()
    try:
        page.goto(site_url + page_path("en/01_leaf_nodes"), wait_until="load")
        show_scheme(page, "dark")
        page.evaluate(
            """() => {
            const bad = document.createElement('div');
            bad.innerHTML = '<p style="color:#ced6dd;background:#f6f8fa">faint</p>'
                + '<img src="_images/x.svg">'
                + '<details><summary aria-label="Toggle hidden content">Answer: look'
                + '</summary></details>';
            document.querySelector('.bd-article').prepend(bad);
        }"""
        )
        page.add_script_tag(content=axe_source)
        rules = {line.split(" ")[0] for line in serious(page.evaluate(AUDIT, WCAG_TAGS))}
        assert {"color-contrast", "image-alt", "label-content-name-mismatch"} <= rules, rules
    finally:
        page.close()


def words(text: str) -> float:
    """How many words a text says: its space-separated pieces, where two Chinese characters
    count as one word (Chinese puts no spaces between words; most of them are two characters)."""
    chinese = re.findall(r"[\u3400-\u9fff]", text)
    latin = re.sub(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]", " ", text).split()
    return sum(bool(re.search(r"\w", w)) for w in latin) + len(chinese) / 2


def test_a_chinese_alternative_counts_two_characters_a_word():
    assert words("[figure: loss per step]") == 4
    assert words("[图：损失曲线，10 步：一个进程与三个进程]") == 1 + 15 / 2
    assert words("[图：Δ 热图]") < 4


def test_an_answer_opens_with_a_click(reader, screenshots):
    reader.open(page_path("en/03_detach_and_clone"))
    page = reader.page
    folded = page.locator(".bd-article div.cell details.hide").first
    folded.scroll_into_view_if_needed()
    output = folded.locator(".cell_output")
    assert folded.get_attribute("open") is None and not output.is_visible()
    assert folded.locator("summary").inner_text().startswith("Answer")
    page.screenshot(path=str(screenshots / "site-answer-folded.png"))
    folded.locator("summary").click()
    page.wait_for_function(
        "() => document.querySelector('.bd-article div.cell details.hide').open", timeout=5_000
    )
    assert output.is_visible() and folded.locator(".cell_input").is_visible()
    assert "@title Answer" in folded.locator(".cell_input").inner_text()
    page.wait_for_timeout(800)  # the theme fades the opened cell in
    page.screenshot(path=str(screenshots / "site-answer-open.png"))


def test_the_language_switch_leads_to_the_twin_and_back(reader):
    name = "05_freeing_the_graph"
    reader.open(page_path(f"en/{name}"))
    reader.page.locator(".course-twin").first.click()
    reader.page.wait_for_url(reader.base + page_path(f"zh/{name}"))
    assert reader.page.locator("html").get_attribute("lang").startswith("zh")
    reader.page.locator(".course-twin").first.click()
    reader.page.wait_for_url(reader.base + page_path(f"en/{name}"))
    assert reader.page.locator("html").get_attribute("lang") == "en"


@pytest.mark.parametrize(
    ("edition", "query", "finds"),
    [
        ("en", "retain_grad", "04_retain_grad_and_hooks"),
        ("en", "checkpointing", "09_past_first_order"),
        ("zh", "叶子节点", "01_leaf_nodes"),  # a glossary term, one word to the Chinese index
        ("zh", "梯度检查点", "09_past_first_order"),
    ],
)
def test_search_finds_the_notebook(reader, screenshots, edition, query, finds):
    search = page_path(f"{edition}/search")
    reader.open(f"{search}?q={urllib.parse.quote(query)}")
    results = reader.page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=20_000)
    found = [
        Path(urllib.parse.urlsplit(h).path).stem
        for h in results.evaluate_all("links => links.map(a => a.href)")
    ]
    assert finds in found, (query, found)
    if edition == "zh" and query == "叶子节点":
        reader.page.screenshot(path=str(screenshots / "site-zh-search.png"))
