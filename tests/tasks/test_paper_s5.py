"""The paper's S5 probe: generator vs its independent oracle, the interleaved layout, the
paper's composition order, the corruptions the oracle must catch, floors against guessers,
the three accuracies the adapter reports, and bad settings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from arbench.tasks import IGNORE, build_task
from arbench.tasks.base import Batch, save_eval_set, stream_rng
from arbench.tasks.paper_s5 import MASK, PaperS5Config, floors, generate, heldout, oracle_check

PERMS = list(itertools.permutations(range(5)))


@pytest.mark.parametrize("depth", [1, 2, 4, 16])
def test_oracle_accepts_generated(depth: int) -> None:
    cfg = PaperS5Config(depth=depth)
    for step in range(3):
        b = generate(cfg, 50, stream_rng(7, step))
        assert b.tokens.shape == b.targets.shape == (50, 2 * depth)
        assert oracle_check(b.tokens, b.targets, cfg) == []


def test_layout_is_element_mask_pairs_with_the_product_at_each_mask() -> None:
    cfg = PaperS5Config(depth=4)
    b = heldout(cfg, 300)
    assert cfg.vocab_size == 121 and cfg.mask_id == MASK == 120
    assert (b.tokens[:, 1::2] == MASK).all() and (b.tokens[:, 0::2] < 120).all()
    assert (b.targets[:, 0::2] == IGNORE).all() and (b.targets[:, 1::2] >= 0).all()
    assert (b.targets[:, 1] == b.tokens[:, 0]).all()  # p_1 = g_1: the slot a copier gets


def test_the_product_applies_the_newest_element_first() -> None:
    """The paper's order, p_i = p_{i-1} o g_i with (a o b)(x) = a(b(x)), checked on tuples
    for every row; the other order disagrees on most rows (S5 is not abelian)."""
    b = generate(PaperS5Config(depth=3), 200, np.random.default_rng(0))
    other = 0
    for seq, tgt in zip(b.tokens.tolist(), b.targets.tolist(), strict=True):
        p = q = tuple(range(5))
        for i in range(3):
            g = PERMS[seq[2 * i]]
            p = tuple(p[g[x]] for x in range(5))  # apply g first, then p
            q = tuple(g[q[x]] for x in range(5))  # apply q first, then g
            assert PERMS[tgt[2 * i + 1]] == p
        other += q != p
    assert other > 150


def _swap_product(b: Batch) -> None:
    b.targets[3, 5] = (b.targets[3, 5] + 1) % 120


def _supervise_element(b: Batch) -> None:
    b.targets[2, 4] = b.tokens[2, 4]


def _unmask(b: Batch) -> None:
    b.tokens[1, 3] = b.targets[1, 3]  # the answer shown in place of its MASK


def _bad_element(b: Batch) -> None:
    b.tokens[0, 2] = MASK


def _reorder(b: Batch) -> None:  # the other composition order
    t = b.tokens[:, 0::2]
    prod = np.zeros(len(t), dtype=np.int64)
    from arbench.tasks.s5 import CAYLEY

    for i in range(t.shape[1]):
        prod = CAYLEY[prod, t[:, i]]
        b.targets[:, 2 * i + 1] = prod


@pytest.mark.parametrize(
    ("fn", "expect"),
    [
        (_swap_product, "row 3: target"),
        (_supervise_element, "row 2: the element at 4 is supervised"),
        (_unmask, "row 1: position 3 holds"),
        (_bad_element, "row 0: position 2 holds 120, not an element"),
        (_reorder, "the product is"),
    ],
)
def test_oracle_catches_corruption(fn, expect: str) -> None:
    cfg = PaperS5Config(depth=4)
    b = generate(cfg, 20, np.random.default_rng(1))
    fn(b)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert any(expect in p for p in problems), problems


def test_oracle_rejects_a_wrong_length() -> None:
    b = generate(PaperS5Config(depth=4), 5, np.random.default_rng(2))
    assert "2 x depth" in oracle_check(b.tokens, b.targets, PaperS5Config(depth=3))[0]


def test_floors_match_guessers() -> None:
    """A uniform guess scores 1/120 at every slot; copying g_1 and guessing the rest scores
    the copy-only floor of the all-slot accuracy."""
    rng = np.random.default_rng(5)
    for d in (2, 4, 8):
        cfg = PaperS5Config(depth=d)
        f = floors(cfg)
        b = heldout(cfg, 20000)
        products = b.targets[:, 1::2]
        guess = rng.integers(0, 120, size=products.shape)
        assert abs((guess == products).mean() - f["value_marginal"]) < 0.002
        guess[:, 0] = b.tokens[:, 0]
        assert abs((guess == products).mean() - f["copy_only"]) < 0.004
    assert floors(PaperS5Config(depth=4))["copy_only"] == pytest.approx(0.25 + 0.75 / 120)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"depth": 0}, "task.depth"),
        ({"depth": 2.0}, "task.depth"),
        ({"depth": 2, "seq_len": 4}, "'seq_len'"),
    ],
)
def test_bad_settings_fail_naming_the_key(settings: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        build_task({"name": "paper_s5", **settings})


class _Answers:
    """A stand-in model whose prediction at each position is a fixed token (``answers``),
    read row by row in the order the evaluation batches the held-out set."""

    def __init__(self, answers: np.ndarray) -> None:
        self.answers, self.row = torch.from_numpy(answers), 0

    def eval(self):
        return self

    def hidden(self, tok):
        self.row += tok.shape[0]
        return self.answers[self.row - tok.shape[0] : self.row].clone(), None

    def logits(self, h):
        return torch.nn.functional.one_hot(h, 121).double()


def test_evaluate_reports_the_papers_accuracy_each_slot_and_ours(tmp_path) -> None:
    task = build_task({"name": "paper_s5", "depth": 4}, tmp_path)
    held_out = task.eval_set(400)
    save_eval_set(held_out, tmp_path / "eval.npz")
    # a copier: every position answers the token before it (g_1 right at p_1 only)
    copied = np.roll(held_out.tokens, 1, axis=1)
    scores = task.evaluate(_Answers(copied))
    assert scores["slot_accuracy"][0] == 1.0 and max(scores["slot_accuracy"][1:]) < 0.05
    assert scores["accuracy"] == pytest.approx(np.mean(scores["slot_accuracy"]))
    assert 0.25 <= scores["accuracy"] < 0.27 and scores["composed_accuracy"] < 0.05
    assert scores["total"] == 400 * 4 and len(scores["per_sequence"]) == 400
    # the true products everywhere: every slot right; the MASK is never predicted
    truth = np.where(held_out.targets == IGNORE, MASK, held_out.targets)
    perfect = task.evaluate(_Answers(truth))
    assert perfect["accuracy"] == perfect["composed_accuracy"] == perfect["final_accuracy"] == 1.0


def test_the_adapter_declares_itself() -> None:
    task = build_task({"name": "paper_s5", "depth": 3})
    assert (task.vocab_size, task.positions(), task.never_predicted()) == (121, 6, (120,))
    assert task.data == "stream" and task.signals == frozenset()
    assert "depth 3" in task.summary()
    a, again = task.train_batch(2, 9, 8), task.train_batch(2, 9, 8)
    assert (a.tokens == again.tokens).all() and (a.targets == again.targets).all()
    assert not (task.train_batch(2, 10, 8).tokens == a.tokens).all()
