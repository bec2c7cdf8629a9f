"""Sphinx configuration of the course website, for either edition (site/build.py runs Sphinx
once per edition, with COURSE_SITE_EDITION set to its language code).

The notebooks are shown as committed: never executed here, so every output on the site is the one
`make test` compares with nbval. Widgets show the static form each output carries next to the
widget view (a picture, HTML or text); no widget JavaScript is loaded, and nothing at all is
fetched from another site, at build time or when a page is read.
"""

import os
import sys
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(SITE_DIR.parent), str(SITE_DIR)]  # helpers, and course_site

from course_site import TEXT  # noqa: E402

from tooling.course import REPOSITORY, site_url  # noqa: E402

course_edition = os.environ.get("COURSE_SITE_EDITION", "en")
text = TEXT[course_edition]

project = text["title"]
author = "autograd-notebooks"
copyright = "autograd-notebooks"
language = {"en": "en", "zh": "zh_CN"}[course_edition]
root_doc = "index"
extensions = ["myst_nb", "course_site"]
templates_path = [str(SITE_DIR / "_templates")]
html_static_path = [str(SITE_DIR / "_static")]
html_css_files = ["course.css"]

# --- the notebooks, as committed -------------------------------------------------------------
nb_execution_mode = "off"
nb_output_stderr = "warn"  # a notebook has none (tests/test_notebook_hygiene.py); fail if one does
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Never the widget view (it needs a kernel or the widget manager's JavaScript): the next form in
# the output instead, which for the course's widgets is their snapshot (SVG, HTML or text).
nb_mime_priority_overrides = [("html", WIDGET_VIEW, None), ("html", "application/javascript", None)]
nb_ipywidgets_js = {}  # myst-nb's default loads the widget manager from a CDN
nb_code_prompt_show = text["show"]
nb_code_prompt_hide = text["hide"]
myst_heading_anchors = 3
myst_heading_slug_func = "course_site.jupyter_anchor"  # JupyterLab's anchors: #Tidy-up

# --- pages -----------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = text["title"]
html_baseurl = site_url(edition=course_edition)
# The committed notebooks, each beside its page for "Download this notebook" (site/build.py).
html_extra_path = [p] if (p := os.environ.get("COURSE_SITE_DOWNLOADS")) else []
html_copy_source = False  # the notebooks are in the repository; the pages link to it
html_show_sourcelink = False
html_last_updated_fmt = None
# Light by default: the notebooks' pictures and tables are drawn on white (the switch stays).
html_context = {"default_mode": "light"}
html_theme_options = {
    "repository_url": REPOSITORY,
    "use_repository_button": True,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "article_header_end": ["course-links.html", "article-header-buttons.html"],
    "article_footer_items": ["course-provenance.html"],
    "navigation_with_keys": False,
    "navbar_persistent": [],  # the sidebar has the search field
}

# --- search ----------------------------------------------------------------------------------
# English: Sphinx's own index. Chinese: Sphinx's "zh" index, which splits words with jieba (from
# PyPI); course_site teaches it the glossary's terms (helpers/text/glossary.toml).
if course_edition == "zh":
    html_search_language = "zh"
