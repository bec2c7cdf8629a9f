"""What every committed notebook must be: run in order, light, honest about what it ignores."""

import json
import re

import nbformat
import pytest

from helpers.display import text_columns
from tests.support.notebook_files import EVERY_EDITION, EVERY_EDITION_IDS, NOTEBOOKS, cell_tree
from tooling import course

MAX_BYTES = 600_000
IGNORE = "# NBVAL_IGNORE_OUTPUT"


@pytest.fixture(params=EVERY_EDITION, ids=EVERY_EDITION_IDS)  # both editions
def nb(request):
    return request.param, nbformat.read(request.param, as_version=4)


def code_cells(notebook):
    return [c for c in notebook.cells if c.cell_type == "code" and c.source.strip()]


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_start_here.ipynb"


def test_valid_and_light(nb):
    path, notebook = nb
    nbformat.validate(notebook)
    assert path.stat().st_size < MAX_BYTES, f"{path.name} is {path.stat().st_size} bytes"


def test_executed_top_to_bottom_with_outputs(nb):
    path, notebook = nb
    cells = code_cells(notebook)
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    assert any(c.outputs for c in cells), f"{path.name} was committed without outputs"


def test_no_errors_and_no_stderr_in_outputs(nb):
    _, notebook = nb
    for cell in code_cells(notebook):
        for out in cell.outputs:
            assert out.output_type != "error", cell.source[:80]
            assert out.get("name") != "stderr", f"stray stderr after: {cell.source[:80]}"


def test_no_exception_markers(nb):
    _, notebook = nb
    text = json.dumps(notebook)
    assert "NBVAL_RAISES_EXCEPTION" not in text and "raises-exception" not in text


#: nbval markers a notebook may not use: a skipped cell or an expected exception proves nothing,
#: and NBVAL_CHECK_OUTPUT means nothing here (every output is checked). NBVAL_IGNORE_OUTPUT, with
#: its reason, is the one allowed, as a comment only.
FORBIDDEN_COMMENTS = ("NBVAL_SKIP", "NBVAL_CHECK_OUTPUT", "NBVAL_RAISES_EXCEPTION")


def nbval_markers(notebook) -> list[str]:
    """The forbidden nbval markers in a notebook: comments in code cells, and any cell tag
    nbval reads (every `nbval-*` tag, and `raises-exception`)."""
    found = []
    for index, cell in enumerate(notebook.cells):
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag.lower().startswith("nbval-") or tag.lower() == "raises-exception":
                found.append(f"cell {index}: tag {tag!r}")
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            comment = line.strip().lstrip("#").strip() if line.strip().startswith("#") else ""
            for marker in FORBIDDEN_COMMENTS:
                if comment.upper().startswith(marker):
                    found.append(f"cell {index}: comment {line.strip()!r}")
    return found


def test_no_skip_check_or_exception_markers_and_no_nbval_tags(nb):
    _, notebook = nb
    assert nbval_markers(notebook) == []


@pytest.mark.parametrize(
    ("source", "tags"),
    [
        ("# NBVAL_SKIP\nx = 1", []),
        ("x = 1\n  #  NBVAL_SKIP: slow", []),
        ("# NBVAL_CHECK_OUTPUT\nx = 1", []),
        ("# NBVAL_RAISES_EXCEPTION\n1 / 0", []),
        ("x = 1", ["nbval-skip"]),
        ("x = 1", ["nbval-ignore-output"]),
        ("x = 1", ["nbval-check-output"]),
        ("x = 1", ["nbval-raises-exception"]),
        ("x = 1", ["raises-exception"]),
    ],
    ids=[
        "NBVAL_SKIP",
        "NBVAL_SKIP with a reason",
        "NBVAL_CHECK_OUTPUT",
        "NBVAL_RAISES_EXCEPTION",
        "tag nbval-skip",
        "tag nbval-ignore-output",
        "tag nbval-check-output",
        "tag nbval-raises-exception",
        "tag raises-exception",
    ],
)
def test_nbval_markers_are_found(source, tags):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["colab-setup", *tags]})
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T"), cell])
    assert len(nbval_markers(notebook)) == 1


def test_nbval_markers_allow_the_ignore_marker_and_prose():
    cells = [
        nbformat.v4.new_markdown_cell("nbval's `# NBVAL_SKIP` is not used here"),
        nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\n# timings differ on every run\nx = 1"),
        nbformat.v4.new_code_cell("print('NBVAL_SKIP')", metadata={"tags": ["course-badges"]}),
    ]
    assert nbval_markers(nbformat.v4.new_notebook(cells=cells)) == []


def ignore_marker_problems(source: str) -> list[str]:
    """What is wrong with a cell's ignore marker: nbval honours `# NBVAL_IGNORE_OUTPUT` only alone
    on its line (with text after it the marker silently does nothing), and the next line must be
    a comment saying why the output cannot be compared."""
    lines = source.splitlines()
    problems = []
    for i, line in enumerate(lines):
        if "NBVAL_IGNORE_OUTPUT" not in line:
            continue
        if line.strip() != IGNORE:
            problems.append(f"nbval ignores {line.strip()!r}: the marker must stand alone")
            continue
        reason = lines[i + 1].strip() if i + 1 < len(lines) else ""
        # at least 15 columns: a Chinese character takes two, as it does on screen
        if not reason.startswith("#") or text_columns(reason.lstrip("#").strip()) < 15:
            problems.append("the line after # NBVAL_IGNORE_OUTPUT must be a comment saying why")
    return problems


@pytest.mark.parametrize(
    ("source", "problems"),
    [
        ("# NBVAL_IGNORE_OUTPUT\n# the versions describe the machine\nx = 1", 0),
        ("# NBVAL_IGNORE_OUTPUT: the versions describe the machine\nx = 1", 1),
        ("# NBVAL_IGNORE_OUTPUT\nx = 1", 1),
        ("# NBVAL_IGNORE_OUTPUT\n# why\nx = 1", 1),
        ("# NBVAL_IGNORE_OUTPUT\n# 每次运行的耗时都不同\nx = 1", 0),
        ("# NBVAL_IGNORE_OUTPUT\n# 耗时不同\nx = 1", 1),
        ("# NBVAL_IGNORE_OUTPUT", 1),
    ],
)
def test_ignore_marker_rules(source, problems):
    assert len(ignore_marker_problems(source)) == problems


def test_every_ignore_marker_works_and_says_why(nb):
    from nbval.plugin import find_comment_markers

    _, notebook = nb
    for cell in code_cells(notebook):
        assert ignore_marker_problems(cell.source) == [], cell.source[:80]
        if IGNORE in cell.source:  # and nbval itself sees it
            assert ("check", False) in list(find_comment_markers(cell.source)), cell.source[:80]


def test_skeleton_title_badges_setup(nb):
    path, notebook = nb
    first = notebook.cells[0]
    assert first.cell_type == "markdown" and re.match(r"# \S", first.source)
    tags = [c.metadata.get("tags", []) for c in notebook.cells[:3]]
    assert course.BADGE_TAG in tags[1] and course.SETUP_TAG in tags[2]
    assert not course.sync_notebook(path, write=False), "run `python -m tooling.course sync`"


def test_no_printed_object_addresses(nb):
    _, notebook = nb
    for cell in code_cells(notebook):
        for out in cell.outputs:
            text = out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
            assert not re.search(r" at 0x[0-9a-f]{6,}", text), cell.source[:80]


def test_widget_state_is_well_formed(nb):
    _, notebook = nb
    widgets = notebook.metadata.get("widgets")
    if widgets:
        assert "state" in widgets["application/vnd.jupyter.widget-state+json"]


def test_links_to_other_notebooks_resolve(nb):
    path, notebook = nb
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        for target in re.findall(r"\]\(([^)#\s]+\.ipynb)", cell.source):
            if not target.startswith("http"):
                assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_widget_ids_are_stable_so_reruns_diff_cleanly(nb):
    _, notebook = nb
    state = notebook.metadata.get("widgets", {}).get(course.WIDGET_STATE, {}).get("state", {})
    assert list(state) == [f"{n + 1:032x}" for n in range(len(state))]


def test_long_torch_warnings_are_shown_in_full_once_in_the_course():
    from helpers.checks import SHOWN_IN_FULL

    for first_sentence, home in SHOWN_IN_FULL.items():
        full = {}
        for path in NOTEBOOKS:
            outputs = json.dumps([c.get("outputs", []) for c in nbformat.read(path, 4).cells])
            # the brief form ends after the first sentence; the full one goes on
            full[path.stem] = len(re.findall(re.escape(first_sentence) + r" [A-Z]", outputs))
        shown = {name: n for name, n in full.items() if n}
        assert shown == {home: 1}, f"{first_sentence!r} in full: {shown}; expected once, in {home}"


#: A table cell typed as a result: a literal True or False, or a comparison such as "< 1e-06".
_TYPED_COMPARISON = re.compile(r"^\s*[<>≤≥=]=?\s*[-+]?[\d.]")


def typed_results(source: str) -> list[str]:
    """The values of a table row (a dict keyed by words, outside an assert) that are typed in as
    a result rather than computed: a literal True/False, or a typed comparison ("< 1e-06"). A
    typed result prints what it says whatever the run did."""
    import ast

    tree = cell_tree(source)
    if tree is None:
        return []
    in_asserts = {id(n) for a in ast.walk(tree) if isinstance(a, ast.Assert) for n in ast.walk(a)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict) or id(node) in in_asserts:
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and " " in str(key.value)):
                continue  # not a column of words: keyword arguments, settings
            if isinstance(value, ast.Constant) and (
                isinstance(value.value, bool)
                or (isinstance(value.value, str) and _TYPED_COMPARISON.match(value.value))
            ):
                found.append(f"{key.value!r}: {value.value!r}")
    return found


def test_no_table_cell_is_a_typed_result(nb):
    path, notebook = nb
    for cell in code_cells(notebook):
        assert typed_results(cell.source) == [], f"{path.name}, cell {cell.get('id')}"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('rows.append({"all 5 rows within 1e-4": True})', ["'all 5 rows within 1e-4': True"]),
        ('Table(c, [{"max |grad|": "< 1e-06"}])', ["'max |grad|': '< 1e-06'"]),
        ('rows.append({"all 5 rows within 1e-4": within})', []),
        ('assert answer == {"model 2 has gradients": True}', []),
        ('run(kwargs={"scale_grads": False})', []),
        ('Table(c, [{"gradient": "1e-08"}])', []),
    ],
)
def test_the_typed_result_finder(source, found):
    assert typed_results(source) == found


_SVG_TEXT = re.compile(r"<text\b([^>]*)>([^<]*)</text>")
_SVG_FONT = re.compile(r"font-family(?:=\"|:\s*)([^\";]+)")
_CHINESE = re.compile(r"[\u3400-\u9fff]")
#: Faces with Simplified Chinese glyphs a picture may name (any one of them).
SIMPLIFIED_FACES = ("CJK SC", "Source Han Sans SC", "Noto Sans SC", "PingFang SC", "YaHei")


def svg_text_in_other_faces(svg: str) -> list[str]:
    """The Chinese words of an SVG whose text names no Simplified Chinese face: a browser draws
    them in whatever CJK face it finds first, often a Japanese one."""
    found = []
    for attributes, words in _SVG_TEXT.findall(svg):
        font = _SVG_FONT.search(attributes)
        if _CHINESE.search(words) and font and not any(f in font[1] for f in SIMPLIFIED_FACES):
            found.append(f"{words!r} in {font[1]!r}")
    return found


def test_the_face_check_sees_bare_monospace():
    assert svg_text_in_other_faces('<text font-family="monospace">标量</text>') == [
        "'标量' in 'monospace'"
    ]
    assert not svg_text_in_other_faces(
        '<text font-family="DejaVu Sans Mono,Noto Sans Mono CJK SC">标量</text>'
    )
    assert not svg_text_in_other_faces('<text font-family="monospace">scalar</text>')


@pytest.mark.parametrize(
    "path", EVERY_EDITION[len(NOTEBOOKS) :], ids=EVERY_EDITION_IDS[len(NOTEBOOKS) :]
)
def test_chinese_words_in_pictures_name_a_simplified_chinese_face(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for n, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            svg = output.get("data", {}).get("image/svg+xml")
            if svg:
                svg = "".join(svg) if isinstance(svg, list) else svg
                found += [f"cell {n}: {w}" for w in svg_text_in_other_faces(svg)]
    assert not found, found[:5]
