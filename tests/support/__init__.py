"""What the tests use and are not tests themselves: kernels, runners of notebooks, readers."""
