"""The course's own machinery, which learners never install: the package (`helpers/`) is theirs.

    course      the notebooks as a whole: badges, setup cells, contents, README sync, execution
    editions    the Chinese twins: built from the English, translated, checked in step (`make zh`)
    code_text   the comments and printed strings a twin's code may say in Chinese

Run from the repository's root (`python -m tooling.course sync`); pyproject.toml ships only
`helpers`, so Colab and Binder install none of this.
"""
