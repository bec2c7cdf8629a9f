"""The language helpers speak to learners in, and the text they say, read from data files.

    from helpers.language import set_language
    set_language("zh")          # the Chinese edition's setup cell does this

Everything a learner reads in an output (quiz questions and explanations, exercise feedback, the
captions of tables and widgets) lives in `helpers/text/<language>/<notebook>.toml`, one file per
notebook plus `common.toml` for what every notebook shares. English (`en`) is complete and holds
the language-neutral parts too (a question's program, its answer). A second language is added by
adding files: `helpers/text/zh/03_detach_and_clone.toml` holds only the translated strings, each
table marked with the hash of the English text it translates (`en`), so a test can tell when the
English changed after its translation. A string a language lacks falls back to English.

Errors raised by the helpers' API stay in English, as torch's own do.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

__all__ = [
    "LANGUAGES",
    "TEXT_ROOT",
    "article",
    "english_hash",
    "fill",
    "heading",
    "language",
    "phrase",
    "placeholders",
    "same_program",
    "say",
    "say_in",
    "set_language",
    "table",
    "translated_table",
]

#: Language code -> its name, in that language. English is the source every other translates.
LANGUAGES = {"en": "English", "zh": "简体中文"}
TEXT_ROOT = Path(__file__).with_name("text")
#: The keys of a table that a translation holds: the rest (programs, answers) are English only.
TRANSLATION_MARK = "en"

_current = ["en"]
#: `{{` and `}}` are literal braces; `{...}` is a placeholder.
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]+)\}")
#: "a {type}" in English: "an" where the type's name is said starting with a vowel (`article`).
_A_TYPE = re.compile(r"\ba \{type\}")
#: Letters whose names start with a vowel sound ("ef", "em", "en"): said as letters, as at the
#: start of an abbreviation, they take "an".
_VOWEL_SOUNDED_LETTERS = "fhlmnrsx"


def article(name: str) -> str:
    """The English article of a type's name, by sound: "an" before a, e, i or o ("an int") and
    before an abbreviation said from such a letter ("an MSELoss", "an ndarray"), else "a" ("a
    uint8", "a NoneType", "a str")."""
    first = name[:1].lower()
    if first in ("a", "e", "i", "o"):
        return "an"
    abbreviation = name[:2].isupper() or name.startswith("nd")  # ndarray: "en-dee-array"
    return "an" if first and abbreviation and first in _VOWEL_SOUNDED_LETTERS else "a"


def set_language(code: str) -> None:
    """Speak `code` ("en" or "zh") from now on, in every helper's learner-facing text."""
    if code not in LANGUAGES:
        raise ValueError(
            f"unknown language {code!r}; the course speaks {', '.join(map(repr, LANGUAGES))}"
        )
    _current[0] = code


def language() -> str:
    """The language learner-facing text is in now ("en" unless `set_language` changed it)."""
    return _current[0]


@cache
def _file(code: str, name: str) -> dict[str, Any]:
    path = TEXT_ROOT / code / f"{name}.toml"
    if not path.exists():
        if code == "en":
            raise FileNotFoundError(f"no English text file {path}: every notebook's text has one")
        return {}
    with path.open("rb") as f:
        return tomllib.load(f)


def _walk(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def english_hash(entry: Any) -> str:
    """A short hash of an English string, or of a table's strings (sorted by key): what a
    translation records as the text it translates."""
    if isinstance(entry, dict):
        text = "\n".join(f"{k}={v}" for k, v in sorted(entry.items()) if isinstance(v, str))
    else:
        text = str(entry)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def table(name: str, dotted: str) -> dict[str, Any]:
    """The English table `dotted` (e.g. "quiz") of text file `name`, in file order."""
    found = _walk(_file("en", name), dotted)
    if not isinstance(found, dict):
        raise KeyError(f"helpers/text/en/{name}.toml has no table [{dotted}]")
    return found


def translated_table(name: str, dotted: str, code: str | None = None) -> dict[str, Any]:
    """Table `dotted` of `name` in language `code` (default: the current one): the English table
    with the translated strings laid over it. Only strings are translated; the rest is English's."""
    english = table(name, dotted)
    code = code or language()
    if code == "en":
        return english
    overlay = _walk(_file(code, name), dotted)
    if not isinstance(overlay, dict):
        return english
    merged = dict(english)
    for key, value in overlay.items():
        if key in ADDED_IN_TRANSLATION:
            merged[key] = value
            continue
        if key == TRANSLATION_MARK or key not in english:
            continue
        if isinstance(value, str) and isinstance(english[key], str):
            merged[key] = value
    return merged


def say(file: str, key: str, /, **values: Any) -> str:
    """The message `key` of text file `file` in the current language, its `{placeholders}`
    filled from `values` (e.g. say("03_detach_and_clone", "feedback.not_shared", name="b"))."""
    return say_in(language(), file, key, **values)


def say_in(code: str, file: str, key: str, /, **values: Any) -> str:
    """`say` in language `code` rather than the current one (a figure drawn in English where no
    font has the current language's glyphs)."""
    section, _, leaf = key.rpartition(".")
    strings = translated_table(file, section, code) if section else _file("en", file)
    if leaf not in strings or not isinstance(strings[leaf], str):
        raise KeyError(f"helpers/text/en/{file}.toml has no string {key!r}")
    template = strings[leaf]
    missing = placeholders(template) - values.keys()
    if missing:
        raise KeyError(f"{file}:{key} needs {sorted(missing)}; got {sorted(values)}")
    if "type" in values and article(str(values["type"])) == "an":  # not "a int", "a uint8"
        template = _A_TYPE.sub("an {type}", template)
    return fill(template, lambda field: str(values[field]))


def placeholders(template: str) -> set[str]:
    """The `{name}` placeholders of a template (a translation must keep the same ones)."""
    return {m.group(1) for m in _PLACEHOLDER.finditer(template) if m.group(1)}


def fill(template: str, value: Callable[[str], str]) -> str:
    """The template with each `{field}` replaced by value(field), and `{{`, `}}` by braces."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)[0]
        return value(match.group(1))

    return _PLACEHOLDER.sub(one, template)


def phrase(name: str | None, english: str) -> str:
    """A short text passed in English (a quiz title, a table's heading or caption), in the
    current language: looked up in the `[phrases]` table of text file `name`, then of `common`,
    then of every other file of the language; unchanged when there is no translation."""
    code = language()
    if code == "en":
        return english
    if name is not None:
        found = _walk(_file(code, name), "phrases")
        if isinstance(found, dict) and isinstance(found.get(english), str):
            return found[english]
    return _all_phrases(code).get(english, english)


def heading(english: str) -> str:
    """A table's column heading, in the current language: looked up first in the `[headings]`
    tables (words translated only where they head a column, such as "loss", which in a table's
    cells names a variable), then as a phrase."""
    code = language()
    if code == "en":
        return english
    return _all_phrases(code, "headings").get(english) or phrase(None, english)


@cache
def _all_phrases(code: str, kind: str = "phrases") -> dict[str, str]:
    names = ["common"] + sorted(p.stem for p in (TEXT_ROOT / code).glob("*.toml"))
    merged: dict[str, str] = {}
    for file in names:
        found = _walk(_file(code, file), kind)
        for english, translated in (found or {}).items():
            if isinstance(translated, str):
                merged.setdefault(english, translated)
    return merged


def _tables(data: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """Every table of a text file that holds strings, by dotted name (phrases excluded)."""
    found = {}
    for key, value in data.items():
        if not isinstance(value, dict) or key in ("phrases", "headings"):
            continue
        name = f"{prefix}{key}"
        if any(isinstance(v, str) for v in value.values()):
            found[name] = value
        found.update(_tables(value, f"{name}."))
    return found


def translation_problems(code: str) -> list[str]:
    """What is wrong with language `code`'s text files, one line each: a table or string English
    lacks, a changed placeholder, a non-string value, and a table whose English changed after
    its translation (stale: its `en` hash is not the English table's)."""
    problems = []
    for path in sorted((TEXT_ROOT / code).glob("*.toml")):
        name = path.stem
        english_tables = (
            _tables(_file("en", name)) if (TEXT_ROOT / "en" / path.name).exists() else {}
        )
        if not english_tables and name != "common":
            problems.append(f"{code}/{path.name}: no English file helpers/text/en/{path.name}")
            continue
        english_tables = _tables(_file("en", name))
        for dotted, table_ in _tables(_file(code, name)).items():
            where = f"{code}/{path.name} [{dotted}]"
            english = english_tables.get(dotted)
            if english is None:
                problems.append(f"{where}: English has no such table")
                continue
            mark = table_.get(TRANSLATION_MARK)
            if mark != english_hash(english):
                problems.append(
                    f"{where}: stale, the English changed after this translation "
                    f"(en = {mark!r}, the English now hashes to {english_hash(english)!r}); "
                    "check the translation, then update en"
                )
            for key, value in table_.items():
                if key == TRANSLATION_MARK:
                    continue
                if key in ADDED_IN_TRANSLATION:
                    problems += [f"{where}: {key!r} {p}" for p in _thread_problems(value)]
                elif key not in english:
                    problems.append(f"{where}: English has no string {key!r}")
                elif key in PROGRAMS and not same_program(value, english[key]):
                    problems.append(
                        f"{where}: {key!r} is not the English program (only its comments may "
                        "be translated)"
                    )
                elif not isinstance(value, str) or not isinstance(english[key], str):
                    problems.append(f"{where}: {key!r} is not a text (only text is translated)")
                elif placeholders(value) != placeholders(english[key]):
                    problems.append(
                        f"{where}: {key!r} has placeholders {sorted(placeholders(value))}, "
                        f"the English {sorted(placeholders(english[key]))}"
                    )
    return problems


def _thread_problems(threads: Any) -> list[str]:
    """What is wrong with a list of threads a translation adds: each a table with a title and an
    https address, and nothing else."""
    if not isinstance(threads, list) or not threads:
        return ["is not a list of threads"]
    found = []
    for thread in threads:
        if not isinstance(thread, dict) or set(thread) != {"title", "url"}:
            found.append(f"has an entry that is not {{title, url}}: {thread!r}")
        elif not (isinstance(thread["title"], str) and thread["title"].strip()):
            found.append(f"has a thread without a title: {thread!r}")
        elif not (isinstance(thread["url"], str) and thread["url"].startswith("https://")):
            found.append(f"has a thread whose url is not https: {thread!r}")
    return found


def untranslated(code: str) -> list[str]:
    """The English tables language `code` does not translate yet (a file or a table missing)."""
    missing = []
    for path in sorted((TEXT_ROOT / "en").glob("*.toml")):
        theirs = _tables(_file(code, path.stem))
        for dotted, english in _tables(_file("en", path.stem)).items():
            wanted = {k for k, v in english.items() if isinstance(v, str) and _translatable(k)}
            if not wanted <= set(theirs.get(dotted, {})):
                missing.append(f"{path.stem} [{dotted}]")
    return missing


#: Strings of a text table that are not prose: a quiz's program and answer, a learner question's
#: thread address, notebook and verdict stay as English has them. (A question's `source_title` is
#: translated: the thread's own title, followed by a gloss in the translation's language.)
NOT_TRANSLATED = {"topic", "code", "answer", "probe", "source_url", "see", "doctor"}
#: Of those, the programs a translation may still give: the same program, its comments translated.
PROGRAMS = {"code"}
#: What a translation may add that English has no counterpart for: a learner question's threads
#: in the translation's language, a list of tables {title, url}, cited beside the English thread.
ADDED_IN_TRANSLATION = {"local_threads"}


def same_program(ours: Any, english: Any) -> bool:
    """Whether two quiz programs are the same code, comments and layout aside (their syntax
    trees are equal)."""
    import ast

    if not (isinstance(ours, str) and isinstance(english, str)):
        return False
    try:
        return ast.dump(ast.parse(ours)) == ast.dump(ast.parse(english))
    except SyntaxError:
        return False


def _translatable(key: str) -> bool:
    return key not in NOT_TRANSLATED


def skeleton(code: str, name: str) -> str:
    """TOML for the tables of text file `name` that language `code` lacks or has stale: each with
    its `en` mark and its English strings, for a translator to replace with the translation."""
    import json

    theirs = _tables(_file(code, name))
    out = []
    for dotted, english in _tables(_file("en", name)).items():
        wanted = [k for k, v in english.items() if isinstance(v, str) and _translatable(k)]
        have = theirs.get(dotted, {})
        if set(wanted) <= set(have) and have.get(TRANSLATION_MARK) == english_hash(english):
            continue
        out += [f"[{dotted}]", f'{TRANSLATION_MARK} = "{english_hash(english)}"']
        out += [f"{k} = {json.dumps(english[k], ensure_ascii=False)}" for k in wanted]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """`python -m helpers.language status zh`: what is stale, wrong or missing in a language.
    `python -m helpers.language hash FILE TABLE`: the `en` mark of a table you have translated.
    `python -m helpers.language skeleton zh FILE`: the tables of FILE still to translate, as TOML
    with their `en` marks and the English text to replace."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] == "hash":
        print(english_hash(table(args[1], args[2])))
        return 0
    if len(args) == 3 and args[0] == "skeleton" and args[1] in LANGUAGES:
        print(skeleton(args[1], args[2]))
        return 0
    if len(args) == 2 and args[0] == "status" and args[1] in LANGUAGES:
        problems, missing = translation_problems(args[1]), untranslated(args[1])
        for line in problems:
            print("problem:", line)
        for line in missing:
            print("untranslated:", line)
        print(f"{len(problems)} problem(s), {len(missing)} untranslated table(s)")
        return 1 if problems else 0
    print(main.__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
