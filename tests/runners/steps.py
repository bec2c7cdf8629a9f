"""`make test` and `make check`: their steps, run side by side on the machine's cores, each timed.

    python -m tests.runners.steps test     every check (what `make test` runs after installing)
    python -m tests.runners.steps check    the fast loop: lint, and unit tests that run no notebook
    python -m tests.runners.steps test --only nbval-en,browser   some steps of `test`, by name

Each step is one command. Steps are independent (none reads what another writes), so they run
in parallel, as many at once as the machine has cores (at least 2; `--jobs N` to choose), longest
first. Each step's output goes to `.artifacts/steps/NAME.log` and is printed whole, in the order
the steps finish, so pytest's closing lines appear as usual. At the end a table gives each step's
result and time, and the exit code is 1 when any step failed.

Why parallel is safe here: each notebook runs in a kernel of its own; the browser test serves a
temporary copy of the notebooks; every kernel talks over Unix sockets of its own
(tests/support/kernel_sockets.py), so no TCP connection of one step can take another's kernel port;
rank 0 of every distributed run opens its store on the port the system gives it as it binds
(helpers/ranks/launch.py); and no step writes into `notebooks/` (the offline pass asserts it for
every notebook).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / ".artifacts" / "steps"
PYTHON = sys.executable
#: Where the steps find the kernel spec of tests/support/warm_kernel.py (written when the steps
#: start).
KERNELS = ROOT / ".artifacts" / "kernels"
#: nbval's kernels are forked from a process that imported torch once
#: (tests/support/warm_kernel.py): a new process that has run no notebook code. Run All in an
#: ordinary kernel, as a learner starts it, is what the offline pass, the browser runs and the
#: Colab emulation do.
NBVAL = [
    "-m", "pytest", "--nbval", "--nbval-kernel-name", "course-warm",
    "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-q",
]  # fmt: skip


#: nbval's runs of the English notebooks: as is, and with torch's CPU kernels forced to AVX2, so
#: that no compared number depends on the learner's processor.
KERNEL_SETS = [
    ("", "as is", {}),
    ("-avx2", "on AVX2 kernels", {"ATEN_CPU_CAPABILITY": "avx2"}),
]
#: The third CPU path, plain code, is the Chinese twins' run: a twin's outputs carry the English
#: notebook's numbers (tests/tooling/test_editions.py), so one run checks the twin's words and the
#: course's numbers on plain kernels, and a fourth pass of the English notebooks would add nothing.
PLAIN_KERNELS = {"ATEN_CPU_CAPABILITY": "default"}
#: What ruff checks (the Makefile's `lint` names the same).
LINTED = ["helpers", "tooling", "tests", "notebooks", "site", "conftest.py"]


@dataclass(frozen=True)
class Step:
    """One command of `make test`: its name, what it proves, the command and its environment."""

    name: str
    proves: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    #: Seconds it took on 2 cores, two steps at a time (`make test` on 2026-12-07, less what the
    #: Chinese twins' cuts saved): order only, the longest start first, so none is left alone last.
    expected: float = 10.0
    #: Whether Jupyter finds the warm kernel's spec (KERNELS): nbval's steps start theirs by name.
    warm_kernels: bool = False


#: The first step of both `make test` and the one-notebook check.
LINT = Step("lint", "one lint configuration", [PYTHON, "-m", "ruff", "check", *LINTED], expected=2)


def _notebooks(folder: str = "notebooks") -> list[str]:
    from tooling.course import course_notebooks

    return [str(p.relative_to(ROOT)) for p in course_notebooks(ROOT / folder)]


#: The files of the steps that run notebooks: a step names its files, for collecting every test
#: under tests/ to select a few takes seconds (test_steps checks that every test runs in one step).
NOTEBOOK_RUNS = ["tests/test_faults.py", "tests/test_colab_emulation.py"]
RERUN = "tests/test_rerun_notebooks.py"
#: browser-en's tests: the browser tests but the Chinese notebooks' (browser-zh) and the site's.
BROWSER_EN = "not chinese_notebook and not test_site and not test_pdf"


def find_notebook(name: str) -> Path:
    """The English notebook `name` means: "07b", "07b_pipeline_and_data_parallel", or a path to
    it or to its twin. Exits with the names to choose from when none or several match."""
    from tooling.course import course_notebooks

    stem = Path(name).name.removesuffix(".ipynb")
    notebooks = course_notebooks(ROOT / "notebooks")
    found = [p for p in notebooks if p.stem == stem] or [
        p for p in notebooks if p.stem.split("_")[0] == stem
    ]
    if len(found) != 1:
        names = ", ".join(p.stem.split("_")[0] for p in notebooks)
        raise SystemExit(f"no single notebook is called {name!r}; choose one of: {names}")
    return found[0]


def imported_helpers(notebook: Path) -> set[str]:
    """The helpers modules a notebook's code imports (`from helpers import x` counts the module
    that holds x, as `helpers/__init__.py` says)."""
    import ast

    import nbformat

    import helpers

    found: set[str] = set()
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse("\n".join(
                line for line in cell.source.splitlines() if not line.startswith(("%", "!"))
            ))  # fmt: skip
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("helpers"):
                for alias in node.names:
                    if node.module == "helpers":
                        home = helpers._HOME.get(alias.name, alias.name)  # a name or a module
                        found.add(f"helpers.{home}")
                    else:
                        found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("helpers.")}
    return found


def unit_tests_of(modules: set[str]) -> list[str]:
    """The unit test files of some helpers modules: tests/ mirrors helpers/ (helpers/a/b.py is
    tested by tests/a/test_b.py), plus the tests `make mutate` measures each module with."""
    from tests.runners.mutate import MODULES

    files = set()
    for module in modules:
        parts = module.split(".")[1:]
        path = ROOT / "helpers" / Path(*parts)
        source = path.with_suffix(".py") if path.with_suffix(".py").exists() else path
        mirror = ROOT / "tests" / Path(*parts[:-1]) / f"test_{parts[-1]}.py"
        if mirror.exists():
            files.add(mirror.relative_to(ROOT).as_posix())
        rel = source.relative_to(ROOT).as_posix()
        files |= set(MODULES.get(rel, []))
    return sorted(files)


#: The unit tests' selection: every test that runs no notebook and opens no browser.
UNIT = "not notebooks and not browser and not rerun"


def test_steps(notebook: Path | None = None) -> list[Step]:
    """Every step of `make test`, in the order CONTRIBUTING.md's table lists them.

    With `notebook` (an English notebook), the one-notebook check: the same steps narrowed to
    what a change to it can break. Its Run All offline (and on emulated Colab), its re-runs, its
    browser run, nbval on every CPU path, its twin (in step, in nbval, re-run, in the browser), and
    the unit tests of the helpers it imports in place of every unit test; the whole suite stays
    CI's."""
    pytest = [PYTHON, "-m", "pytest", "-q", "--durations=10"]  # the slowest, in each log
    one = notebook is not None
    if one:
        english = [str(notebook.relative_to(ROOT))]
        chinese = [str((ROOT / "notebooks" / "zh" / notebook.name).relative_to(ROOT))]
        prefix = notebook.stem.split("_")[0] + "_"
        chosen = {"COURSE_NOTEBOOK": prefix}
        whose = "its "
    else:
        english, chinese, chosen, whose = _notebooks(), _notebooks("notebooks/zh"), {}, ""
    return [
        LINT,
        Step(
            "its helpers",
            "the unit tests of the helpers it imports; both editions in step; its hygiene",
            [
                *pytest,
                *unit_tests_of(imported_helpers(notebook)),
                "tests/tooling/test_editions.py",
                "tests/test_notebook_hygiene.py",
                "tests/test_budgets.py",
                "-m",
                UNIT,
                "-k",
                f"{prefix} or not ipynb",
            ],
            expected=135,
        )
        if one
        else Step(
            "unit",
            "the helpers' behaviour (tests that run no notebook)",
            [*pytest, "tests", "-m", UNIT],
            expected=195,
        ),
        Step(
            "notebook runs",
            "Run All offline, without dot" + ("" if one else ", shuffled") + "; Colab emulated",
            [
                *pytest,
                *NOTEBOOK_RUNS,
                "-m",
                "notebooks and not browser",
            ],
            env=chosen,
            expected=95 if one else 165,
        ),
        Step(
            "rerun",
            "every cell run twice in a row explains itself; both editions"
            if one
            else "every cell of every notebook run twice in a row explains itself; three twins too",
            [*pytest, RERUN, "-m", "rerun", *(["-k", "explains_itself"] if one else [])],
            env=chosen,
            expected=85 if one else 125,
        ),
        *(
            [
                Step(
                    "browser",
                    "JupyterLab runs it in Chromium; both editions",
                    [*pytest, "tests/browser/test_browser.py", "-k", prefix],
                    env=chosen,
                    expected=95,
                )
            ]
            if one
            else [
                Step(
                    "browser-en",
                    "JupyterLab runs every notebook in Chromium",
                    [*pytest, "tests/browser", "-m", "browser", "-k", BROWSER_EN],
                    expected=180,
                ),
                Step(
                    "site",
                    "the website and the books of both editions: every page read and audited "
                    "for accessibility in both colour schemes, both PDFs printed and checked",
                    [*pytest, "tests/browser/test_site.py", "tests/browser/test_pdf.py"],
                    expected=200,
                ),
                Step(
                    "browser-zh",
                    "JupyterLab runs the Chinese start page and the twins with widgets in "
                    "Chromium",
                    [*pytest, "tests/browser/test_browser.py", "-k", "chinese_notebook"],
                    expected=55,
                ),
            ]
        ),
        *(
            Step(
                f"nbval-en{suffix}",
                f"{whose}committed outputs, {kernels}",
                [PYTHON, *NBVAL, *english],
                env=env,
                expected=15 if one else 50,
                warm_kernels=True,
            )
            for suffix, kernels, env in KERNEL_SETS
        ),
        Step(
            "nbval-zh",
            ("its twin's committed outputs" if one else "the Chinese twins' committed outputs")
            + ", on plain kernels",
            [PYTHON, *NBVAL, *chinese],
            env=PLAIN_KERNELS,
            expected=15 if one else 45,
            warm_kernels=True,
        ),
    ]


def notebook_steps(name: str) -> list[Step]:
    """The one-notebook check of notebook `name` ("07b"): `test_steps` narrowed to it."""
    return test_steps(find_notebook(name))


def check_steps(workers: int = 2) -> list[Step]:
    """The fast loop: lint, and every unit test that executes no notebook and opens no browser,
    spread over `workers` processes (pytest-xdist): alone, `unit` would leave all cores but one
    idle. In `make test` the steps themselves fill the cores, so there it runs in one process."""
    chosen = [s for s in test_steps() if s.name in {"lint", "unit"}]
    return [
        replace(s, command=[*s.command, "-n", str(workers)]) if s.name == "unit" else s
        for s in chosen
    ]


@dataclass
class Outcome:
    """What one step did."""

    step: Step
    returncode: int
    seconds: float
    log: Path


def threads_per_step(jobs: int, cores: int | None = None) -> int:
    """torch's threads for each of `jobs` steps run at once: the cores shared out, at least one.

    torch starts as many threads as the machine has cores in every process: two steps on two
    cores would then make each parallel operation wait for a thread that the other step's
    process holds, and a small model's training step takes many times as long as on one thread
    (CONTRIBUTING.md, `make test`). The numbers do not change: nbval compares them."""
    return max(1, (cores or os.cpu_count() or 1) // max(1, jobs))


def step_environment(step: Step, threads: int | None = None) -> dict[str, str]:
    """The environment a step runs in: this one and the step's own variables; torch's threads
    set to `threads` unless this environment sets them (OMP_NUM_THREADS); for a step that
    starts warm kernels, Jupyter's path with their spec (KERNELS) first."""
    from tests.support.warm_kernel import jupyter_path

    env = {**os.environ, **step.env}
    if threads is not None:
        env.setdefault("OMP_NUM_THREADS", str(threads))
    if step.warm_kernels:
        env["JUPYTER_PATH"] = jupyter_path(KERNELS, env)
    return env


def run_step(step: Step, threads: int | None = None) -> Outcome:
    """Run one step with its output in its log file (torch on `threads` threads, when given)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / (step.name.replace(" ", "-") + ".log")
    start = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            step.command,
            cwd=ROOT,
            env=step_environment(step, threads),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    return Outcome(step, done.returncode, time.monotonic() - start, log)


def summary(outcomes: list[Outcome], wall: float, jobs: int, order: list[str]) -> str:
    """The table printed at the end: each step's result and time, in `order` (the steps' names
    as listed), then the whole."""
    width = max(len(o.step.name) for o in outcomes)
    lines = [f"{'step':<{width}}  result  seconds  what it proves"]
    for o in sorted(outcomes, key=lambda o: order.index(o.step.name)):
        result = "ok" if o.returncode == 0 else "FAILED"
        lines.append(f"{o.step.name:<{width}}  {result:<6}  {o.seconds:7.1f}  {o.step.proves}")
    busy = sum(o.seconds for o in outcomes)
    lines.append(
        f"{'all':<{width}}  {'ok' if all(o.returncode == 0 for o in outcomes) else 'FAILED':<6}"
        f"  {wall:7.1f}  wall clock, {jobs} at a time ({busy:.0f} s of steps)"
    )
    return "\n".join(lines)


ALL = test_steps()


def run(steps: list[Step], jobs: int) -> int:
    """Run `steps`, `jobs` at a time, longest first; print each log as it ends, then the table."""
    if any(s.warm_kernels for s in steps):
        from tests.support.warm_kernel import write_spec

        write_spec(KERNELS)
    start = time.monotonic()
    outcomes = []
    order = sorted(steps, key=lambda s: -s.expected)
    print(f"running {len(steps)} steps, {jobs} at a time: {', '.join(s.name for s in order)}")
    threads = threads_per_step(min(jobs, len(steps))) if len(steps) > 1 else None
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_step, s, threads) for s in order]
        for future in as_completed(futures):
            outcome = future.result()
            outcomes.append(outcome)
            result = "ok" if outcome.returncode == 0 else f"FAILED (exit {outcome.returncode})"
            print(f"\n===== {outcome.step.name}: {result} in {outcome.seconds:.1f} s =====")
            print(" ".join(outcome.step.command))
            print(outcome.log.read_text(errors="replace").rstrip(), flush=True)
    print("\n" + summary(outcomes, time.monotonic() - start, jobs, [s.name for s in steps]))
    return 0 if all(o.returncode == 0 for o in outcomes) else 1


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=["test", "check"])
    parser.add_argument("--only", help="comma-separated step names")
    parser.add_argument(
        "--notebook", help="test: prove one notebook (e.g. 07b), not the whole course"
    )
    parser.add_argument("--jobs", type=int, default=max(2, os.cpu_count() or 2))
    args = parser.parse_args(argv)
    if args.notebook and args.which != "test":
        parser.error("--notebook goes with test: python -m tests.runners.steps test --notebook 07b")
    steps = check_steps(args.jobs) if args.which == "check" else test_steps()
    if args.notebook:
        steps = notebook_steps(args.notebook)
    if args.only:
        wanted = [name.strip() for name in args.only.split(",")]
        unknown = [n for n in wanted if n not in {s.name for s in steps}]
        if unknown:
            names = ", ".join(s.name for s in steps)
            parser.error(f"no step named {', '.join(unknown)}; the steps are: {names}")
        steps = [s for s in steps if s.name in wanted]
    return run(steps, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
