"""The words inside code that a translation may say in its own language: comments, docstrings,
the strings a cell prints, and the titles and notes it passes to a helper to show.

A twin's code is the English code; only these words differ. `texts(source)` finds them (Python's
tokenizer finds the comments, its parser the docstrings and the string literals passed to
`print` or as `title=`, `note=` and the like, a title passed by position to `graph_picture`, the
keys naming a `show_graph` picture's `params=`), `apply` puts translations in, and `same_code`
proves two cells are one program: their syntax trees are equal once those strings' words are
blanked, so no translation can change what the code does, and a translated f-string keeps its
`{expressions}` and their formats.

Markers that tools read (`# NBVAL_IGNORE_OUTPUT`, `# @title`, `# noqa`, `# type:`, `# pragma`)
are not words to translate.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

__all__ = ["Text", "apply", "same_code", "same_kind", "texts", "untranslated"]

#: Keyword arguments whose string a helper shows the learner as prose (a graph's or table's title,
#: a figure's note, a question's words): translated like printed strings.
SHOWN_KEYWORDS = frozenset({"title", "note", "prompt", "misconception", "fact"})
#: Helpers whose positional arguments (by index) are a title the learner sees.
SHOWN_POSITIONS = {"graph_picture": (1,)}
#: Helpers whose `params=` dict names what a picture labels: its literal keys are shown words.
LABELLED_BY_PARAMS = frozenset({"show_graph"})
#: Comments that tools read: never translated.
MARKER = re.compile(r"#\s*(NBVAL_|@title|noqa|type:|pragma|fmt:)")
_WORD = re.compile(r"[A-Za-z]{2,}")
_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class Text:
    """One translatable piece of a cell's source: where it is (character offsets) and what it is."""

    start: int
    end: int
    text: str
    kind: str  # "comment" or "printed"


def _offsets(source: str) -> list[int]:
    starts, total = [0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _comments(source: str, starts: list[int]) -> list[Text]:
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return found
    for token in tokens:
        if token.type == tokenize.COMMENT and not MARKER.match(token.string):
            (row, col), (_, end_col) = token.start, token.end
            found.append(
                Text(starts[row - 1] + col, starts[row - 1] + end_col, token.string, "comment")
            )
    return found


def _char(line: str, byte_col: int) -> int:
    """ast counts columns in UTF-8 bytes; the source is indexed in characters."""
    return len(line.encode()[:byte_col].decode(errors="ignore"))


def _is_label(node: ast.expr) -> bool:
    """A label in words ("clone first: y.clone()"), not a tensor's name ("ff1", "labels")."""
    if (
        not (isinstance(node, ast.Constant) and isinstance(node.value, str))
        or " " not in node.value
    ):
        return False
    prose = [w for w in node.value.split() if not any(ch in w for ch in ".([=")]
    return any(len(re.sub(r"[^A-Za-z]", "", w)) >= 2 or _CJK.search(w) for w in prose)


def _literals(node: ast.expr) -> list[ast.expr]:
    """A string literal, or the string literals joined by `+` in an expression such as
    `pad + "None (an input ...)"`."""
    if _is_literal(node):
        return [node]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literals(node.left) + _literals(node.right)
    return []


def _docstring(node: ast.AST) -> list[ast.expr]:
    """A function's or class's docstring: prose that says what the code does (an exercise
    stub's task is stated there)."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return [first.value] if isinstance(first.value.value, str) else []
    return []


def _said(node: ast.AST) -> list[ast.expr]:
    """The string literals a cell says to the learner: a docstring, print's positional arguments
    (and the literals they join with `+`), the keyword arguments in SHOWN_KEYWORDS of any call, a
    title passed by position (SHOWN_POSITIONS) and the literal keys of a picture's `params=`
    labels."""
    if not isinstance(node, ast.Call):
        return _docstring(node)
    said = []
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    if isinstance(node.func, ast.Name) and name == "print":  # the builtin, not log.print
        said += [lit for a in node.args for lit in _literals(a)]
    said += [
        a for i, a in enumerate(node.args) if i in SHOWN_POSITIONS.get(name, ()) and _is_literal(a)
    ]
    said += [k.value for k in node.keywords if k.arg in SHOWN_KEYWORDS and _is_literal(k.value)]
    for k in node.keywords:
        if name in LABELLED_BY_PARAMS and k.arg == "params" and isinstance(k.value, ast.Dict):
            said += [key for key in k.value.keys if key is not None and _is_label(key)]
    return said


def _printed(source: str, starts: list[int]) -> list[Text]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines(keepends=True)
    found = []
    for node in ast.walk(tree):
        for arg in _said(node):
            if arg.end_lineno is None or arg.end_col_offset is None:
                continue
            start = starts[arg.lineno - 1] + _char(lines[arg.lineno - 1], arg.col_offset)
            end = starts[arg.end_lineno - 1] + _char(lines[arg.end_lineno - 1], arg.end_col_offset)
            text = source[start:end]
            if _WORD.search(_fields_removed(text)):
                found.append(Text(start, end, text, "printed"))
    return found


def _fields_removed(literal: str) -> str:
    """A string literal's own words: an f-string's {fields} taken out."""
    return re.sub(r"\{[^{}]*\}", "", literal)


def texts(source: str) -> list[Text]:
    """The comments and printed strings of a cell, in source order (prose worth translating:
    a comment or string with at least one word)."""
    starts = _offsets(source)
    found = [t for t in _comments(source, starts) if _WORD.search(t.text)]
    found += _printed(source, starts)
    return sorted(found, key=lambda t: t.start)


def apply(source: str, translations: dict[str, str]) -> str:
    """The source with every comment and printed string that `translations` knows replaced."""
    pieces, last = [], 0
    for piece in texts(source):
        if piece.text in translations:
            pieces += [source[last : piece.start], translations[piece.text]]
            last = piece.end
    return "".join(pieces) + source[last:]


def untranslated(source: str, translations: dict[str, str]) -> list[str]:
    """The cell's comments and printed strings that `translations` does not know yet."""
    return [t.text for t in texts(source) if t.text not in translations]


def _blank(node: ast.expr) -> ast.expr:
    """A string literal without its words: a constant becomes "", an f-string keeps only its
    {fields} (their code and format specs)."""
    if isinstance(node, ast.JoinedStr):
        return ast.JoinedStr(values=[v for v in node.values if isinstance(v, ast.FormattedValue)])
    return ast.Constant(value="")


def _is_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


class _BlankPrinted(ast.NodeTransformer):
    """Blanks the string literals calls say to the learner (`_said`): the only strings a twin
    may say otherwise."""

    def __init__(self, tree: ast.AST) -> None:
        self.said = {id(lit) for node in ast.walk(tree) for lit in _said(node)}

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return _blank(node) if id(node) in self.said else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return _blank(node) if id(node) in self.said else self.generic_visit(node)


def _blanked(tree: ast.AST) -> str:
    return ast.dump(_BlankPrinted(tree).visit(tree))


def same_code(english: str, twin: str) -> bool:
    """Whether two cells are one program, whatever their comments and printed strings say (an
    f-string's {fields} included: only its words may differ)."""
    try:
        a, b = ast.parse(english), ast.parse(twin)
    except SyntaxError:
        return english == twin
    return _blanked(a) == _blanked(b)


def same_kind(english: str, translation: str) -> bool:
    """Whether a translation can stand where the English stood: a comment for a comment (one
    line), a string literal with the same {fields} for a printed string."""
    if english.startswith("#"):
        return translation.startswith("#") and "\n" not in translation
    try:
        # in parentheses, so that a string continued over lines parses as one expression
        a = ast.parse(f"({english.strip()})", mode="eval").body
        b = ast.parse(f"({translation.strip()})", mode="eval").body
    except SyntaxError:
        return False
    if not (_is_literal(a) and _is_literal(b)):
        return False
    return ast.dump(_blank(a)) == ast.dump(_blank(b))
