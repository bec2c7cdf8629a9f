"""Exercise checkers, one module per notebook: each says what is wrong, not just "False"."""
