"""helpers.leakage: the rank-based AUC, the imbalanced binary task, the AUC figure."""

import itertools

import pytest
import torch

from helpers.display import Figure
from helpers.leakage import RULE, auc, auc_figure, binary_task


def pairwise_auc(scores, labels):
    """The definition: P(a positive scores above a negative), ties counting one half."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y == 1]
    neg = [s for s, y in zip(scores, labels, strict=True) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_perfect_inverted_and_chance():
    assert auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert auc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    assert auc([0.3, 0.3, 0.3, 0.3], [0, 1, 0, 1]) == 0.5  # all tied: guessing


def test_ties_count_one_half():
    assert auc([1, 2, 2, 3], [0, 0, 1, 1]) == 0.875  # the tie 2 vs 2 counts 0.5 of 4 pairs
    assert auc([5.0, 5.0], [0, 1]) == 0.5


def test_matches_the_pairwise_definition_on_many_tied_scores():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        scores = torch.randint(0, 6, (30,), generator=g).double()  # many ties
        labels = torch.zeros(30)
        labels[torch.randperm(30, generator=g)[:7]] = 1
        assert auc(scores, labels) == pytest.approx(pairwise_auc(scores.tolist(), labels.tolist()))


def test_accepts_bool_labels_lists_and_tensors_that_require_grad():
    scores = torch.tensor([0.2, 0.9, 0.4], requires_grad=True)
    assert auc(scores, torch.tensor([False, True, False])) == 1.0
    assert auc([0.2, 0.9, 0.4], [0.0, 1.0, 0.0]) == 1.0
    assert isinstance(auc(scores, [0, 1, 0]), float)


def test_depends_only_on_the_order():
    scores = torch.tensor([0.1, 0.7, 0.3, 0.9, 0.5])
    labels = [0, 1, 0, 1, 1]
    assert auc(scores, labels) == auc(scores.exp() * 1000, labels)


@pytest.mark.parametrize(
    ("scores", "labels", "error", "match"),
    [
        ([0.1, 0.2], [0, 1, 1], ValueError, "differ in length: 2 vs 3"),
        ([0.1, 0.2, 0.3], [0, 2, 1], ValueError, r"labels must be 0 or 1.*2\.0"),
        ([0.1, 0.2, 0.3], [-1, 1, 1], ValueError, "labels must be 0 or 1"),
        ([0.1, 0.2, 0.3], [1, 1, 1], ValueError, "needs both classes; got 3 positive"),
        ([0.1, 0.2], [0, 0], ValueError, "0 positive"),
        ([0.1, float("nan")], [0, 1], ValueError, "NaN"),
        (torch.ones(2, 2), [0, 1], ValueError, r"scores must be 1-D .* shape \[2, 2\]"),
        ([0.1, 0.2], torch.ones(2, 1), ValueError, "labels must be 1-D"),
        (0.5, [0, 1], TypeError, "scores must be a 1-D tensor or a list of numbers; got a float"),
        (["a", "b"], [0, 1], TypeError, "scores must be numbers"),
        ([0.1, 0.2], None, TypeError, "got a NoneType"),
    ],
)
def test_bad_input_says_what_is_wrong(scores, labels, error, match):
    with pytest.raises(error, match=match):
        auc(scores, labels)


def test_binary_task_is_deterministic_imbalanced_and_float64():
    x, y = binary_task(400, seed=1)
    x2, y2 = binary_task(400, seed=1)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert x.shape == (400, 8) and y.shape == (400,) and x.dtype == y.dtype == torch.float64
    assert int(y.sum()) == 40 and set(y.tolist()) == {0.0, 1.0}
    assert not torch.equal(binary_task(400, seed=2)[0], x)


def test_binary_task_labels_follow_the_rule():
    x, y = binary_task(1000, noise=0.0, positive_share=0.2)
    score = x[:, : len(RULE)] @ torch.tensor(RULE, dtype=torch.float64)
    assert score[y == 1].min() >= score[y == 0].max()  # without noise, a threshold on the rule
    assert auc(score, y) == 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 1}, "n must be an int >= 2"),
        ({"n": 10.0}, "n must be an int"),
        ({"n": 10, "features": 2}, "features must be an int >= 3"),
        ({"n": 10, "positive_share": 0.0}, "both classes non-empty.*gives 0 positives"),
        ({"n": 10, "positive_share": 1.0}, "gives 10 positives"),
        ({"n": 10, "positive_share": "10%"}, "positive_share must leave"),
        ({"n": 10, "noise": -1.0}, "noise must be a number >= 0"),
    ],
)
def test_binary_task_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        binary_task(**kwargs)


def test_auc_figure_has_a_stable_text_form_and_png():
    fig = auc_figure({"no defence": [(0.9, 1.0), (0.95, 1.0)], "noise": [(0.5, 0.5), (0.6, 0.4)]})
    assert isinstance(fig, Figure)
    assert repr(fig) == "[figure: AUC per step of both attacks, 2 run(s), 2 steps]"
    assert fig.png().startswith(b"\x89PNG")


def test_auc_figure_needs_runs():
    with pytest.raises(ValueError, match="at least one run"):
        auc_figure({})
    with pytest.raises(ValueError, match="at least one step"):
        auc_figure({"empty": []})


def test_auc_figure_names_each_run_in_the_learners_language():
    """A run's name is a phrase of the notebook's text file: 07's table says 不加防护, so its
    legend does too; a name with no phrase stays as written."""
    from helpers import language

    runs = {"no defence": [(0.9, 1.0)], "noise σ=0.01": [(0.6, 0.7)], "mine": [(0.5, 0.5)]}
    def legend(figure):
        return [t.get_text() for t in figure.figure.axes[0].get_legend().get_texts()]

    assert legend(auc_figure(runs)) == ["no defence", "noise σ=0.01", "mine"]
    language.set_language("zh")
    try:
        figure = auc_figure(runs)
    finally:
        language.set_language("en")
    assert legend(figure) == ["不加防护", "噪声 σ=0.01", "mine"]  # the CJK font is installed
