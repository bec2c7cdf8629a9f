"""A fixture for test files whose tests run convolutions: torch on one thread during each test.

The mutation runner (tests/runners/mutate.py) forks a process per mutant, and a child forked after
torch started its thread pool (a convolution does) hangs. Import `one_thread` into such a test file.
"""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Run torch on one thread for the test, then restore the thread count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
