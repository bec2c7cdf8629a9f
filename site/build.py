"""Build the course website from the committed notebooks, both editions, without running them.

    python site/build.py [--out DIR] [--edition CODE ...]       (`make site`: into _site/)

Each edition (tooling.course.EDITIONS) is its own Sphinx project with site/conf.py, so each has
its own navigation, search index and interface language: English at the site's root, Chinese
under zh/ (OUT/html/ and OUT/html/zh/). The editions build side by side, from scratch every time
(a Sphinx that reuses its state reports no warning for pages it does not re-read), with warnings
as errors.

Sphinx reads a staged copy of each notebook in OUT/editions/EDITION/source/ (`prepare_notebook`
says what changes for the page: never a cell's source or outputs), next to a home page listing the
notebooks in course order (`home_page`), and writes OUT/editions/EDITION/html/, which is then
copied into the site, OUT/html/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent
ROOT = SITE_DIR.parent
sys.path[:0] = [str(ROOT), str(SITE_DIR)]

from course_site import TEXT, book_url  # noqa: E402

from tooling.course import (  # noqa: E402
    BADGE_TAG,
    EDITIONS,
    HIDE_TAG,
    NOTEBOOKS,
    REPOSITORY,
    SETUP_TAG,
    course_notebooks,
)

__all__ = [
    "DEFAULT_OUT",
    "build",
    "downloads_folder",
    "home_page",
    "prepare_notebook",
    "site_folder",
    "stage",
]

DEFAULT_OUT = ROOT / "_site"
#: Cells a page leaves out: the badges (the page's header has the same links) and the Colab-only
#: install cell (it does nothing outside Colab).
REMOVED_ON_THE_SITE = (BADGE_TAG, SETUP_TAG)
_TITLE = "# @title "


def prepare_notebook(nb: dict, edition: str) -> dict:
    """A notebook as its page shows it. Cell sources and outputs stay as committed; only metadata
    changes: the badge and Colab-setup cells are left out, each folded answer or solution is
    titled by its `# @title` line (as Colab titles it), and the saved widget state, which only the
    widget manager's JavaScript could use, is dropped (every widget output also carries a static
    snapshot, which the page shows)."""
    nb = json.loads(json.dumps(nb))
    nb.get("metadata", {}).pop("widgets", None)
    words = TEXT[edition]
    for cell in nb["cells"]:
        metadata = cell.setdefault("metadata", {})
        tags = metadata.setdefault("tags", [])
        if any(tag in tags for tag in REMOVED_ON_THE_SITE):
            tags.append("remove-cell")
        if HIDE_TAG in tags:
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            first = source.split("\n", 1)[0]
            show = first.removeprefix(_TITLE).strip() if first.startswith(_TITLE) else None
            metadata["mystnb"] = {
                **metadata.get("mystnb", {}),
                "code_prompt_show": show or words["show"],
                "code_prompt_hide": words["hide"],
            }
    return nb


def home_page(edition: str) -> str:
    """The edition's home page (MyST Markdown): what the course is, how to read the site, and the
    notebooks in course order (its table of contents is also the site's navigation)."""
    words = TEXT[edition]
    names = [p.stem for p in course_notebooks(NOTEBOOKS / EDITIONS[edition])]
    toctree = "\n".join(names)
    return (
        f"# {words['title']}\n\n{words['intro']}\n\n{words['reading']}\n\n"
        f"## {words['contents']}\n\n"
        f"```{{toctree}}\n:maxdepth: 1\n\n{toctree}\n```\n\n"
        f"{words['book'].format(**{e: book_url(e) for e in EDITIONS})}\n\n"
        f"{words['elsewhere'].format(repository=REPOSITORY)}\n"
    )


def stage(edition: str, source: Path) -> list[str]:
    """Write the edition's Sphinx source into `source` (emptied first), and the committed notebooks
    into `downloads_folder(source)` (each page offers its own for download); return them."""
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    downloads = downloads_folder(source)
    shutil.rmtree(downloads, ignore_errors=True)
    downloads.mkdir(parents=True)
    notebooks = course_notebooks(NOTEBOOKS / EDITIONS[edition])
    for path in notebooks:
        shutil.copy2(path, downloads / path.name)
        nb = json.loads(path.read_text(encoding="utf-8"))
        staged = json.dumps(prepare_notebook(nb, edition), ensure_ascii=False, indent=1)
        (source / path.name).write_text(staged + "\n", encoding="utf-8")
    (source / "index.md").write_text(home_page(edition), encoding="utf-8")
    return [p.name for p in notebooks]


def downloads_folder(source: Path) -> Path:
    """Where `stage` puts the committed notebooks, next to an edition's Sphinx source."""
    return source.parent / "downloads"


def site_folder(out: Path, edition: str) -> Path:
    """Where an edition's pages are in the built site."""
    return out / "html" / EDITIONS[edition] if EDITIONS[edition] else out / "html"


def build(out: Path = DEFAULT_OUT, editions: list[str] | None = None) -> float:
    """Stage and build the editions side by side; return the seconds it took. Raises
    SystemExit with Sphinx's report when an edition fails (a warning is a failure)."""
    editions = editions or list(EDITIONS)
    start = time.monotonic()
    runs = {}
    for edition in editions:
        work = out / "editions" / edition  # myst-nb also writes into work/jupyter_execute
        shutil.rmtree(work, ignore_errors=True)
        stage(edition, work / "source")
        command = [
            sys.executable, "-m", "sphinx", "--builder", "html", "--fail-on-warning",
            "--keep-going", "--fresh-env", "--quiet", "--conf-dir", str(SITE_DIR),
            "--doctree-dir", str(work / "doctrees"), str(work / "source"), str(work / "html"),
        ]  # fmt: skip
        env = dict(
            os.environ,
            COURSE_SITE_EDITION=edition,
            COURSE_SITE_DOWNLOADS=str(downloads_folder(work / "source")),
        )
        runs[edition] = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    failed = []
    for edition, run in runs.items():
        report = run.communicate()[0]
        if run.returncode:
            failed.append(f"--- {edition} (exit {run.returncode}):\n{report}")
        elif report.strip():
            print(f"--- {edition}:\n{report}", end="")
    if failed:
        raise SystemExit("the website did not build:\n" + "\n".join(failed))
    shutil.rmtree(out / "html", ignore_errors=True)
    for edition in sorted(editions, key=lambda e: bool(EDITIONS[e])):  # the root's edition first
        shutil.copytree(out / "editions" / edition / "html", site_folder(out, edition))
    (out / "html" / ".nojekyll").write_text("")  # GitHub Pages: serve _static/ as it is
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: _site/")
    parser.add_argument("--edition", action="append", choices=list(EDITIONS))
    args = parser.parse_args(argv)
    seconds = build(args.out.resolve(), args.edition)
    print(f"website built in {seconds:.0f} s: {args.out / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
