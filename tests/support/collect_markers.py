"""A pytest plugin for tests/runners/test_steps.py: with --collect-only, write each test's id and
markers as JSON lines to the file named by COLLECT_MARKERS_OUT."""

from __future__ import annotations

import json
import os


def pytest_collection_finish(session):
    path = os.environ.get("COLLECT_MARKERS_OUT")
    if not path:
        return
    with open(path, "w") as out:
        for item in session.items:
            markers = sorted({m.name for m in item.iter_markers()})
            out.write(json.dumps({"id": item.nodeid, "markers": markers}) + "\n")
