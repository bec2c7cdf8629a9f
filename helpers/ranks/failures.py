"""When a multi-process run fails or hangs: which rank is at fault, and why (pure functions).

Each rank reports how it ended (a dict: its last status, its error if it caught one); from those
reports `failure_message` names the rank at fault. A rank that died without a word is named
first, then a rank whose error is its own, not a symptom of a neighbour's (gloo's "timed out",
"connection closed", or 07's `PeerError`). A rank that hangs raises nothing: its neighbours time
out waiting for it. Where the reports say whom each rank waits for (`peer`, 07's wire), following
who waits for whom leads to the rank that waits for nobody; otherwise the rank stopped while
computing is the silent one. The launcher (`helpers.ranks.launch`) collects the reports and
raises the error.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Mapping
from typing import Any

__all__ = ["DistributedRunError", "PeerError", "error_report", "failure_message", "is_symptom"]

#: gloo's words when a peer went silent or away: a symptom in the waiting rank, not a cause.
SYMPTOM = re.compile(r"timed out|timeout|connection (closed|reset)|broken pipe|peer", re.I)


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


class PeerError(RuntimeError):
    """A send or receive failed because another rank failed, exited or went silent."""

    def __init__(self, message: str, peer: int, timed_out: bool = False) -> None:
        super().__init__(message)
        #: The rank this one was sending to or waiting for.
        self.peer = peer
        #: True if the peer did not answer in time (rather than closing the connection).
        self.timed_out = timed_out


def error_report(rank: int, err: BaseException, status: dict[str, Any]) -> dict[str, Any]:
    """What a rank writes when it catches `err`: its last status, the error, when, the traceback.

    Call it inside the `except` block (it formats the current traceback).
    """
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    report = {
        "rank": rank,
        **status,
        "type": type(err).__name__,
        "message": lines[0] if lines else "",
        "timed_out": isinstance(err, PeerError) and err.timed_out,
        "time": time.monotonic(),  # system-wide on Linux: comparable between the ranks
        "traceback": traceback.format_exc()[-4000:],  # for whoever debugs the rank
    }
    if isinstance(err, PeerError) or "peer" in status:  # 07's wire: whom it waited for
        report["peer"] = err.peer if isinstance(err, PeerError) else None  # the error's cause
    return report


def is_symptom(report: dict[str, Any]) -> bool:
    """Whether a rank's error only says that another rank failed or went silent."""
    return report.get("peer") is not None or bool(SYMPTOM.search(report["message"]))


def _follow(reports: Mapping[int, dict[str, Any]], rank: int) -> int:
    """Follow who waits for whom from `rank` to a rank that waits for nobody (or a cycle)."""
    seen = [rank]
    while (peer := reports[seen[-1]].get("peer")) is not None and peer not in seen:
        if peer not in reports:
            break
        seen.append(peer)
    return seen[-1]


def _computing(report: dict[str, Any]) -> bool:
    return report["status"] == "stopped" and report["doing"].startswith("comput")


def failure_message(
    reports: Mapping[int, dict[str, Any]],
    roles: Mapping[int, str],
    timeout: float,
    deadline: float,
) -> tuple[str, int | None]:
    """The error message, and the rank most likely at fault (None if unclear).

    `reports` holds, by rank, each rank's last status (`doing`; 07's wire adds `step`, `phase`
    and `peer`) with its `status`: "finished", "error" (it reported an error: `error_report`),
    "crashed" (it exited without a word) or "stopped" (the launcher stopped it). `roles` names
    each rank ("client: model 1 and the input" is said "rank 0 (client)").
    """

    def who(rank: int) -> str:
        role = roles.get(rank)
        return f"rank {rank} ({role.split(':')[0]})" if role else f"rank {rank}"

    def where(r: dict[str, Any]) -> str:
        return f"at step {r['step']} ({r['phase']})" if "step" in r else f"while {r['doing']}"

    def silent(r: dict[str, Any]) -> str:
        tail = f"not waiting for any rank (stuck, or slower than the {timeout:g} s timeout)"
        if "step" in r:
            return f"{who(r['rank'])} stopped answering {where(r)}: it was computing, {tail}"
        return f"{who(r['rank'])} stopped answering {where(r)}, {tail}"

    def state(r: dict[str, Any]) -> str:
        if r["status"] == "error":
            return f"failed with {r['type']}: {r['message']}"
        if r["doing"] == "computing":
            return "was computing, not waiting for any rank: stuck or too slow"
        return f"was {r['doing']}"

    waits = any("peer" in r for r in reports.values())  # the reports say who waits for whom
    errors = [r for r in reports.values() if r["status"] == "error"]
    crashed = [r for r in reports.values() if r["status"] == "crashed"]
    lines: list[str] = []
    culprit: int | None
    if crashed:  # a rank that died without a word is the root cause
        first = min(crashed, key=lambda r: r["rank"])
        culprit = first["rank"]
        at = f"at step {first['step']}" if "step" in first else f"while {first['doing']}"
        lines.append(
            f"{who(culprit)} exited with code {first['exitcode']} {at} and reported no error"
        )
        if first.get("log"):
            lines.append(f"Its last output: {first['log']}")
    elif errors:  # an error of its own first, then a peer's silence, then a closed connection
        first = min(errors, key=lambda r: (is_symptom(r), not r.get("timed_out"), r["time"]))
        culprit = _follow(reports, first["rank"]) if waits else first["rank"]
        hung = [r for r in reports.values() if _computing(r)]
        if is_symptom(first) and not waits and hung:
            culprit = hung[0]["rank"]
        end = reports[culprit]
        if is_symptom(first) and _computing(end):
            # a hang: name the silent rank, not whichever neighbour timed out first
            lines.append(silent(end))
            lines.append("A rank waiting for it timed out; .reports has every rank's last state.")
        else:
            lines.append(
                f"{who(first['rank'])} failed {where(first)}: {first['type']}: {first['message']}"
            )
            if culprit != first["rank"]:
                lines.append(f"Who waits for whom leads to {who(culprit)}: {state(end)}.")
    elif not waits and any(_computing(r) for r in reports.values()):
        end = next(r for r in reports.values() if _computing(r))
        culprit = end["rank"]
        lines.append(silent(end))
    else:
        lines.append(f"The run did not finish within {deadline:g} s. At the deadline:")
        for r in reports.values():
            step = f", step {r['step']}" if "step" in r else ""
            lines.append(f"  {who(r['rank'])}{step}: {r['doing']}")
        ends = {_follow(reports, r) for r in reports} if waits else set()
        culprit = ends.pop() if len(ends) == 1 else None
        if culprit is not None and reports[culprit]["doing"] == "computing":
            lines.append(f"Who waits for whom leads to {who(culprit)}: {state(reports[culprit])}.")
    lines.append(f"All {len(reports)} processes have ended; none is left running.")
    return "\n".join(lines), culprit
