"""pytest configuration for the notebooks (nbval).

nbval compares every output of every code cell. Graph pictures are SVG whose layout depends on the
installed graphviz, so the SVG is skipped; every graph also carries a deterministic text/plain form
(helpers.graph), which nbval does compare. This is nbval's documented way to skip an output type.
"""


def pytest_collectstart(collector):
    if collector.path.suffix == ".ipynb" and hasattr(collector, "skip_compare"):
        collector.skip_compare += ("image/svg+xml",)


def pytest_configure(config):
    """nbval's kernels talk over Unix sockets (tests/support/kernel_sockets.py says why)."""
    if config.getoption("nbval", default=False) or config.getoption("nbval_lax", default=False):
        from tests.support.kernel_sockets import use_unix_sockets_in_nbval

        use_unix_sockets_in_nbval()
