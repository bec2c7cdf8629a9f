"""When a multi-process run fails or hangs: which rank is at fault, at which step, and why.

Each rank reports how it ended (a dict: its last status, its error if it caught one); from those
reports `failure_message` names the rank at fault. A rank that raised names itself. A rank that
hangs raises nothing: its neighbours time out waiting for it, and following who waits for whom
(rank 0 waits for rank 1, which waits for rank 2, ...) leads to the rank that waits for nobody.
Pure functions: the launcher (`helpers.distributed`) collects the reports and raises the error.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from helpers.split_ranks import ROLES, WORLD_SIZE, PeerError

__all__ = ["DistributedRunError", "error_report", "failure_message"]


class DistributedRunError(RuntimeError):
    """A multi-process run failed or hung; the message names the rank, step and cause."""

    def __init__(
        self,
        message: str,
        reports: dict[int, dict[str, Any]],
        pids: list[int],
        rank: int | None = None,
    ) -> None:
        super().__init__(message)
        #: The rank at fault, as far as the reports tell (None if unclear).
        self.rank = rank
        #: What each rank reported (or how it ended), by rank.
        self.reports = reports
        #: The process ids of the ranks; none of them is running any more.
        self.pids = pids


def error_report(rank: int, err: BaseException, status: dict[str, Any]) -> dict[str, Any]:
    """What a rank writes when it catches `err`: its last status, the error, when, the traceback.

    Call it inside the `except` block (it formats the current traceback).
    """
    text = str(err).strip()
    return {
        "rank": rank,
        **status,
        "type": type(err).__name__,
        "message": text.splitlines()[0] if text else "",
        "peer": err.peer if isinstance(err, PeerError) else None,  # the error's cause
        "timed_out": isinstance(err, PeerError) and err.timed_out,
        "time": time.monotonic(),  # system-wide on Linux: comparable between the ranks
        "traceback": traceback.format_exc(),
    }


def _who(rank: int) -> str:
    return f"rank {rank} ({ROLES[rank].split(':')[0]})"


def _follow(reports: dict[int, dict[str, Any]], rank: int) -> int:
    """Follow who waits for whom from `rank` to a rank that waits for nobody (or a cycle)."""
    seen = [rank]
    while (peer := reports[seen[-1]].get("peer")) is not None and peer not in seen:
        seen.append(peer)
    return seen[-1]


def _state(report: dict[str, Any]) -> str:
    """How a rank at the end of a chain ended (never a crashed rank: that one is named first)."""
    if report["status"] == "error":
        return f"failed with {report['type']}: {report['message']}"
    if report["doing"] == "computing":
        return "was computing, not waiting for any rank: stuck or too slow"
    return f"was {report['doing']}"


def failure_message(
    reports: dict[int, dict[str, Any]], timeout: float, deadline: float
) -> tuple[str, int | None]:
    """The error message, and the rank most likely at fault (None if unclear).

    `reports` holds, by rank, each rank's last status (step, phase, doing, peer) with its
    `status`: "finished", "error" (it reported an error: `error_report`), "crashed" (it exited
    without a word) or "stopped" (the launcher stopped it).
    """
    errors = [r for r in reports.values() if r["status"] == "error"]
    crashed = [r for r in reports.values() if r["status"] == "crashed"]
    lines: list[str] = []
    if crashed:  # a rank that died without a word is the root cause
        first = min(crashed, key=lambda r: r["rank"])
        culprit = first["rank"]
        lines.append(
            f"{_who(culprit)} exited with code {first['exitcode']} at step {first['step']} "
            f"and reported no error"
        )
        if first.get("log"):
            lines.append(f"Its last output: {first['log']}")
    elif errors:  # an error of its own first, then a peer's silence, then a closed connection
        first = min(errors, key=lambda r: (r["peer"] is not None, not r["timed_out"], r["time"]))
        culprit = _follow(reports, first["rank"])
        end = reports[culprit]
        if first["peer"] is not None and end["status"] == "stopped" and end["doing"] == "computing":
            lines.append(  # a hang: name the silent rank, not whichever neighbour timed out first
                f"{_who(culprit)} stopped answering at step {end['step']} ({end['phase']}): "
                f"it was computing, not waiting for any rank (stuck, or slower than the "
                f"{timeout:g} s timeout)"
            )
            lines.append("A rank waiting for it timed out; .reports has every rank's last state.")
        else:
            lines.append(
                f"{_who(first['rank'])} failed at step {first['step']} ({first['phase']}): "
                f"{first['type']}: {first['message']}"
            )
            if culprit != first["rank"]:
                lines.append(f"Who waits for whom leads to {_who(culprit)}: {_state(end)}.")
    else:
        lines.append(f"The run did not finish within {deadline:g} s. At the deadline:")
        for r in reports.values():
            lines.append(f"  {_who(r['rank'])}, step {r['step']}: {r['doing']}")
        ends = {_follow(reports, r) for r in reports}
        culprit = ends.pop() if len(ends) == 1 else None
        if culprit is not None and reports[culprit]["doing"] == "computing":
            lines.append(
                f"Who waits for whom leads to {_who(culprit)}: {_state(reports[culprit])}."
            )
    lines.append(f"All {WORLD_SIZE} processes have ended; none is left running.")
    return "\n".join(lines), culprit
