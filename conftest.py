"""pytest configuration for the notebooks (nbval).

nbval compares every output of every code cell. Graph pictures are SVG whose layout depends on the
installed graphviz, so the SVG is skipped; every graph also carries a deterministic text/plain form
(helpers.graph), which nbval does compare. This is nbval's documented way to skip an output type.
"""


def pytest_collectstart(collector):
    if collector.path.suffix == ".ipynb" and hasattr(collector, "skip_compare"):
        collector.skip_compare += ("image/svg+xml",)
