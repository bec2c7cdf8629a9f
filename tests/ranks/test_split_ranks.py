"""What each rank runs (helpers.ranks.split_ranks), in one process: three threads and a wire in
memory.

tests/ranks/test_split_run.py runs the same functions in three real processes over gloo; that takes
seconds per run. Here `torch.distributed`'s isend/irecv are replaced by queues between threads, so
the wire's log, its timeouts, its error messages and the three ranks' training are checked in
milliseconds, fast enough for a mutation run (`make mutate`).
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from datetime import timedelta

import pytest
import torch

from helpers.ranks import split_ranks as sr
from helpers.ranks.split_run import reference_run
from helpers.split import POST_INPUT, POST_LABEL, build_models

STEPS = 3


class _Sent:
    """isend's work: the message is already queued; wait only records its timeout."""

    def __init__(self, network: MemoryNetwork) -> None:
        self.network = network

    def wait(self, timeout: timedelta) -> bool:
        self.network.timeouts.append(timeout)
        return True


class _Receiving:
    """irecv's work: wait takes the next message from the queue, as gloo's wait would."""

    def __init__(self, network: MemoryNetwork, source: queue.Queue, buffer: torch.Tensor) -> None:
        self.network, self.source, self.buffer = network, source, buffer

    def wait(self, timeout: timedelta) -> bool:
        self.network.timeouts.append(timeout)
        self.network.statuses.append(dict(self.network.wire_of_thread().status))
        try:
            tensor = self.source.get(timeout=timeout.total_seconds())
        except queue.Empty:
            raise RuntimeError(
                "[gloo/transport/tcp/pair.cc:534] Timed out waiting "
                f"{timeout.total_seconds() * 1000:.0f}ms for recv operation to complete"
            ) from None
        if tensor.shape != self.buffer.shape:  # gloo: the sizes must agree
            raise RuntimeError(
                f"size mismatch: {tuple(tensor.shape)} into {tuple(self.buffer.shape)}"
            )
        self.buffer.copy_(tensor)
        return True


class MemoryNetwork:
    """isend/irecv between threads of one process; each thread says which rank it is."""

    def __init__(self) -> None:
        self.queues: dict[tuple[int, int], queue.Queue] = defaultdict(queue.Queue)
        self.local = threading.local()
        self.payloads: list[torch.Tensor] = []  # every tensor handed to isend
        self.timeouts: list[timedelta] = []  # every wait's timeout
        self.statuses: list[dict] = []  # the wire's status while a receive waits
        self.build_lock = threading.Lock()

    def wire_of_thread(self) -> sr.Wire:
        return self.local.wire

    def isend(self, tensor: torch.Tensor, dst: int) -> _Sent:
        if not tensor.is_contiguous():  # gloo refuses these
            raise RuntimeError("Tensors must be contiguous")
        self.payloads.append(tensor)
        self.queues[(self.local.wire.rank, dst)].put(tensor.clone())
        return _Sent(self)

    def irecv(self, buffer: torch.Tensor, src: int) -> _Receiving:
        return _Receiving(self, self.queues[(src, self.local.wire.rank)], buffer)

    def wire(self, rank: int, timeout: float = 5.0) -> sr.Wire:
        """A Wire for the calling thread."""
        self.local.wire = sr.Wire(rank, timeout)
        return self.local.wire


@pytest.fixture
def network(monkeypatch) -> MemoryNetwork:
    net = MemoryNetwork()
    monkeypatch.setattr(sr.dist, "isend", net.isend)
    monkeypatch.setattr(sr.dist, "irecv", net.irecv)

    def build_one_at_a_time(seed):  # torch.manual_seed is global: ranks must not interleave
        with net.build_lock:
            return build_models(seed)

    monkeypatch.setattr(sr, "build_models", build_one_at_a_time)
    return net


def run_three(network: MemoryNetwork, steps: int = STEPS, **kwargs) -> dict[int, sr.RankResult]:
    """run_rank on ranks 0, 1 and 2 at once, in three threads; their results by rank."""
    results: dict[int, sr.RankResult] = {}
    errors: list[BaseException] = []

    def one(rank: int) -> None:
        try:
            results[rank] = sr.run_rank(rank, steps, network.wire(rank), **kwargs)
        except BaseException as err:  # handed to the test below
            errors.append(err)

    threads = [threading.Thread(target=one, args=(rank,)) for rank in range(sr.WORLD_SIZE)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert sorted(results) == [0, 1, 2]
    return results


# Three ranks train like one ---------------------------------------------------------------------


def test_three_ranks_train_exactly_like_one_process(network):
    results = run_three(network)
    losses, models = reference_run(STEPS)
    assert results[2].losses == losses  # bit for bit: the same operations in the same order
    assert results[2].losses[0] == pytest.approx(1.6084858179092407)  # the post's number
    assert results[0].losses == results[1].losses == []
    assert [results[rank].rank for rank in range(3)] == [0, 1, 2]
    for rank, model in enumerate(models.as_list()):
        state = results[rank].state_dict
        assert state.keys() == model.state_dict().keys()
        for name, value in model.state_dict().items():
            assert torch.equal(state[name], value), (rank, name)


def test_seed_and_learning_rate_reach_every_rank(network):
    results = run_three(network, steps=2, seed=7, lr=0.5)
    losses, models = reference_run(2, seed=7, lr=0.5)
    assert results[2].losses == losses
    for rank, model in enumerate(models.as_list()):
        for name, value in model.state_dict().items():
            assert torch.equal(results[rank].state_dict[name], value), (rank, name)


def test_final_states_are_copies_that_hold_no_graph(network):
    results = run_three(network, steps=1)
    for result in results.values():
        for value in result.state_dict.values():
            assert not value.requires_grad
            assert value.grad_fn is None


def test_each_step_sends_four_messages_in_order(network):
    results = run_three(network)
    sent = sorted((r for res in results.values() for r in res.sent), key=lambda r: r.step)
    step1 = [(r.phase, r.src, r.dst, r.what) for r in sent if r.step == 1]
    assert sorted(step1) == sorted(
        [
            ("forward", 0, 1, "activation f1"),
            ("forward", 1, 2, "activation f2"),
            ("backward", 2, 1, "gradient ff2.grad"),
            ("backward", 1, 0, "gradient ff1.grad"),
        ]
    )
    assert [r.step for r in sent] == [s for s in range(1, STEPS + 1) for _ in range(4)]
    assert {(r.shape, r.dtype, r.nbytes) for r in sent} == {((1, 5, 6), "float32", 120)}
    # Every rank logs what it received exactly as its sender logged it.
    received = sorted((r for res in results.values() for r in res.received), key=lambda r: r.step)
    assert sorted(received, key=repr) == sorted(sent, key=repr)
    assert [r.what for r in results[1].sent if r.step == 2] == [
        "activation f2",
        "gradient ff1.grad",
    ]
    assert [r.what for r in results[0].received] == ["gradient ff1.grad"] * STEPS


def test_what_crosses_the_wire_is_values_only(network):
    run_three(network, steps=1)
    assert len(network.payloads) == 4
    for tensor in network.payloads:
        assert not tensor.requires_grad and tensor.grad_fn is None


def test_every_wait_is_bounded_by_the_wires_timeout(network):
    wire = network.wire(0, timeout=2.5)
    wire.send(torch.ones(2), 1, "activation f1")
    network.wire(1, timeout=0.75).recv((2,), 0, "activation f1")
    assert network.timeouts == [timedelta(seconds=2.5), timedelta(seconds=0.75)]
    assert sr.Wire(0).timeout == 30.0  # the default: long enough for a slow first step


# The steps, one at a time -----------------------------------------------------------------------


def test_the_middle_rank_hands_back_the_gradient_of_what_it_received(network):
    models = build_models()
    tokens = torch.tensor(POST_INPUT)
    f1 = models.model1(tokens).detach()
    grad_f2 = torch.full(sr.SHAPES["f2"], 0.5)
    network.queues[(0, 1)].put(f1)
    network.queues[(2, 1)].put(grad_f2)
    wire = network.wire(1)
    sr.middle_step(models.model2, wire)
    ff1 = f1.clone().requires_grad_(True)
    models.model2.zero_grad()
    models.model2(ff1).backward(grad_f2)
    assert torch.equal(network.queues[(1, 0)].get_nowait(), ff1.grad)
    assert torch.equal(network.queues[(1, 2)].get_nowait(), models.model2(f1).detach())


def test_the_client_backpropagates_the_gradient_it_receives(network):
    models = build_models()
    tokens = torch.tensor(POST_INPUT)
    grad = torch.linspace(-1, 1, 30).reshape(sr.SHAPES["f1"])
    network.queues[(1, 0)].put(grad)
    sr.client_step(models.model1, tokens, network.wire(0))
    expected = build_models().model1
    expected(tokens).backward(grad)
    for (name, p), (_, q) in zip(
        models.model1.named_parameters(), expected.named_parameters(), strict=True
    ):
        assert torch.equal(p.grad, q.grad), name
    assert torch.equal(network.queues[(0, 1)].get_nowait(), expected(tokens).detach())


def test_the_label_holder_returns_its_loss_and_sends_the_gradient_of_its_input(network):
    models = build_models()
    f2 = models.model2(models.model1(torch.tensor(POST_INPUT))).detach()
    network.queues[(1, 2)].put(f2)
    loss = sr.label_step(models.model3, torch.tensor(POST_LABEL), network.wire(2))
    ff2 = f2.clone().requires_grad_(True)
    _, expected = build_models().model3(ff2, torch.tensor(POST_LABEL))
    expected.backward()
    assert isinstance(loss, float) and loss == expected.item()
    assert torch.equal(network.queues[(2, 1)].get_nowait(), ff2.grad)


# The wire's log, status and errors --------------------------------------------------------------


def test_a_record_says_step_phase_ends_name_shape_dtype_and_size(network):
    wire = network.wire(1)
    wire.start_step(4)
    wire.send(torch.zeros(3, 2, dtype=torch.float64).t(), 2, "activation f2")  # not contiguous
    network.queues[(2, 1)].put(torch.ones(7))
    got = wire.recv((7,), 2, "gradient ff2.grad")
    assert torch.equal(got, torch.ones(7)) and got.dtype == torch.float32
    assert wire.sent == [sr.WireRecord(4, "forward", 1, 2, "activation f2", (2, 3), "float64", 48)]
    assert wire.received == [
        sr.WireRecord(4, "backward", 2, 1, "gradient ff2.grad", (7,), "float32", 28)
    ]
    assert wire.received[0].direction == "rank 2 → rank 1"


def test_the_status_says_what_the_rank_does_and_whom_it_waits_for(network):
    wire = network.wire(1)
    assert wire.status == {"step": 0, "phase": "setup", "doing": "starting", "peer": None}
    wire.start_step(3)
    assert wire.status == {"step": 3, "phase": "forward", "doing": "computing", "peer": None}
    network.queues[(0, 1)].put(torch.ones(1))
    wire.recv((1,), 0, "activation f1")
    assert network.statuses[-1] == {
        "step": 3,
        "phase": "forward",
        "doing": "waiting for activation f1 from rank 0",
        "peer": 0,
    }
    assert wire.status == {"step": 3, "phase": "forward", "doing": "computing", "peer": None}
    network.queues[(2, 1)].put(torch.ones(1))
    wire.recv((1,), 2, "gradient ff2.grad")
    assert network.statuses[-1]["phase"] == "backward"
    assert wire.status["phase"] == "backward"
    wire.update(doing="saving", peer=5)
    assert wire.status == {"step": 3, "phase": "backward", "doing": "saving", "peer": 5}
    wire.start_step(4)  # a new step forgets whom the last one waited for
    assert wire.status == {"step": 4, "phase": "forward", "doing": "computing", "peer": None}


def test_a_silent_peer_is_a_peer_error_that_says_it_timed_out(network):
    wire = network.wire(0, timeout=0.05)
    with pytest.raises(sr.PeerError) as caught:
        wire.recv((2,), 1, "gradient ff1.grad")
    err = caught.value
    assert str(err) == (
        "while waiting for gradient ff1.grad from rank 1: "
        "no answer from rank 1 within 0.05 s (timed out)"
    )
    assert (err.peer, err.timed_out) == (1, True)
    assert isinstance(err.__cause__, RuntimeError)
    assert sr.PeerError("closed", 2).timed_out is False  # by default a peer closed, not timed out
    assert wire.received == []
    assert wire.status["peer"] == 1  # still names whom it was waiting for


@pytest.mark.parametrize(
    "gloo_says",
    [
        "Connection closed by peer [127.0.0.1]:1234",
        "Connection reset by peer",
        "Broken pipe",
        "Connection refused",
        "Socket closure",
    ],
)
def test_a_closed_connection_names_the_peer_that_went_away(network, monkeypatch, gloo_says):
    def failing(tensor, dst):
        raise RuntimeError(f"[gloo] {gloo_says}\nmore detail")

    monkeypatch.setattr(sr.dist, "isend", failing)
    wire = network.wire(2)
    with pytest.raises(sr.PeerError) as caught:
        wire.send(torch.ones(1), 1, "gradient ff2.grad")
    assert str(caught.value) == (
        "while sending gradient ff2.grad to rank 1: "
        "rank 1 closed the connection (it failed or exited)"
    )
    assert (caught.value.peer, caught.value.timed_out) == (1, False)
    assert wire.sent == []


SENDING = "^while sending activation f1 to rank 1: "


def test_any_other_error_keeps_its_first_line_or_its_type(network, monkeypatch):
    def blank(tensor, dst):
        raise RuntimeError("  ")

    def failing(tensor, dst):
        raise RuntimeError("  size mismatch on the wire\nsecond line\n")

    monkeypatch.setattr(sr.dist, "isend", failing)
    wire = network.wire(0)
    with pytest.raises(sr.PeerError, match=SENDING + "size mismatch on the wire$"):
        wire.send(torch.ones(1), 1, "activation f1")

    monkeypatch.setattr(sr.dist, "isend", blank)
    with pytest.raises(sr.PeerError, match=SENDING + "RuntimeError$"):
        wire.send(torch.ones(1), 1, "activation f1")


def test_other_exceptions_pass_through_unchanged(network, monkeypatch):
    def failing(tensor, dst):
        raise KeyError("not gloo")

    monkeypatch.setattr(sr.dist, "isend", failing)
    with pytest.raises(KeyError):
        network.wire(0).send(torch.ones(1), 1, "activation f1")


@pytest.mark.parametrize("what", ["f1", "activations f1", "grad f1", ""])
def test_a_message_must_say_its_kind(network, what):
    wire = network.wire(0)
    with pytest.raises(ValueError) as caught:
        wire.send(torch.ones(1), 1, what)
    assert str(caught.value) == (
        "a message's name starts with 'activation' (forward) or 'gradient' (backward), "
        f"not {what!r}"
    )
    assert wire.status["doing"] == "starting"  # nothing was sent, nothing changed
    assert network.payloads == []


def test_shapes_follow_the_tokens_and_the_widths():
    assert sr.SHAPES == {"f1": (1, 5, 6), "f2": (1, 5, 6)}
    assert sr.message_shapes((4, 9), (10, 8, 7, 3)) == {"f1": (4, 9, 8), "f2": (4, 9, 7)}
    assert sr.message_shapes() == sr.SHAPES


def test_a_record_survives_its_round_trip_through_plain_values():
    record = sr.WireRecord(2, "backward", 2, 1, "gradient ff2.grad", (1, 5, 6), "float32", 120)
    plain = record.as_dict()
    assert plain["shape"] == [1, 5, 6] and isinstance(plain["shape"], list)
    assert plain == {
        "step": 2,
        "phase": "backward",
        "src": 2,
        "dst": 1,
        "what": "gradient ff2.grad",
        "shape": [1, 5, 6],
        "dtype": "float32",
        "nbytes": 120,
    }
    assert sr.WireRecord.from_dict(plain) == record
