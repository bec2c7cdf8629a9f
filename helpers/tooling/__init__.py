"""The course's own machinery that learners never import: the Chinese twins and their code's words.

    editions    the twins: built from the English, translated, checked in step (`make zh`)
    code_text   the comments and printed strings a twin's code may say in Chinese

`helpers/course.py` (badges, setup cells, contents, execution) is tooling too, but stays at the top:
every notebook's setup cell names it.
"""
