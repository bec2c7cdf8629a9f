"""`make mutate`: break the helpers on purpose (mutmut) and count the breaks the unit tests see.

    python -m tests.runners.mutate                      every module below, then MUTATION.md
    python -m tests.runners.mutate helpers/state.py     one module: its row of MUTATION.md again
    python -m tests.runners.mutate --survivors helpers/state.py   the same, and each survivor's diff
    python -m tests.runners.mutate --table              MUTATION.md from the last run (new reasons)
    python -m tests.runners.mutate --stale              the modules changed since their row, again

Each row records a hash of the code it measured (`code_hash`: the module's syntax tree without
its imports, so a module that only moved keeps its row). A module whose code changed since is
stale: no test fails on it (the score is an audit, run in the background); one module's run
brings its row up to date, and the other rows stay as they were.

Each module is mutated with only its own fast unit tests (never the notebooks: a mutant the
8-minute nbval run would catch still counts as a survivor here). Every module runs in its own
scratch copy of the repository under .mutate/, so runs never touch the working tree and several can
run side by side. Not part of `make test`: the whole run takes minutes.

A survivor that is harmless (an equivalent mutant, a message's wording) gets its reason in
tests/runners/mutation_survivors.toml; MUTATION.md lists every survivor, grouped by that reason,
and the ones nobody explained yet.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import functools
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = ROOT / ".mutate"
TABLE = ROOT / "MUTATION.md"
REASONS = ROOT / "tests" / "runners" / "mutation_survivors.toml"
GOAL = 0.85
#: Statuses that count as caught: a failing test, or a test that hangs (the mutant makes the code
#: loop forever, and mutmut stops it after its time limit).
CAUGHT = {"killed", "timeout"}
MUTMUT = [sys.executable, "-m", "mutmut"]

#: The modules that compute, each with the unit tests that must catch its mutants.
MODULES: dict[str, list[str]] = {
    "helpers/graph.py": ["tests/test_graph.py"],
    "helpers/state.py": ["tests/test_state.py"],
    "helpers/params.py": ["tests/test_params.py"],
    "helpers/checks.py": ["tests/test_checks.py"],
    "helpers/split.py": ["tests/test_split.py"],
    "helpers/memory.py": ["tests/test_memory.py"],
    "helpers/quiz.py": ["tests/test_quiz.py", "tests/exercises/test_nb10.py"],
    "helpers/language.py": ["tests/test_language.py"],
    "tooling/editions.py": ["tests/tooling/test_editions.py"],
    "tooling/code_text.py": ["tests/tooling/test_code_text.py"],
    "helpers/shapes.py": ["tests/test_shapes.py"],
    "helpers/naming.py": ["tests/test_naming.py"],
    "helpers/interactive/backward_recorder.py": ["tests/interactive/test_backward_recorder.py"],
    "helpers/interactive/explorers.py": ["tests/interactive/test_explorers.py"],
    "helpers/ranks/split_ranks.py": ["tests/ranks/test_split_ranks.py"],
    "helpers/ranks/failures.py": ["tests/ranks/test_failures.py", "tests/ranks/test_launch.py"],
    "helpers/ranks/pipeline_schedule.py": ["tests/ranks/test_schedule_display.py"],
    "helpers/ranks/pipeline_ranks.py": ["tests/ranks/test_pipeline_ranks.py"],
    "helpers/ranks/data_parallel_ranks.py": ["tests/ranks/test_data_parallel_ranks.py"],
    "helpers/ranks/cell_functions.py": ["tests/ranks/test_cell_functions.py"],
    "helpers/precision.py": ["tests/test_precision.py"],
    "helpers/module_hooks.py": ["tests/test_module_hooks.py"],
    "helpers/compiled_graphs.py": ["tests/test_compiled_graphs.py"],
    "helpers/doctor/unregistered.py": [
        "tests/doctor/test_unregistered.py",
        "tests/doctor/test_doctor.py",
    ],
    **{
        f"helpers/doctor/{part}.py": [
            "tests/doctor/test_doctor.py",
            "tests/doctor/test_doctor_parts.py",
        ]
        for part in ("report", "checkup")
    },
    # the recorder's watch, and what it must leave as it was: custom Functions, hooks, errors
    "helpers/doctor/record.py": [
        "tests/doctor/test_doctor.py",
        "tests/doctor/test_doctor_parts.py",
        "tests/doctor/test_doctor_changes_nothing.py",
        "tests/doctor/test_watching.py",
    ],
    "helpers/doctor/verdicts.py": [
        "tests/doctor/test_doctor.py",
        "tests/doctor/test_doctor_parts.py",
        "tests/doctor/test_doctor_changes_nothing.py",
    ],
    "helpers/doctor/watching.py": ["tests/doctor/test_watching.py"],
    "helpers/questions/__init__.py": ["tests/questions/test_questions.py"],
    **{
        f"helpers/explain/{part}.py": [
            *([f"tests/explain/test_{part}.py"] if part in ("explanation", "watch") else []),
            "tests/explain/test_catalogue.py",
            "tests/explain/test_kernel.py",
        ]
        for part in ("__init__", "catalogue", "explanation", "watch", "kernel")
    },
    "helpers/explain/scopes.py": [
        "tests/explain/test_scopes.py",
        "tests/explain/test_catalogue.py",
    ],
    **{
        f"helpers/exercises/{path.stem}.py": [
            f"tests/exercises/test_{path.stem}.py",
            "tests/exercises/test_feedback_text.py",
        ]
        for path in sorted((ROOT / "helpers" / "exercises").glob("*.py"))
        if path.stem != "__init__"
    },
    "helpers/rerun.py": ["tests/test_rerun.py"],
}

#: Modules whose tests start threads that talk gloo, run torch.compile or GradScaler's CPU
#: kernels: mutmut must not fork its workers from the process that ran them (a worker inherits
#: gloo's, dynamo's or the OpenMP thread pool's state and crashes or hangs, and a hang would count
#: as caught), so it forks them from a server process that ran no test.
FORKSERVER = {
    "helpers/ranks/pipeline_ranks.py",
    "helpers/ranks/data_parallel_ranks.py",
    "helpers/compiled_graphs.py",
    "helpers/exercises/nb09c.py",
    "helpers/precision.py",
    "helpers/exercises/nb09b.py",
    # the doctor's parts: their tests run a GradScaler step
    "helpers/doctor/checkup.py",
    "helpers/doctor/record.py",
    "helpers/doctor/verdicts.py",
    "helpers/doctor/report.py",
    "helpers/doctor/unregistered.py",
    "helpers/doctor/watching.py",
    # the explainer's: test_kernel.py runs torch.compile (forked after it, a worker hung on
    # mutants that change nothing, or crashed)
    "helpers/explain/__init__.py",
    "helpers/explain/catalogue.py",
    "helpers/explain/explanation.py",
    "helpers/explain/watch.py",
    "helpers/explain/kernel.py",
    "helpers/explain/scopes.py",
}

#: Modules left out, each with the reason (drawing and layout are checked by looking at them).
LEFT_OUT: dict[str, str] = {
    "helpers/interactive/widgets.py": "ipywidgets layout; the browser test clicks every widget",
    "helpers/display.py": "HTML and text rendering of tables; every notebook output shows it",
    "helpers/environment.py": "reports the learner's installation; nothing to compute",
    "tooling/course.py": "maintainer tooling (badges, sync); tests/tooling/test_course.py",
    "helpers/leakage.py": "figure layout of notebook 07's leak; its numbers are asserted there",
    "helpers/interactive/widget_pictures.py": (
        "drawing: HTML panes and SVG snapshots, checked by looking"
    ),
    "helpers/interactive/live.py": "a widget and its picture as one output; tests/test_quiz.py",
    "helpers/interactive/__init__.py": "the subpackage's table of contents; nothing to compute",
    "tooling/__init__.py": "the subpackage's table of contents; nothing to compute",
    "helpers/ranks/launch.py": (
        "the launcher (processes, ports, the forkserver): its ranks run in other processes, "
        "where mutmut cannot see them; tests/ranks/test_launch.py and test_split_run.py run it"
    ),
    "helpers/ranks/split_run.py": "07's run handed to the launcher; tests/ranks/test_split_run.py",
    "helpers/ranks/__main__.py": "the command line; tests/ranks/ run it, and under torchrun",
    "helpers/ranks/__init__.py": "the subpackage's table of contents; nothing to compute",
    "helpers/ranks/split_display.py": "figures and the tinted source of 07; nothing computed",
    "helpers/split_graphs.py": (
        "06's pictures: graphviz boxes, fonts and arrows (the 80 mutants that survive its tests "
        "change only how they look); tests/test_split_graphs.py checks their text, nodes and cuts"
    ),
    "helpers/ranks/schedule_display.py": "figures and source excerpts of 07b; nothing computed",
    "helpers/source.py": "source code as highlighted HTML; tests/ranks/test_split_run.py pins it",
    "helpers/__init__.py": "the list of public names; tests/test_public_helpers.py checks it",
    "helpers/doctor/__init__.py": "the doctor's public names, re-exported from its modules",
    "helpers/explain/__main__.py": "the command line; tests/explain/test_catalogue.py runs it",
}

_STATUS = re.compile(r"^\s*(\S+__mutmut_\d+): (.+)$")
_HEADER = "| module | tests | mutants | caught | of which hung | score | goal met | code |"


def code_hash(module: str) -> str:
    """A short hash of what mutmut mutates in `module`: its syntax tree without the imports and
    docstrings (moving a module to another package changes its imports, not what its tests must
    catch)."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if hasattr(node, "body") and isinstance(node.body, list):
            node.body = [n for n in node.body if not _unmutated(n)]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:10]


def _unmutated(node: ast.AST) -> bool:
    """An import or a docstring (a string standing alone): code mutmut never changes."""
    return isinstance(node, (ast.Import, ast.ImportFrom)) or (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def table_parts(text: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """MUTATION.md's rows and survivor sections, by module (each as its Markdown lines)."""
    rows: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        row = re.match(r"\| `((?:helpers|tooling)/[^`]+)` \|", line)
        heading = re.match(r"### `((?:helpers|tooling)/[^`]+)`$", line)
        if row:
            rows[row[1]] = line
        elif heading:
            current = sections.setdefault(heading[1], [])
            continue
        elif line.startswith("## "):
            current = None
        if current is not None:
            current.append(line)
    return rows, {m: _trimmed(lines) for m, lines in sections.items()}


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def row_code(row: str) -> str | None:
    """The code hash a row of MUTATION.md was measured on (None for a row without one)."""
    cells = [c.strip() for c in row.strip("|").split("|")]
    return cells[7].strip("`") if len(cells) > 7 else None


def stale_modules() -> list[str]:
    """The measured modules whose code changed since their row (or that have no row)."""
    rows, _ = table_parts(TABLE.read_text(encoding="utf-8")) if TABLE.exists() else ({}, {})
    return [m for m in MODULES if m not in rows or row_code(rows[m]) != code_hash(m)]


@dataclass
class ModuleResult:
    """One module's mutants by status."""

    module: str
    statuses: dict[str, str] = field(default_factory=dict)  # mutant name -> status

    @property
    def caught(self) -> int:
        return sum(s in CAUGHT for s in self.statuses.values())

    @property
    def timed_out(self) -> int:
        return sum(s == "timeout" for s in self.statuses.values())

    @property
    def survivors(self) -> list[str]:
        return sorted(name for name, s in self.statuses.items() if s not in CAUGHT)

    @property
    def score(self) -> float:
        return self.caught / len(self.statuses) if self.statuses else 0.0


#: What mutmut copies beside the mutated module (`scratch_for` says why).
ALSO_COPY = ("helpers/text", "helpers/__init__.py", "tooling", "notebooks")


def scratch_path(module: str) -> Path:
    """Where `module`'s scratch copy lives: .mutate/state, .mutate/exercises-hooks, ..."""
    return SCRATCH / module.removeprefix("helpers/").removesuffix(".py").replace("/", "-")


def scratch_for(module: str) -> Path:
    """A fresh copy of helpers/, tooling/, tests/, notebooks/ and pyproject.toml, configured to
    mutate `module`."""
    scratch = scratch_path(module)
    shutil.rmtree(scratch, ignore_errors=True)
    _changed_line.cache_clear()  # the mutants shown before were another run's
    scratch.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "browser")
    for folder in ("helpers", "tooling", "tests", "notebooks"):
        shutil.copytree(ROOT / folder, scratch / folder, ignore=ignore)
    config = (ROOT / "pyproject.toml").read_text()
    tests = ", ".join(f'"{t}"' for t in MODULES[module])
    config += (
        "\n[tool.mutmut]\n"
        f'source_paths = ["{module}"]\n'
        f"pytest_add_cli_args_test_selection = [{tests}]\n"
        'pytest_add_cli_args = ["-q", "-x", "-p", "no:randomly"]\n'
        # mutmut copies only the mutated .py file and runs the tests in that copy: helpers.language
        # reads its text beside it, `import helpers` needs the package's own __init__ (without
        # it, helpers is a namespace package there: no %load_ext, no public names), tests read
        # notebooks through tooling (05b's engine is its cells), and a module of a subpackage
        # imports its siblings (copied first, then mutated over).
        f"also_copy = {json.dumps(list(dict.fromkeys([*ALSO_COPY, *_subpackage(module)])))}\n"
    )
    if module in FORKSERVER:
        config += 'process_isolation = "forkserver"\n'

    (scratch / "pyproject.toml").write_text(config)
    return scratch


def _subpackage(module: str) -> list[str]:
    """The folder of a module inside a subpackage of helpers/, or tooling/ (none for a top-level
    module of helpers/)."""
    folder = Path(module).parent.as_posix()
    return [] if folder == "helpers" else [folder]


def mutate(module: str) -> ModuleResult:
    """Run mutmut over one module with its tests; every mutant's status."""
    if module not in MODULES:
        known = ", ".join(MODULES)
        raise SystemExit(f"{module} is not in tests/runners/mutate.py's MODULES: {known}")
    if importlib.util.find_spec("mutmut") is None:
        raise SystemExit("mutmut is not installed here: `make mutate` installs it first")
    scratch = scratch_for(module)
    run = subprocess.run([*MUTMUT, "run"], cwd=scratch, capture_output=True, text=True)
    if run.returncode not in (0, 1):
        raise SystemExit(f"mutmut failed on {module}:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    return last_result(module)


def last_result(module: str) -> ModuleResult:
    """Every mutant's status from `module`'s last run (kept in its scratch copy)."""
    scratch = scratch_path(module)
    if not (scratch / "mutants").is_dir():
        raise SystemExit(f"{module} has no mutation run to read: run `make mutate` first")
    listing = subprocess.run(
        [*MUTMUT, "results", "--all", "true"], cwd=scratch, capture_output=True, text=True
    )
    result = ModuleResult(module)
    for line in listing.stdout.splitlines():
        found = _STATUS.match(line)
        if found:
            result.statuses[found.group(1)] = found.group(2).strip()
    if not result.statuses:
        raise SystemExit(f"mutmut reported no mutants for {module}:\n{listing.stdout[-2000:]}")
    return result


def survivor_diff(module: str, name: str) -> str:
    """The changed line of one mutant (from the module's scratch copy)."""
    return _changed_line(scratch_path(module), name)


@functools.cache
def _changed_line(scratch: Path, name: str) -> str:
    """`mutmut show` once per mutant of a run: a run asks for a survivor's line up to three
    times (--survivors, carried_reasons, the table), and each asks a new mutmut process."""
    shown = subprocess.run(
        [*MUTMUT, "show", name],
        cwd=scratch,
        capture_output=True,
        text=True,
    ).stdout
    added = [line[1:].strip() for line in shown.splitlines() if line.startswith("+ ")]
    added = added or [line[1:].strip() for line in shown.splitlines() if line.startswith("+")]
    return next((a for a in added if not a.startswith("++")), "?")


def reasons() -> dict[str, dict[str, str]]:
    """module -> mutant name -> why it may survive (tests/runners/mutation_survivors.toml)."""
    if not REASONS.exists():
        return {}
    return tomllib.loads(REASONS.read_text())


_SURVIVOR_LINE = re.compile(r"  - `([^`]+)` \([^)]*\): `(.*)`$")


def explained_survivors(section: list[str]) -> dict[tuple[str, str], list[str]]:
    """A module's explained survivors in MUTATION.md (its section's lines), by (the function a
    mutant changes, its changed line): the mutant names, in order."""
    found: dict[tuple[str, str], list[str]] = {}
    reason = ""
    for line in section:
        if line.startswith("- ") and line.endswith(":"):
            reason = line[2:-1]
            continue
        entry = _SURVIVOR_LINE.match(line)
        if entry and reason != "not explained yet":
            key = (entry[1].rsplit("__mutmut_", 1)[0], entry[2].replace("\\|", "|"))
            found.setdefault(key, []).append(entry[1])
    return found


def carried_reasons(
    results: list[ModuleResult], table: str, why: dict[str, dict[str, str]]
) -> dict[str, str]:
    """Old name -> new name, for each survivor without a reason that MUTATION.md (`table`, as
    it was) lists as explained under another name: mutmut numbers a function's mutants in
    order, so a change above a survivor renumbers it, and its reason follows it by what it
    changes (the function and the changed line), not by its number."""
    _, sections = table_parts(table)
    renamed: dict[str, str] = {}
    for r in results:
        known = why.get(r.module, {})
        old = explained_survivors(sections.get(r.module, []))
        survivors = set(r.survivors)
        for name in r.survivors:
            if name in known:
                continue
            key = (name.rsplit("__mutmut_", 1)[0], survivor_diff(r.module, name))
            for before in old.get(key, []):
                if before in known and before not in survivors and before not in renamed:
                    renamed[before] = name
                    break
    taken = {n for reasons in why.values() for n in reasons} - set(renamed)
    return {before: after for before, after in renamed.items() if after not in taken}


def rename_reasons(renamed: dict[str, str]) -> None:
    """Give the reasons of tests/runners/mutation_survivors.toml their mutants' new names."""
    if not renamed:
        return
    text = REASONS.read_text(encoding="utf-8")
    REASONS.write_text(
        re.sub(r'^"([^"]+)"(\s*=)', lambda m: f'"{renamed.get(m[1], m[1])}"{m[2]}', text,
               flags=re.MULTILINE),
        encoding="utf-8",
    )  # fmt: skip


def result_row(r: ModuleResult) -> str:
    """One module's row of MUTATION.md, with the hash of the code it measured."""
    tests = ", ".join(Path(t).name for t in MODULES[r.module])
    met = "yes" if r.score >= GOAL else "**no**"
    return (
        f"| `{r.module}` | {tests} | {len(r.statuses)} | {r.caught} | {r.timed_out} "
        f"| {r.score:.0%} | {met} | `{code_hash(r.module)}` |"
    )


def survivor_section(r: ModuleResult, why: dict[str, dict[str, str]]) -> list[str]:
    """One module's survivors, grouped by the reason each may survive (empty: none survived)."""
    if not r.survivors:
        return []
    groups: dict[str, list[str]] = {}
    for name in r.survivors:
        reason = why.get(r.module, {}).get(name, "not explained yet")
        groups.setdefault(reason, []).append(name)
    lines = []
    for reason, names in sorted(groups.items()):
        lines.append(f"- {reason}:")
        for name in names:
            diff = survivor_diff(r.module, name).replace("|", "\\|")
            lines.append(f"  - `{name}` ({r.statuses[name]}): `{diff}`")
    return lines


def write_table(results: list[ModuleResult], keep: str = "") -> str:
    """MUTATION.md: score per module against the goal, and every survivor by reason. Rows and
    survivors of modules not in `results` are kept from `keep` (the table as it was)."""
    why = reasons()
    rows, sections = table_parts(keep)
    for r in results:
        rows[r.module] = result_row(r)
        sections[r.module] = survivor_section(r, why)
    today = datetime.date.today().isoformat()
    lines = [
        "# Mutation score of the helpers",
        "",
        f"<!-- generated by `make mutate` (last run {today}); do not edit by hand -->",
        "",
        f"Each module's mutants (mutmut) against its own unit tests. Goal: {GOAL:.0%} caught. A "
        "mutant is caught when a test fails, or when the tests hang on it (it makes a loop run "
        "forever, and mutmut stops them after its time limit); the hung ones are counted apart. "
        "`code` is the hash of the code measured (`tests.runners.mutate.code_hash`): a module "
        "whose code changed since is stale until it is measured again: `make mutate STALE=1` "
        "lists the stale rows and measures them.",
        "",
        _HEADER,
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    lines += [rows[m] for m in MODULES if m in rows]
    lines += ["", "Left out, with the reason:", ""]
    lines += [f"- `{module}`: {reason}" for module, reason in LEFT_OUT.items()]
    lines += ["", "## Survivors", ""]
    for module in MODULES:
        if sections.get(module):
            lines += [f"### `{module}`", "", *sections[module], ""]
    stale = stale_reasons(results, why)
    if stale:
        lines += [
            "## Reasons with no survivor",
            "",
            "These mutants are caught now (or no longer exist): delete their lines from "
            "tests/runners/mutation_survivors.toml.",
            "",
        ]
        lines += [f"- `{name}`" for name in stale]
    return "\n".join(lines).rstrip() + "\n"


def reread_configuration() -> None:
    """MODULES, LEFT_OUT and FORKSERVER as this file says now. A run takes minutes and
    the file may change meanwhile (a module added, a row due again): the table written at the end
    follows the file as it is then, not as it was when the run started."""
    spec = importlib.util.spec_from_file_location("_mutate_now", Path(__file__))
    assert spec is not None and spec.loader is not None
    now = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = now  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(now)
    finally:
        del sys.modules[spec.name]
    for name in ("MODULES", "LEFT_OUT", "FORKSERVER"):
        old, new = globals()[name], getattr(now, name)
        old.clear()
        old.update(new)


def stale_reasons(results: list[ModuleResult], why: dict[str, dict[str, str]]) -> list[str]:
    """Explained mutants of the modules in `results` that did not survive this run."""
    stale = []
    for r in results:
        survivors = set(r.survivors)
        stale += sorted(name for name in why.get(r.module, {}) if name not in survivors)
    return stale


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="helpers/... files (default: all)")
    parser.add_argument("--survivors", action="store_true", help="print each survivor's diff")
    parser.add_argument(
        "--table",
        action="store_true",
        help="rewrite MUTATION.md from the last run's results (after editing the reasons)",
    )
    parser.add_argument(
        "--stale",
        action="store_true",
        help="measure only the modules whose code changed since their row (they are listed first)",
    )
    args = parser.parse_args(argv)
    if args.stale:
        if args.modules or args.table:
            parser.error("--stale chooses the modules itself: give no modules, no --table")
        args.modules = stale_modules()
        print("stale rows: " + (", ".join(args.modules) or "none"))
        if not args.modules:
            return 0
    modules = args.modules or list(MODULES)
    if args.table and args.modules:
        parser.error("--table rewrites the whole table: give no modules")
    results = []
    for module in modules:
        result = last_result(module) if args.table else mutate(module)
        results.append(result)
        print(f"{module}: {result.caught}/{len(result.statuses)} caught ({result.score:.0%})")
        if args.survivors:
            for name in result.survivors:
                print(f"  {name} ({result.statuses[name]}): {survivor_diff(module, name)}")
    reread_configuration()
    before = TABLE.read_text(encoding="utf-8") if TABLE.exists() else ""
    renamed = carried_reasons(results, before, reasons())
    rename_reasons(renamed)
    if renamed:
        print(f"{len(renamed)} reasons follow their renumbered mutants")
    keep = before if args.modules else ""
    TABLE.write_text(write_table(results, keep), encoding="utf-8")
    print(f"wrote {TABLE.name}" + (f" (the rows of {', '.join(args.modules)})" if keep else ""))
    return 0 if all(r.score >= GOAL for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
