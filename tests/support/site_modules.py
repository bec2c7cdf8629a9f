"""The website's modules (site/build.py, site/course_site.py, site/pdf.py) as the tests load them.

site/ is no package (`site` is also a standard library module), so each is loaded from its file,
with site/ on sys.path only while it loads (its modules import each other by name).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parents[2] / "site"


def load_site_module(name: str):
    """site/NAME.py as a fresh module."""
    path = list(sys.path)
    sys.path.insert(0, str(SITE_DIR))
    try:
        spec = importlib.util.spec_from_file_location(f"site_{name}", SITE_DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path  # no `import build` or `import conf` elsewhere finds site/'s
    return module
