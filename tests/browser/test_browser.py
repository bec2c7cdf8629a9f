"""The course as a learner uses it: each notebook opened in JupyterLab in Chromium, Run All.

For every notebook: no error or stderr output, every widget view rendered (not "Loading
widget..." nor an error), every picture loaded and visible, and a screenshot in
.artifacts/screenshots/ to look at (not in CI, where nobody looks: the whole notebook as one
picture costs about 2 s, and it checks nothing). The explorers respond: the backward stepper's
slider changes its picture, the graph explorer's toggle changes the graph, the optimizer lab's
dropdown changes the heatmaps, and a quiz answer reveals its explanation. Answers and solutions
open collapsed (their code and output behind a placeholder) and a click opens them.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.support.ci import skip_or_fail
from tests.support.notebook_files import CHOSEN_IDS, IDS, chosen_twins

pytestmark = pytest.mark.browser

#: The Chinese twins run in the browser: the start page and those whose widgets speak Chinese
#: (the stepper, the graph explorer, the optimizer lab). The other twins run the same code as
#: their English notebooks (tests/tooling/test_editions.py proves it), each of which browser-en
#: runs here, and their outputs are compared by nbval-zh: the browser would prove nothing more.
IN_THE_BROWSER_IN_CHINESE = ("00_", "03_", "04_", "05_", "06b_")
#: The Chinese edition's twins, opened from JupyterLab's root (notebooks/) like the English ones.
ZH_IDS = [f"zh/{p.name}" for p in chosen_twins(IN_THE_BROWSER_IN_CHINESE)]

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser tests need Playwright: pip install -e '.[dev]'"
)
PlaywrightError, PlaywrightTimeout = sync_api.Error, sync_api.TimeoutError

RUN_TIMEOUT_MS = 180_000
WIDGET_TIMEOUT_MS = 30_000
MAX_SCREENSHOT_HEIGHT = 30_000
#: Notebooks that draw nothing, with the reason (every other notebook must show a picture).
WITHOUT_PICTURES = {
    "10_check_yourself.ipynb": "a final quiz: questions, answers and tables",
}
ALL_WIDGET_KINDS = {"stepper", "explorer", "optimizer lab", "quiz"}

# JavaScript run in the page: the open notebook panel, found by its path.
PANEL = """(path) => {
    const app = window.jupyterapp;
    if (!app) return null;
    for (const w of app.shell.widgets('main')) {
        if (w.context && w.context.path === path && w.content && w.sessionContext) return w;
    }
    return null;
}"""

KERNEL_READY = f"""(path) => {{
    const panel = ({PANEL})(path);
    if (!panel || !panel.content.isAttached || !panel.sessionContext.isReady) return false;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}}"""

RUN_ALL = f"""async (path) => {{
    const app = window.jupyterapp;
    const panel = ({PANEL})(path);
    app.shell.activateById(panel.id);
    await app.commands.execute('notebook:clear-all-cell-outputs');
    for (const cell of panel.content.widgets) {{
        if (cell.model.type === 'code') cell.model.executionCount = null;
    }}
    await app.commands.execute('notebook:run-all-cells');
}}"""

# Done when the kernel is idle and every code cell ran, or when a cell failed (Run All stops).
RUN_FINISHED = f"""(path) => {{
    const panel = ({PANEL})(path);
    const kernel = panel.sessionContext.session.kernel;
    const cells = panel.content.widgets.filter(c => c.model.type === 'code');
    const failed = cells.some(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));
    const ran = cells.every(c => c.model.executionCount !== null
                                 && c.model.executionState !== 'running');
    return kernel.status === 'idle' && (ran || failed);
}}"""

REPORT = f"""(path) => {{
    const panel = ({PANEL})(path);
    const cells = panel.content.widgets.filter(c => c.model.type === 'code');
    const problems = [];
    let widgetOutputs = 0;
    cells.forEach((cell, i) => {{
        const head = cell.model.sharedModel.getSource().split('\\n')[0].slice(0, 70);
        if (cell.model.executionCount === null) {{
            problems.push(`cell ${{i + 1}} did not run: ${{head}}`);
        }}
        for (const out of cell.model.outputs.toJSON()) {{
            if (out.output_type === 'error') {{
                problems.push(`cell ${{i + 1}} raised ${{out.ename}}: ${{out.evalue}} (${{head}})`);
            }}
            if (out.output_type === 'stream' && out.name === 'stderr') {{
                const text = String(out.text).slice(0, 200);
                problems.push(`cell ${{i + 1}} wrote to stderr: ${{text}}`);
            }}
            if (out.data && out.data['application/vnd.jupyter.widget-view+json']) widgetOutputs++;
        }}
    }});
    return {{problems, widgetOutputs, codeCells: cells.length}};
}}"""

WIDGETS_SETTLED = """() => {
    const outputs = Array.from(document.querySelectorAll('.jp-OutputArea-output'));
    return !outputs.some(o => o.textContent.includes('Loading widget...'));
}"""

WIDGET_STATE = """() => {
    const outputs = Array.from(document.querySelectorAll('.jp-OutputArea-output'));
    const unrendered = /Loading widget\\.\\.\\.|Error displaying widget|javascript error/;
    const bad = outputs.filter(o => unrendered.test(o.textContent)
                                    || o.querySelector('.jupyter-widgets-error-widget'))
                       .map(o => o.textContent.replace(/\\s+/g, " ").trim().slice(0, 120));
    const views = outputs.filter(o => o.querySelector(':scope > .jupyter-widgets, .widget-box'));
    const shown = views.filter(o => o.getBoundingClientRect().height > 20).length;
    return {bad, views: views.length, shown};
}"""

PICTURES = """() => {
    const imgs = Array.from(document.querySelectorAll('.jp-OutputArea-output img'));
    const broken = imgs.filter(i => !(i.complete && i.naturalWidth > 0))
                       .map(i => (i.alt || i.src).slice(0, 80));
    const hidden = imgs.filter(i => i.getBoundingClientRect().width < 10).length;
    return {count: imgs.length, broken, hidden};
}"""


# Answer and solution cells (metadata jupyter.source_hidden) as the notebook opened them.
FOLDED = f"""(path) => {{
    const panel = ({PANEL})(path);
    const folded = [];
    panel.content.widgets.forEach((cell, i) => {{
        const meta = cell.model.getMetadata('jupyter') || {{}};
        if (!meta.source_hidden) return;
        cell.node.setAttribute('data-folded-cell', String(i));
        const placeholder = cell.node.querySelector('.jp-InputPlaceholder');
        const area = cell.node.querySelector('.jp-InputArea');
        folded.push({{index: i, inputHidden: cell.inputHidden, outputHidden: cell.outputHidden,
                      placeholder: !!placeholder && placeholder.getBoundingClientRect().height > 0,
                      codeShown: !!area && area.offsetParent !== null}});
    }});
    return folded;
}}"""

SHOW_ALL = f"""async (path) => {{
    const app = window.jupyterapp;
    app.shell.activateById(({PANEL})(path).id);
    await app.commands.execute('notebook:show-all-cell-code');
    await app.commands.execute('notebook:show-all-cell-outputs');
}}"""


def check_folded(page, name: str) -> list[dict]:
    """Every answer and solution cell opened with its code and output collapsed."""
    folded = page.evaluate(FOLDED, name)
    wrong = [
        cell
        for cell in folded
        if not (cell["inputHidden"] and cell["outputHidden"])
        or not cell["placeholder"]
        or cell["codeShown"]
    ]
    assert not wrong, f"{name}: answer or solution cells not collapsed on opening: {wrong}"
    return folded


def picture_src(page, selector: str) -> str:
    """The src of the first picture inside the first element matching `selector`."""
    return page.locator(f"{selector} img").first.get_attribute("src") or ""


def wait_for_new_picture(page, selector: str, old: str) -> str:
    """Wait until the widget's picture differs from `old`; return the new src."""
    page.wait_for_function(
        """([selector, old]) => {
            const img = document.querySelector(selector + ' img');
            return img && img.getAttribute('src') !== old && img.complete && img.naturalWidth > 0;
        }""",
        arg=[selector, old],
        timeout=WIDGET_TIMEOUT_MS,
    )
    return picture_src(page, selector)


def exercise_stepper(page) -> None:
    """Move the backward stepper's slider with the keyboard: picture and caption follow."""
    stepper = ".autograd-backward-stepper"
    page.locator(stepper).first.scroll_into_view_if_needed()
    before = picture_src(page, stepper)
    handle = page.locator(f"{stepper} .noUi-handle, {stepper} .ui-slider-handle").first
    handle.focus()
    handle.press("ArrowRight")
    after = wait_for_new_picture(page, stepper, before)
    assert after != before
    caption = page.locator(stepper).first.inner_text()
    assert re.search(r"Step 1 of|第 1 步", caption), caption[:300]  # either edition
    after = re.compile(r"After backward\(\)|backward\(\) 之后：")
    for _ in range(40):  # on to the end: "After backward()"
        if after.search(page.locator(stepper).first.inner_text()):
            break
        handle.press("ArrowRight")
        page.wait_for_timeout(150)
    assert after.search(page.locator(stepper).first.inner_text())


def exercise_explorer(page) -> None:
    """Toggle 'detach at the cut': the graph and the shown code change."""
    explorer = ".autograd-graph-explorer"
    page.locator(explorer).first.scroll_into_view_if_needed()
    before = picture_src(page, explorer)
    box = page.locator(f"{explorer} input[type=checkbox]").first
    box.click()
    wait_for_new_picture(page, explorer, before)
    text = page.locator(explorer).first.inner_text()
    assert ("h_cut = h.detach()" in text) == box.is_checked(), text[:300]
    toggled = picture_src(page, explorer)
    box.click()  # back to where it was
    assert wait_for_new_picture(page, explorer, toggled) == before


def exercise_optimizer_lab(page) -> None:
    """Choose another optimizer: the heatmaps change."""
    lab = ".autograd-optimizer-lab"
    page.locator(lab).first.scroll_into_view_if_needed()
    before = picture_src(page, lab)
    select = page.locator(f"{lab} select").first
    current = select.input_value()
    select.select_option("SGD" if current != "SGD" else "Adam")
    wait_for_new_picture(page, lab, before)


def exercise_quiz(page) -> None:
    """Answer the first quiz question: the explanation is revealed."""
    quiz = page.locator(".autograd-quiz").first
    quiz.scroll_into_view_if_needed()
    question = quiz.locator(".autograd-question").first
    revealed = r"/Misconception|误区/"  # the label in either edition
    assert not re.search(r"Misconception|误区", question.inner_text())
    question.locator("button").first.click()
    page.wait_for_function(
        f"""() => {{
            const q = document.querySelector('.autograd-quiz .autograd-question');
            return q && {revealed}.test(q.innerText);
        }}""",
        timeout=WIDGET_TIMEOUT_MS,
    )


EXERCISES = {
    "stepper": (".autograd-backward-stepper", exercise_stepper),
    "explorer": (".autograd-graph-explorer", exercise_explorer),
    "optimizer lab": (".autograd-optimizer-lab", exercise_optimizer_lab),
    "quiz": (".autograd-quiz", exercise_quiz),
}

_exercised: dict[str, set[str]] = {}


SCROLLER = f"""(path) => ({PANEL})(path).content.node.querySelector('.jp-WindowedPanel-outer')"""


def screenshot(page, name: str, path: Path) -> None:
    """The whole notebook, top to bottom, in one picture (a viewport as tall as the notebook);
    nothing in CI (CI=true), where no one looks at it."""
    if os.environ.get("CI") == "true":
        return
    height = page.evaluate(f"(path) => ({SCROLLER})(path).scrollHeight", name)
    width = page.viewport_size["width"]
    page.set_viewport_size({"width": width, "height": min(height + 160, MAX_SCREENSHOT_HEIGHT)})
    page.evaluate(f"(path) => ({SCROLLER})(path).scrollTo(0, 0)", name)
    page.wait_for_timeout(700)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": width, "height": 900})


OPEN = """async (path) => {
    await window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'});
}"""

CLOSE = f"""async (path) => {{
    const panel = ({PANEL})(path);
    if (!panel) return;
    if (panel.sessionContext.session) await panel.sessionContext.shutdown();
    panel.dispose();
}}"""


def run_notebook_in_lab(lab_page, screenshots: Path, name: str) -> dict:
    """Open a notebook in JupyterLab, Run All, check outputs and widgets, take a screenshot.

    Returns the seconds each phase took. The notebook is closed and its kernel shut down at the
    end, so the next notebook has the CPU to itself.
    """
    page, errors_before = lab_page.page, len(lab_page.errors)
    phases: dict[str, float] = {}
    clock = time.monotonic()

    def phase(label: str) -> None:
        nonlocal clock
        now = time.monotonic()
        phases[label] = round(now - clock, 1)
        clock = now

    try:
        page.evaluate(OPEN, name)
        page.wait_for_function(KERNEL_READY, arg=name, timeout=90_000, polling=250)
        phase("open + kernel")
        check_folded(page, name)
        page.evaluate(SHOW_ALL, name)  # the checks below look at every output
        page.evaluate(RUN_ALL, name)
        page.wait_for_function(RUN_FINISHED, arg=name, timeout=RUN_TIMEOUT_MS, polling=250)
        phase("run all")
        report = page.evaluate(REPORT, name)
        assert not report["problems"], f"{name}:\n" + "\n".join(report["problems"])

        page.wait_for_function(WIDGETS_SETTLED, timeout=WIDGET_TIMEOUT_MS, polling=250)
        widgets = page.evaluate(WIDGET_STATE)
        assert not widgets["bad"], f"{name}: widgets not rendered: {widgets['bad']}"
        assert widgets["views"] >= report["widgetOutputs"], (name, widgets, report)
        assert widgets["shown"] == widgets["views"], (name, widgets)

        try:  # pictures decode and get laid out asynchronously
            if Path(name).name in WITHOUT_PICTURES:
                raise PlaywrightTimeout("nothing to wait for")
            page.wait_for_function(
                f"() => {{ const p = ({PICTURES})(); "
                "return p.count > 0 && !p.broken.length && !p.hidden; }",
                timeout=WIDGET_TIMEOUT_MS,
                polling=250,
            )
        except PlaywrightTimeout:
            pass  # the assertions below say what is wrong
        pictures = page.evaluate(PICTURES)
        drawn = pictures["count"] > 0
        assert drawn != (Path(name).name in WITHOUT_PICTURES), (name, pictures["count"])
        assert not pictures["broken"], f"{name}: pictures that did not load: {pictures['broken']}"
        assert not pictures["hidden"], f"{name}: {pictures['hidden']} pictures have no size"
        if name.startswith("zh/"):
            assert page.evaluate(SHOWS_CHINESE, name), f"{name}: no Chinese prose or output text"
        phase("checks")

        screenshot(page, name, screenshots / name.replace("/", "-").replace(".ipynb", ".png"))
        phase("screenshot")

        exercised = set()
        for kind, (selector, exercise) in EXERCISES.items():
            if page.locator(selector).count():
                exercise(page)
                exercised.add(kind)
        _exercised[name] = exercised
        phase("widgets")
        errors = lab_page.errors[errors_before:]
        assert not errors, f"{name}: errors in the page: {errors[:3]}"
        return phases
    finally:
        try:  # one kernel at a time: the next notebook gets the CPU
            page.evaluate(CLOSE, name)
        except PlaywrightError:
            pass
        phase("close")
        TIMINGS[name] = phases


TIMINGS: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def write_timings(screenshots):
    yield
    if not TIMINGS:
        return
    lines = [f"{name}: {phases}" for name, phases in TIMINGS.items()]
    # `make test` runs the editions in two processes side by side: a file for each.
    edition = "zh" if all(name.startswith("zh/") for name in TIMINGS) else "en"
    (screenshots / f"timings-{edition}.txt").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("name", CHOSEN_IDS)
def test_notebook_runs_in_jupyterlab(lab_page, screenshots, name):
    run_notebook_in_lab(lab_page, screenshots, name)


@pytest.mark.parametrize("name", ZH_IDS)
def test_chinese_notebook_runs_in_jupyterlab(lab_page, screenshots, chinese_font, name):
    run_notebook_in_lab(lab_page, screenshots, name)  # it also checks the Chinese text shows


@pytest.fixture(scope="module")
def chinese_font() -> str:
    """A font with Chinese glyphs (Debian's fonts-noto-cjk), so screenshots show no empty boxes."""
    import subprocess

    try:
        found = subprocess.run(
            ["fc-list", ":lang=zh", "family"], capture_output=True, text=True, check=False
        ).stdout
    except FileNotFoundError:
        found = ""
    if not found.strip():
        skip_or_fail(
            "no font with Chinese glyphs: `sudo apt-get install fonts-noto-cjk` or "
            "`make browser-deps`, then re-run"
        )
    return found.splitlines()[0]


# The notebook's rendered Markdown and outputs hold Chinese text (the prose and the helpers' text).
SHOWS_CHINESE = f"""(path) => {{
    const panel = ({PANEL})(path);
    const text = panel.content.node.innerText;
    return /[\u4e00-\u9fff]/.test(text) && /检验自己|练习|下一步/.test(text);
}}"""


def test_the_course_exercises_every_kind_of_widget(lab_page, screenshots):
    for name in IDS:
        if name not in _exercised:  # run alone (e.g. with -k): run the notebooks here
            run_notebook_in_lab(lab_page, screenshots, name)
    seen = set().union(*_exercised.values())
    assert seen >= ALL_WIDGET_KINDS, seen


def test_an_answer_opens_collapsed_and_a_click_shows_it(lab_page, screenshots):
    page, name = lab_page.page, "03_detach_and_clone.ipynb"
    page.evaluate(OPEN, name)
    try:
        page.wait_for_function(KERNEL_READY, arg=name, timeout=90_000, polling=250)
        folded = check_folded(page, name)
        kinds = {
            page.evaluate(
                f"(i) => ({PANEL})('{name}').content.widgets[i].model"
                ".sharedModel.getSource().split('\\n')[0]",
                c["index"],
            )
            for c in folded
        }
        assert any("Answer" in k for k in kinds) and any("Solution" in k for k in kinds), kinds
        cell = page.locator(f'[data-folded-cell="{folded[0]["index"]}"]')
        cell.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / "folded-answer.png"))
        assert not cell.locator(".jp-OutputArea-output").first.is_visible()
        cell.locator(".jp-InputPlaceholder").click()
        cell.locator(".jp-OutputPlaceholder").click()
        page.wait_for_function(
            """(i) => {
                const node = document.querySelector(`[data-folded-cell="${i}"]`);
                const code = node.querySelector('.jp-InputArea');
                const out = node.querySelector('.jp-OutputArea-output');
                return !!code && code.offsetParent !== null && !!out && out.offsetParent !== null;
            }""",
            arg=folded[0]["index"],
            timeout=WIDGET_TIMEOUT_MS,
        )
        assert "@title Answer" in cell.locator(".jp-InputArea").inner_text()
        page.screenshot(path=str(screenshots / "opened-answer.png"))
    finally:
        page.evaluate(CLOSE, name)


def test_jupyterlab_kernels_talk_over_unix_sockets(lab):
    """No TCP connection of a step running beside the browser tests can take a kernel's port."""
    import json
    from urllib.request import Request, urlopen

    kernels = f"{lab.base}/api/kernels"
    start = Request(f"{kernels}?token={lab.token}", data=b"{}", method="POST")
    with urlopen(start, timeout=60) as reply:
        kernel = json.load(reply)["id"]
    try:
        runtime = lab.log.parent / "runtime"
        connection = json.loads((runtime / f"kernel-{kernel}.json").read_text())
        assert connection["transport"] == "ipc"
        deadline = time.monotonic() + 60  # the kernel binds them once it has started
        while len(sockets := list(runtime.glob(f"kernel-{kernel}-ipc-*"))) < 5:
            assert time.monotonic() < deadline, f"the kernel made {sockets} within 60 s"
            time.sleep(0.2)
        assert all(s.is_socket() for s in sockets), sockets
    finally:
        stop = Request(f"{kernels}/{kernel}?token={lab.token}", method="DELETE")
        urlopen(stop, timeout=60).close()


NEWS_PROMPT = "official Jupyter news"


def test_the_course_opens_without_jupyterlab_news_prompt(lab, lab_page):
    """JupyterLab asks "Would you like to get notified about official Jupyter news?" over the
    first notebook unless told not to; the course's overrides.json (installed by `make install`,
    copied by Binder's postBuild) tells it, and the settings JupyterLab serves say so."""
    import json
    from urllib.request import urlopen

    plugin = "@jupyterlab/apputils-extension:notification"
    with urlopen(f"{lab.base}/lab/api/settings/{plugin}?token={lab.token}", timeout=10) as reply:
        schema = json.load(reply)["schema"]
    defaults = {k: v.get("default") for k, v in schema["properties"].items()}
    assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False, defaults
    page = lab_page.page
    page.goto(lab.url("news-prompt"))
    page.wait_for_function(
        "() => window.jupyterapp && !document.querySelector('#jupyterlab-splash')",
        timeout=90_000,
        polling=250,
    )
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    time.sleep(3)  # the prompt comes up shortly after start-up when it is not switched off
    assert NEWS_PROMPT not in page.evaluate("() => document.body.innerText")
