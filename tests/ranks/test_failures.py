"""Naming the rank at fault from the ranks' last reports (helpers.ranks.failures): pure functions.

The launcher's real failures (a rank that raises, dies, or hangs) are run in
tests/test_distributed.py; here each kind of report is built by hand and the whole message checked.
"""

from __future__ import annotations

import time

import pytest

from helpers.ranks.failures import DistributedRunError, PeerError, error_report, failure_message
from helpers.ranks.split_ranks import ROLES

END = "All 3 processes have ended; none is left running."


def report(rank, status="stopped", doing="computing", peer=None, step=3, phase="forward", **extra):
    return {
        "rank": rank,
        "step": step,
        "phase": phase,
        "status": status,
        "doing": doing,
        "peer": peer,
        **extra,
    }


def error(rank, message="boom", type_="ValueError", peer=None, timed_out=False, at=1.0, **kw):
    return report(
        rank,
        "error",
        peer=peer,
        type=type_,
        message=message,
        timed_out=timed_out,
        time=at,
        **kw,
    )


def finished(rank):
    return report(rank, "finished", doing="computing", step=4, phase="backward")


def message_of(reports, timeout=30, deadline=120):
    return failure_message(reports, ROLES, timeout=timeout, deadline=deadline)


# A rank that died without a word ----------------------------------------------------------------


def test_a_crashed_rank_is_named_with_its_exit_code_and_last_output():
    reports = {
        0: error(0, "no answer", "PeerError", peer=1, timed_out=True),
        1: report(1, "crashed", exitcode=-9, step=2, log="Killed"),
        2: report(2, "crashed", exitcode=3, step=5),
    }
    message, culprit = message_of(reports)
    assert culprit == 1
    assert message.splitlines() == [
        "rank 1 (middle) exited with code -9 at step 2 and reported no error",
        "Its last output: Killed",
        END,
    ]


def test_a_crashed_rank_without_output_gets_no_output_line():
    message, culprit = message_of(
        {0: finished(0), 1: finished(1), 2: report(2, "crashed", exitcode=1)}
    )
    assert culprit == 2
    assert message.splitlines() == [
        "rank 2 (label holder) exited with code 1 at step 3 and reported no error",
        END,
    ]
    message, _ = message_of(
        {0: report(0, "crashed", exitcode=1, log=""), 1: finished(1), 2: finished(2)}
    )
    assert "Its last output" not in message


# A rank that raised -----------------------------------------------------------------------------


def test_a_rank_that_raised_names_itself_before_the_neighbours_that_lost_it():
    reports = {
        0: error(0, "closed", "PeerError", peer=1, at=0.5),  # earlier, but only a symptom
        1: error(1, "injected failure", "RuntimeError", step=2, phase="backward", at=2.0),
        2: error(2, "no answer", "PeerError", peer=1, timed_out=True, at=0.7),
    }
    message, culprit = message_of(reports)
    assert culprit == 1
    assert message.splitlines() == [
        "rank 1 (middle) failed at step 2 (backward): RuntimeError: injected failure",
        END,
    ]


def test_among_peer_errors_a_timeout_comes_before_a_closed_connection():
    reports = {
        0: error(0, "rank 1 closed the connection", "PeerError", peer=1, at=0.1),
        1: error(1, "no answer from rank 2", "PeerError", peer=2, timed_out=True, at=0.9),
        2: report(2, "stopped", doing="sending gradient ff2.grad to rank 1", peer=1),
    }
    message, culprit = message_of(reports)
    # rank 1 waited for 2, which waited for 1: the chain ends where it closes a cycle.
    assert culprit == 2
    assert message.splitlines() == [
        "rank 1 (middle) failed at step 3 (forward): PeerError: no answer from rank 2",
        "Who waits for whom leads to rank 2 (label holder): "
        "was sending gradient ff2.grad to rank 1.",
        END,
    ]


def test_among_equal_errors_the_earliest_is_first():
    reports = {
        0: error(0, "late", "RuntimeError", at=5.0),
        1: error(1, "early", "RuntimeError", at=1.0),
        2: error(2, "later", "RuntimeError", at=3.0),
    }
    message, culprit = message_of(reports)
    assert culprit == 1
    assert message.startswith("rank 1 (middle) failed at step 3 (forward): RuntimeError: early\n")


def test_a_peer_error_follows_the_chain_and_says_how_its_end_ended():
    cases = {
        "error": (  # an error with a peer: a rank it waits for is earlier in the chain
            error(2, "rank 1 closed the connection", "PeerError", peer=1),
            "failed with PeerError: rank 1 closed the connection",
        ),
        "stopped while waiting": (
            report(2, "stopped", doing="waiting for activation f2 from rank 1", peer=None),
            "was waiting for activation f2 from rank 1",
        ),
        "finished": (finished(2), "was computing, not waiting for any rank: stuck or too slow"),
    }
    for name, (end, state) in cases.items():
        reports = {
            0: error(0, "no answer", "PeerError", peer=1, timed_out=True),
            1: report(1, "stopped", doing="waiting for activation f2 from rank 2", peer=2),
            2: end,
        }
        message, culprit = message_of(reports)
        assert culprit == 2, name
        assert message.splitlines() == [
            "rank 0 (client) failed at step 3 (forward): PeerError: no answer",
            f"Who waits for whom leads to rank 2 (label holder): {state}.",
            END,
        ], name


def test_a_hang_names_the_silent_rank_not_the_neighbour_that_timed_out():
    reports = {
        0: error(0, "no answer", "PeerError", peer=1, timed_out=True, step=6),
        1: report(1, "stopped", doing="waiting for activation f2 from rank 2", peer=2, step=6),
        2: report(2, "stopped", doing="computing", step=6, phase="backward"),
    }
    message, culprit = message_of(reports, timeout=2.5)
    assert culprit == 2
    assert message.splitlines() == [
        "rank 2 (label holder) stopped answering at step 6 (backward): it was computing, not "
        "waiting for any rank (stuck, or slower than the 2.5 s timeout)",
        "A rank waiting for it timed out; .reports has every rank's last state.",
        END,
    ]


def test_a_rank_that_raised_is_not_called_silent_even_when_it_computes():
    # The rank at fault raised by itself (peer None): no chain to follow, no hang.
    reports = {0: error(0, "bad input", "ValueError"), 1: report(1), 2: report(2)}
    message, culprit = message_of(reports)
    assert culprit == 0
    assert message.splitlines() == [
        "rank 0 (client) failed at step 3 (forward): ValueError: bad input",
        END,
    ]


def test_a_finished_end_of_the_chain_is_no_hang():
    reports = {
        0: error(0, "no answer", "PeerError", peer=1, timed_out=True),
        1: finished(1),
        2: finished(2),
    }
    message, culprit = message_of(reports)
    assert culprit == 1
    assert "stopped answering" not in message
    assert message.splitlines()[1] == (
        "Who waits for whom leads to rank 1 (middle): "
        "was computing, not waiting for any rank: stuck or too slow."
    )


def test_the_end_of_the_chain_is_named_only_if_it_is_another_rank():
    reports = {
        0: error(0, "no answer", "PeerError", peer=0, timed_out=True),  # waits for itself
        1: finished(1),
        2: finished(2),
    }
    message, culprit = message_of(reports)
    assert culprit == 0
    assert message.splitlines() == [
        "rank 0 (client) failed at step 3 (forward): PeerError: no answer",
        END,
    ]


# Nobody failed, nobody finished: the deadline ---------------------------------------------------


def test_at_the_deadline_every_rank_is_listed_and_a_single_end_is_named():
    reports = {
        0: report(0, doing="waiting for gradient ff1.grad from rank 1", peer=1, step=2),
        1: report(1, doing="waiting for gradient ff2.grad from rank 2", peer=2, step=2),
        2: report(2, doing="computing", step=2),
    }
    message, culprit = message_of(reports, deadline=7.5)
    assert culprit == 2
    assert message.splitlines() == [
        "The run did not finish within 7.5 s. At the deadline:",
        "  rank 0 (client), step 2: waiting for gradient ff1.grad from rank 1",
        "  rank 1 (middle), step 2: waiting for gradient ff2.grad from rank 2",
        "  rank 2 (label holder), step 2: computing",
        "Who waits for whom leads to rank 2 (label holder): "
        "was computing, not waiting for any rank: stuck or too slow.",
        END,
    ]


def test_at_the_deadline_a_chain_that_ends_waiting_names_no_line_for_it():
    reports = {
        0: report(0, doing="waiting for gradient ff1.grad from rank 1", peer=1),
        1: report(1, doing="waiting for activation f1 from rank 0", peer=0),  # a cycle
        2: report(2, doing="waiting for activation f2 from rank 1", peer=1),
    }
    message, culprit = message_of(reports)
    assert message.count("Who waits for whom") == 0
    assert message.splitlines()[-1] == END
    # 0 -> 1 -> 0 ends at 1; 1 -> 0 -> 1 ends at 0: two ends, so no single rank is blamed.
    assert culprit is None


def test_at_the_deadline_one_waiting_end_is_the_culprit_but_not_called_stuck():
    reports = {
        0: report(0, doing="waiting for gradient ff1.grad from rank 1", peer=1),
        1: report(1, doing="sending activation f2 to rank 2", peer=None),
        2: report(2, doing="waiting for activation f2 from rank 1", peer=1),
    }
    message, culprit = message_of(reports)
    assert culprit == 1
    assert "Who waits for whom" not in message


def test_at_the_deadline_several_computing_ranks_blame_nobody():
    reports = {0: report(0), 1: report(1), 2: report(2)}
    message, culprit = message_of(reports)
    assert culprit is None
    assert "Who waits for whom" not in message


# What a rank writes when it catches an error ----------------------------------------------------


def test_an_error_report_holds_the_status_the_error_and_the_traceback():
    status = {"step": 2, "phase": "backward", "doing": "computing", "peer": None}
    before = time.monotonic()
    try:
        raise ValueError("  first line\nsecond line")
    except ValueError as err:
        got = error_report(1, err, status)
    assert before <= got.pop("time") <= time.monotonic()
    trace = got.pop("traceback")
    assert trace.startswith("Traceback") and "ValueError:   first line" in trace
    assert got == {
        "rank": 1,
        "step": 2,
        "phase": "backward",
        "doing": "computing",
        "peer": None,
        "type": "ValueError",
        "message": "first line",
        "timed_out": False,
    }


def test_a_peer_errors_report_names_the_peer_that_caused_it():
    status = {"step": 1, "phase": "forward", "doing": "waiting", "peer": 2}
    for timed_out in (True, False):
        try:
            raise PeerError("while waiting: no answer", 2, timed_out=timed_out)
        except PeerError as err:
            got = error_report(1, err, status)
        assert (got["peer"], got["timed_out"], got["type"]) == (2, timed_out, "PeerError")


def test_an_error_without_text_reports_an_empty_message():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as err:
        got = error_report(0, err, {"step": 0, "peer": 1})
    assert got["message"] == ""
    assert got["peer"] is None  # the status's peer is not the error's cause
    assert got["timed_out"] is False


def test_the_run_error_carries_rank_reports_and_pids():
    err = DistributedRunError("m", {0: {"status": "error"}}, [11, 12], rank=0)
    assert (str(err), err.rank, err.reports, err.pids) == (
        "m",
        0,
        {0: {"status": "error"}},
        [11, 12],
    )
    assert DistributedRunError("m", {}, []).rank is None
    assert isinstance(err, RuntimeError)


@pytest.mark.parametrize("rank, role", [(0, "client"), (1, "middle"), (2, "label holder")])
def test_every_rank_is_named_by_its_role(rank, role):
    reports = {r: finished(r) for r in range(3)}
    reports[rank] = error(rank, "x", "E")
    message, _ = message_of(reports)
    assert message.startswith(f"rank {rank} ({role}) failed")


def test_a_peer_error_says_its_message_and_has_not_timed_out_unless_told():
    err = PeerError("while waiting: rank 2 closed the connection", 2)
    assert str(err) == "while waiting: rank 2 closed the connection"
    assert err.peer == 2 and err.timed_out is False


def test_who_waits_for_whom_stops_at_a_rank_that_sent_no_report():
    """Rank 0 waited for rank 1, whose report is missing: the chain ends at rank 0."""
    reports = {0: error(0, "no answer", "PeerError", peer=1, timed_out=True)}
    message, culprit = message_of(reports)
    assert culprit == 0 and message.startswith("rank 0 (client) failed at step 3 (forward)")
