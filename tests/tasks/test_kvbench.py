"""kvbench data: generator against its oracle, corruptions the oracle must catch, the
mutant clusters of long-context mode, and exact-match scoring."""

from __future__ import annotations

import numpy as np
import pytest

from arbench.tasks.base import IGNORE
from arbench.tasks.kvbench import (
    START_KEY,
    START_VALUE,
    KVConfig,
    exact_match,
    generate,
    mutant_clusters,
    oracle_check,
)

CFG = KVConfig(n=8)


def _batch(cfg: KVConfig = CFG, count: int = 16, seed: int = 0):
    return generate(cfg, count, np.random.default_rng(seed))


@pytest.mark.parametrize("n", [1, 2, 8, 64])
def test_generated_sequences_pass_the_oracle(n: int) -> None:
    cfg = KVConfig(n=n)
    b = _batch(cfg)
    assert b.tokens.shape == (16, 16 * n) and oracle_check(b.tokens, b.targets, cfg) == []
    # three scored digits per second occurrence, n second occurrences per sequence
    assert ((b.targets != IGNORE).sum(axis=1) == 3 * n).all()


def test_layout_and_vocabulary() -> None:
    b = _batch()
    entries = b.tokens.reshape(16, -1, 8)
    assert (entries[:, :, 0] == START_KEY).all() and (entries[:, :, 4] == START_VALUE).all()
    assert b.tokens.max() == START_VALUE and b.tokens.min() >= 0


def test_deterministic_in_the_generator() -> None:
    a, b, c = _batch(seed=1), _batch(seed=1), _batch(seed=2)
    assert np.array_equal(a.tokens, b.tokens) and not np.array_equal(a.tokens, c.tokens)


@pytest.mark.parametrize("corrupt", ["value", "label", "shift", "key", "marker"])
def test_oracle_catches_corruption(corrupt: str) -> None:
    b = _batch(count=2)
    tok, tgt = b.tokens.copy(), b.targets.copy()
    at = int(np.nonzero(tgt[0] != IGNORE)[0][0])
    if corrupt == "value":  # the second occurrence's value changed: two values for a key
        tok[0, at + 1] = (tok[0, at + 1] + 1) % 10
    elif corrupt == "label":
        tgt[0, at] = (tgt[0, at] + 1) % 10
    elif corrupt == "shift":
        tgt[0, at + 3], tgt[0, at] = tgt[0, at], IGNORE
    elif corrupt == "key":  # a third occurrence of one key replaces another key
        tok[0, 1:4] = tok[0, 9:12] if not np.array_equal(tok[0, 1:4], tok[0, 9:12]) else 0
    elif corrupt == "marker":
        tok[0, 0] = 3
    problems = oracle_check(tok, tgt, CFG)
    assert problems and all(p.startswith("row 0") for p in problems)


def test_mutant_clusters_hold_near_duplicates() -> None:
    cfg = KVConfig(n=32, key_digits=7, mutant_j=7, mutant_mix=1.0)
    b = _batch(cfg, count=8)
    assert oracle_check(b.tokens, b.targets, cfg) == []
    assert min(mutant_clusters(b.tokens, cfg)) >= 7
    plain = KVConfig(n=32, key_digits=7)
    assert max(mutant_clusters(_batch(plain, count=8).tokens, plain)) <= 2


def test_mutant_mix_is_a_fraction_of_sequences() -> None:
    cfg = KVConfig(n=16, key_digits=7, mutant_j=7, mutant_mix=0.5)
    sizes = np.array(mutant_clusters(_batch(cfg, count=400).tokens, cfg))
    assert 0.4 < (sizes >= 7).mean() < 0.6


def test_exact_match_needs_every_value_digit() -> None:
    b = _batch(count=4)
    pred = np.where(b.targets == IGNORE, 0, b.targets)
    assert exact_match(pred, b.targets, CFG).all()
    at = int(np.nonzero(b.targets[0] != IGNORE)[0][2])  # the third digit of one answer
    pred[0, at] = (pred[0, at] + 1) % 10
    hits = exact_match(pred, b.targets, CFG)
    assert hits.sum() == len(hits) - 1 and len(hits) == 4 * 8


@pytest.mark.parametrize(
    "bad, key", [({"n": 0}, "task.n"), ({"n": 2000}, "task.n"), ({"mutant_mix": 2}, "mutant_mix")]
)
def test_bad_settings_name_the_key(bad: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        KVConfig(**bad).validate()
