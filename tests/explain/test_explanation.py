"""An explanation's two forms, whole: the HTML a notebook shows and the text a terminal prints,
with every part present and the learner's code, torch's message and the words escaped."""

from __future__ import annotations

import linecache

import pytest

from helpers.doctor.record import Location
from helpers.explain.explanation import Edit, Explanation, Place

SOURCE = "h = x.sigmoid()\nh.mul_(2)  # a<b & c\nloss.backward()\n"


@pytest.fixture
def at(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    linecache.checkcache()
    return lambda line: Location(str(script), line, "<module>")


@pytest.fixture
def whole(at) -> Explanation:
    """Every part, each holding characters HTML must escape."""
    return Explanation(
        family="inplace_saved",
        what="What <happened> & why.",
        places=(
            Place("saved", at(1), "Sigmoid<Backward0> keeps it"),
            Place("changed", at(2)),
            Place("surfaced", at(3)),
        ),
        edits=(Edit(at(2), "h = h * 2\n# <done>"),),
        fix="Do not change h & x.",
        not_this="Not <.data>.",
        torch_message="one of the variables needed <...> & so",
    )


HTML = (
    '<div class="autograd-explanation" style="border-left:4px solid #c0392b;padding:4px 12px;'
    'margin:4px 0"><p><b>autograd: a saved tensor was changed in place</b></p>'
    "<p>What &lt;happened&gt; &amp; why.</p><table>"
    "<tr><td><code>train.py:1</code></td><td><code>h = x.sigmoid()</code></td>"
    "<td>← saved here (Sigmoid&lt;Backward0&gt; keeps it)</td></tr>"
    "<tr><td><code>train.py:2</code></td><td><code>h.mul_(2)  # a&lt;b &amp; c</code></td>"
    "<td>← changed here, in place</td></tr>"
    "<tr><td><code>train.py:3</code></td><td><code>loss.backward()</code></td>"
    "<td>← the error surfaced here</td></tr></table>"
    "<p><b>The fix:</b></p><p>Do not change h &amp; x.</p>"
    "<pre>train.py:2:\n- h.mul_(2)  # a&lt;b &amp; c\n+ h = h * 2\n+ # &lt;done&gt;</pre>"
    "<p>Not &lt;.data&gt;.</p><p>What torch said:</p>"
    "<pre>RuntimeError: one of the variables needed &lt;...&gt; &amp; so</pre></div>"
)

TEXT = """\
autograd: a saved tensor was changed in place
What <happened> & why.

  train.py:1  h = x.sigmoid()
              ^ saved here (Sigmoid<Backward0> keeps it)
  train.py:2  h.mul_(2)  # a<b & c
              ^ changed here, in place
  train.py:3  loss.backward()
              ^ the error surfaced here

The fix:
  Do not change h & x.
  train.py:2:
  - h.mul_(2)  # a<b & c
  + h = h * 2
  + # <done>

Not <.data>.

What torch said:
  RuntimeError: one of the variables needed <...> & so"""


def test_the_html_holds_every_part_escaped(whole):
    assert whole.as_html() == HTML
    assert whole._repr_html_() == HTML


def test_the_text_holds_every_part_with_the_lines_aligned(whole):
    assert whole.as_text() == TEXT


def test_ipython_prints_the_text(whole):
    from IPython.lib.pretty import pretty

    assert pretty(whole) == TEXT


def test_an_explanation_without_places_or_fix_shows_only_what_happened_and_torchs_words():
    bare = Explanation(family="scalar_output", what="w", places=(), error_type="ValueError")
    assert bare.as_html() == (
        '<div class="autograd-explanation" style="border-left:4px solid #c0392b;'
        'padding:4px 12px;margin:4px 0"><p><b>autograd: backward() from a tensor of more than '
        "one value</b></p><p>w</p><p>What torch said:</p><pre>ValueError: </pre></div>"
    )
    assert bare.as_text() == (
        "autograd: backward() from a tensor of more than one value\nw\n\n"
        "What torch said:\n  ValueError: "
    )


def test_a_fix_in_words_alone_gets_its_heading(at):
    words = Explanation(family="scalar_output", what="w", places=(), fix="Sum it.")
    assert "<p><b>The fix:</b></p><p>Sum it.</p><p>What torch said:" in words.as_html()
    assert "\n\nThe fix:\n  Sum it.\n\nWhat torch said:" in words.as_text()


def test_place_finds_a_role_s_line_or_none(whole, at):
    assert whole.place("changed") == at(2)
    assert whole.place("freed") is None


def test_an_edit_replaces_its_line_keeping_the_indentation(at):
    source = "for x in xs:\n    h.mul_(2)\n    print(h)\n"
    edit = Edit(Location("train.py", 2, "<module>"), "h = h * 2\nh = h + 0")
    assert edit.apply(source) == "for x in xs:\n    h = h * 2\n    h = h + 0\n    print(h)\n"
