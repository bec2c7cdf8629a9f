"""The runners behind make targets (test, check, bench, compat, mutate), and their tests."""
