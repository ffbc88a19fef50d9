"""S5 running products: generator vs its independent oracle, the group table, uniformity,
streams, floors, config errors and the evaluation round trip."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from arbench.tasks import IGNORE, build_task
from arbench.tasks.base import save_eval_set, stream_rng
from arbench.tasks.s5 import (
    CAYLEY,
    ELEMENTS,
    IDENTITY,
    ORDER,
    S5Config,
    S5Task,
    compose,
    floors,
    generate,
    heldout,
    oracle_check,
    rank,
    unrank,
)

# chi-square critical value for 119 degrees of freedom at p = 0.001 (scipy.stats.chi2.ppf)
CHI2_119_CRIT = 173.6


@pytest.mark.parametrize("depth", [1, 2, 8, 33])
def test_oracle_accepts_generated(depth: int) -> None:
    cfg = S5Config(depth=depth)
    b = generate(cfg, 64, stream_rng(3, 7))
    assert b.tokens.shape == b.targets.shape == (64, depth)
    assert oracle_check(b.tokens, b.targets, cfg) == []
    assert (b.targets != IGNORE).all()  # every position supervised
    assert ((b.tokens >= 0) & (b.tokens < ORDER)).all()
    assert (b.targets[:, 0] == b.tokens[:, 0]).all()  # the first product is g_1 itself


def test_running_product_follows_the_stated_convention() -> None:
    """p_i = p_{i-1} . g_i with (a . b)(x) = b(a(x)), checked by hand on one sequence."""
    b = generate(S5Config(depth=3), 1, stream_rng(0, 4))
    g = [tuple(ELEMENTS[t]) for t in b.tokens[0]]
    p2 = tuple(g[1][g[0][x]] for x in range(5))
    p3 = tuple(g[2][p2[x]] for x in range(5))
    assert tuple(ELEMENTS[b.targets[0, 1]]) == p2 and tuple(ELEMENTS[b.targets[0, 2]]) == p3


def _corrupt(kind: str, b, cfg: S5Config) -> None:
    tok, tgt = b.tokens, b.targets
    if kind == "wrong_target":
        tgt[0, 3] = (tgt[0, 3] + 1) % ORDER
    elif kind == "ignored_target":
        tgt[0, cfg.depth - 1] = IGNORE
    elif kind == "token_out_of_range":
        tok[0, 2] = ORDER
    elif kind == "negative_token":
        tok[0, 0] = -1
    elif kind == "swapped_inputs":  # S5 is not abelian: swapping two factors moves products
        i = next(
            i
            for i in range(cfg.depth - 1)
            if CAYLEY[tok[0, i], tok[0, i + 1]] != CAYLEY[tok[0, i + 1], tok[0, i]]
        )
        tok[0, i], tok[0, i + 1] = tok[0, i + 1], tok[0, i]


@pytest.mark.parametrize(
    "kind",
    ["wrong_target", "ignored_target", "token_out_of_range", "negative_token", "swapped_inputs"],
)
def test_oracle_rejects_corruption(kind: str) -> None:
    cfg = S5Config(depth=8)
    b = generate(cfg, 4, stream_rng(0, 1))
    assert oracle_check(b.tokens, b.targets, cfg) == []
    _corrupt(kind, b, cfg)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert problems and all(p.startswith("row 0:") for p in problems)


def test_oracle_rejects_wrong_shape_and_length() -> None:
    b = generate(S5Config(depth=6), 3, stream_rng(0, 2))
    assert oracle_check(b.tokens, b.targets, S5Config(depth=5))[0].startswith("row 0: length")
    assert "shape" in oracle_check(b.tokens, b.targets[:, :-1], S5Config(depth=6))[0]
    assert "shape" in oracle_check(b.tokens[0], b.targets[0], S5Config(depth=6))[0]


def test_oracle_decoding_is_the_itertools_order() -> None:
    perms = list(itertools.permutations(range(5)))
    assert [unrank(i) for i in range(ORDER)] == perms
    assert [rank(p) for p in perms] == list(range(ORDER))
    assert [tuple(e) for e in ELEMENTS.tolist()] == perms and perms[IDENTITY] == (0, 1, 2, 3, 4)


def test_cayley_table_is_a_group_table_matching_tuple_composition() -> None:
    assert CAYLEY.shape == (ORDER, ORDER) and CAYLEY.dtype == np.int64
    assert (np.sort(CAYLEY, axis=1) == np.arange(ORDER)).all()  # Latin square: rows
    assert (np.sort(CAYLEY, axis=0) == np.arange(ORDER)[:, None]).all()  # and columns
    idx = np.arange(ORDER)
    assert (CAYLEY[IDENTITY] == idx).all() and (CAYLEY[:, IDENTITY] == idx).all()
    inverse = np.argmax(CAYLEY == IDENTITY, axis=1)
    assert (CAYLEY[idx, inverse] == IDENTITY).all() and (CAYLEY[inverse, idx] == IDENTITY).all()
    rng = np.random.default_rng(0)
    a, b, c = rng.integers(0, ORDER, size=(3, 2000))
    assert (CAYLEY[CAYLEY[a, b], c] == CAYLEY[a, CAYLEY[b, c]]).all()  # associativity
    perms = list(itertools.permutations(range(5)))
    for i, j in zip(a[:300].tolist(), b[:300].tolist(), strict=True):
        assert perms[CAYLEY[i, j]] == compose(perms[i], perms[j])
    assert (CAYLEY != CAYLEY.T).any()  # not abelian, so order of composition matters


def _chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / len(counts)
    return float(((counts - expected) ** 2 / expected).sum())


def _biased_generate(cfg: S5Config, n: int, rng: np.random.Generator, p: np.ndarray):
    """`generate` with elements drawn from ``p`` instead of uniformly (a deliberate bug)."""
    tokens = rng.choice(ORDER, size=(n, cfg.depth), p=p / p.sum())
    product = np.full(n, IDENTITY)
    for i in range(cfg.depth):
        product = CAYLEY[product, tokens[:, i]]
    return product


def _parity(perm: np.ndarray) -> int:
    return sum(int(perm[i] > perm[j]) for i in range(5) for j in range(i + 1, 5)) % 2


def test_last_running_product_is_uniform_and_biased_generators_are_caught() -> None:
    n = 20000
    b = generate(S5Config(depth=8), n, stream_rng(11, 0))
    assert _chi_square(np.bincount(b.targets[:, -1], minlength=ORDER)) < CHI2_119_CRIT
    rng = np.random.default_rng(1)
    # a parity bug: only even permutations drawn, so every product stays in A5
    even = np.array([1.0 - _parity(e) for e in ELEMENTS])
    last = _biased_generate(S5Config(depth=8), n, rng, even)
    assert _chi_square(np.bincount(last, minlength=ORDER)) > CHI2_119_CRIT
    # a mild skew (the first 60 ids 1.3x as likely) at depth 1, where nothing mixes it away
    skew = np.where(np.arange(ORDER) < 60, 1.3, 1.0)
    last = _biased_generate(S5Config(depth=1), n, rng, skew)
    assert _chi_square(np.bincount(last, minlength=ORDER)) > CHI2_119_CRIT


def test_streams_are_pure_functions_and_held_out_differs() -> None:
    task = build_task({"name": "s5", "depth": 6})
    a, b = task.train_batch(1, 5, 16), task.train_batch(1, 5, 16)
    assert (a.tokens == b.tokens).all() and (a.targets == b.targets).all()
    assert not (a.tokens == task.train_batch(1, 6, 16).tokens).all()
    assert not (a.tokens == task.train_batch(2, 5, 16).tokens).all()
    ev = task.eval_set(16)
    assert (ev.tokens == heldout(S5Config(depth=6), 16).tokens).all()
    assert not any((ev.tokens == task.train_batch(0, s, 16).tokens).all() for s in range(3))
    assert task.oracle(ev) == []


def test_floors_are_exactly_one_over_120() -> None:
    assert floors(S5Config()) == {"value_marginal": 1 / 120}
    assert build_task({"name": "s5", "depth": 3}).floors() == {"value_marginal": 1 / 120}


@pytest.mark.parametrize(
    ("task", "needle"),
    [
        ({"name": "s5", "depth": 0}, "task.depth"),
        ({"name": "s5", "depth": -3}, "task.depth"),
        ({"name": "s5", "depth": 2.5}, "task.depth"),
        ({"name": "s5", "deepth": 4}, "unknown key 'deepth'"),
    ],
)
def test_bad_task_configs_name_the_key(task: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        build_task(task)


def test_adapter_declares_itself() -> None:
    task = build_task({"name": "s5", "depth": 4})
    assert isinstance(task, S5Task) and task.cfg == S5Config(depth=4)
    assert (task.data, task.layout, task.signals, task.vocab_size) == (
        "stream",
        "bars",
        frozenset(),
        120,
    )
    assert task.summary() == "S5 running products, depth 4 (120 classes)"
    assert S5Config(depth=4).to_dict() == {"name": "s5", "depth": 4}


def test_evaluate_round_trip_with_a_tiny_model(tmp_path) -> None:
    from arbench.models import ModelConfig, build_model

    task = build_task({"name": "s5", "depth": 4}, tmp_path)
    save_eval_set(task.eval_set(32), tmp_path / "eval.npz")
    model = build_model(ModelConfig(vocab_size=120, d_model=8, layers=1), seed=0)
    scores = task.evaluate(model)
    assert scores["supervised"] == 32 * 3 and scores["sequences"] == 32  # slot 1 excluded
    assert 0.0 <= scores["accuracy"] <= 1.0 and 0.0 <= scores["final_accuracy"] <= 1.0


def test_copying_the_input_scores_nothing_on_the_headline(tmp_path) -> None:
    """The first product is its own input: a copier scores there only, which the headline
    (products of two or more elements) excludes and all_slots_accuracy counts."""
    task = build_task({"name": "s5", "depth": 4}, tmp_path)
    held_out = task.eval_set(200)
    save_eval_set(held_out, tmp_path / "eval.npz")

    class Copier:
        def eval(self):
            return self

        def hidden(self, tok):
            return tok.clone(), None

        def logits(self, h):
            return torch.nn.functional.one_hot(h, ORDER).double()

    scores = task.evaluate(Copier())
    assert scores["all_slots_accuracy"] >= 0.25
    assert scores["accuracy"] < 0.05


def test_final_accuracy_reads_only_the_last_slot(tmp_path) -> None:
    """A "model" that answers every slot with the true final product: final 1, others rare."""
    task = build_task({"name": "s5", "depth": 5}, tmp_path)
    held_out = task.eval_set(40)
    save_eval_set(held_out, tmp_path / "eval.npz")
    answers = torch.from_numpy(held_out.targets[:, -1])

    class Oracle:
        def eval(self):
            return self

        def hidden(self, tok):
            return answers[: tok.shape[0], None].expand(*tok.shape).clone(), None

        def logits(self, h):
            return torch.nn.functional.one_hot(h, ORDER).double()

    scores = task.evaluate(Oracle())
    assert scores["final_accuracy"] == 1.0
    assert scores["accuracy"] < 0.5
