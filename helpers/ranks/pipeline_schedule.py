"""A pipeline schedule's time grid, from the order in which each rank ran its actions.

An action is ("F", m), the forward of micro-batch m, or ("B", m), its backward. `schedule_slots`
lays each rank's actions on a grid: each takes one slot, and starts once its rank is free and
what it needs has arrived (a forward needs the previous stage's forward of that micro-batch, a
backward the next stage's backward). `bubble` is the share of rank-slots left idle. Drawing the
grid is `helpers.ranks.schedule_display`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["Action", "bubble", "schedule_slots"]

Action = tuple[str, int]


def schedule_slots(actions: Mapping[int, Sequence[Action]]) -> dict[int, list[tuple[Action, int]]]:
    """Each rank's actions with the slot each starts in (see the module docstring)."""
    ranks = sorted(actions)
    if not ranks:
        raise ValueError("schedule_slots() needs at least one rank's actions")
    last = ranks[-1]
    start: dict[tuple[int, Action], int] = {}
    for _ in range(sum(len(a) for a in actions.values()) + 1):  # relax until nothing moves
        before = dict(start)
        for rank in ranks:
            free = 0
            for kind, mb in actions[rank]:
                if kind == "F" and rank > ranks[0]:
                    needed = start.get((rank - 1, ("F", mb)), -1) + 1
                elif kind == "B" and rank < last:
                    needed = start.get((rank + 1, ("B", mb)), -1) + 1
                else:
                    needed = 0
                begin = max(free, needed)
                start[(rank, (kind, mb))] = begin
                free = begin + 1
        if start == before:
            break
    return {r: [(a, start[(r, a)]) for a in actions[r]] for r in ranks}


def bubble(slots: Mapping[int, Sequence[tuple[Action, int]]]) -> float:
    """The share of rank-slots left idle between the first action and the last."""
    span = max(t for placed in slots.values() for _, t in placed) + 1
    busy = sum(len(placed) for placed in slots.values())
    return 1 - busy / (span * len(slots))
