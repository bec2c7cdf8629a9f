"""What the exercise checkers' tests share."""


def text(result) -> str:
    """A CheckResult's messages, one a line: what the learner reads under the cell."""
    return "\n".join(result.messages)
