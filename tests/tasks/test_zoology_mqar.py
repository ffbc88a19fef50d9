"""Zoology MQAR: generator against its oracle, corruptions the oracle must catch, the
query-slot law against its formula (chi-square), and the filler-repeat count."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from arbench.tasks import build_task
from arbench.tasks.base import IGNORE
from arbench.tasks.zoology_mqar import (
    FILLER,
    ZoologyConfig,
    draw_slots,
    filler_repeats,
    floors,
    generate,
    oracle_check,
)

CFG = ZoologyConfig(vocab=256, seq_len=64, pairs=8, power_a=0.01)


def _batch(cfg: ZoologyConfig = CFG, n: int = 64, seed: int = 0):
    return generate(cfg, n, np.random.default_rng(seed))


@pytest.mark.parametrize("random_non_queries", [True, False])
def test_generated_batches_pass_the_oracle(random_non_queries: bool) -> None:
    cfg = ZoologyConfig(vocab=256, seq_len=64, pairs=8, random_non_queries=random_non_queries)
    b = _batch(cfg)
    assert oracle_check(b.tokens, b.targets, cfg) == []
    assert b.tokens.min() >= 0 and b.tokens.max() < cfg.vocab
    assert ((b.targets != IGNORE).sum(axis=1) == cfg.pairs).all()


def test_layout_keys_low_half_values_high_half_distinct() -> None:
    b = _batch()
    keys, values = b.tokens[:, 0:16:2], b.tokens[:, 1:16:2]
    assert ((keys >= 1) & (keys < 128)).all() and ((values >= 128) & (values < 256)).all()
    assert all(len(set(r)) == 8 for r in keys) and all(len(set(r)) == 8 for r in values)
    # the label sits at the query key itself, on a slot's first position
    rows, at = np.nonzero(b.targets != IGNORE)
    assert ((at - 16) % 2 == 0).all()
    assert np.isin(b.tokens[rows, at], keys[rows]).all()


def test_same_seed_same_batch_other_seed_other_batch() -> None:
    a, b, c = _batch(seed=3), _batch(seed=3), _batch(seed=4)
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.targets, b.targets)
    assert not np.array_equal(a.tokens, c.tokens)


@pytest.mark.parametrize(
    "corrupt",
    [
        "wrong_value",
        "moved_label",
        "duplicate_key",
        "value_in_key_slot",
        "dropped_label",
    ],
)
def test_oracle_catches_corruption(corrupt: str) -> None:
    b = _batch(n=4)
    tok, tgt = b.tokens.copy(), b.targets.copy()
    at = int(np.nonzero(tgt[0] != IGNORE)[0][0])
    if corrupt == "wrong_value":
        tgt[0, at] = 128 + (tgt[0, at] - 128 + 1) % 128
    elif corrupt == "moved_label":
        tgt[0, at + 1], tgt[0, at] = tgt[0, at], IGNORE
    elif corrupt == "duplicate_key":
        tok[0, 2] = tok[0, 0]
    elif corrupt == "value_in_key_slot":
        tok[0, 0] = 200
    elif corrupt == "dropped_label":
        tgt[0, at] = IGNORE
    problems = oracle_check(tok, tgt, CFG)
    assert problems and all(p.startswith("row 0") for p in problems)


def test_oracle_rejects_non_filler_without_random_filler() -> None:
    cfg = ZoologyConfig(vocab=256, seq_len=64, pairs=8, random_non_queries=False)
    b = _batch(cfg, n=2)
    tok = b.tokens.copy()
    free = [t for t in range(16, 64) if b.targets[0, t] == IGNORE]
    tok[0, free[0]] = 5
    assert tok[0, free[0]] != FILLER
    assert any("neither query nor filler" in p for p in oracle_check(tok, b.targets, cfg))


def _first_slot_counts(cfg: ZoologyConfig, draws: int, seed: int) -> np.ndarray:
    """How often each slot is the first drawn one (the slot the first stored key is asked
    in), read from generated sequences, not from `draw_slots`."""
    b = generate(cfg, draws, np.random.default_rng(seed))
    first_key = b.tokens[:, 0]
    region = b.tokens[:, 2 * cfg.pairs :: 2]
    labelled = b.targets[:, 2 * cfg.pairs :: 2] != IGNORE
    slot = np.argmax((region == first_key[:, None]) & labelled, axis=1)
    return np.bincount(slot, minlength=cfg.slots)


def _chi_square_p(counts: np.ndarray, p: np.ndarray) -> float:
    """Chi-square goodness of fit, pooling the tail bins whose expected count is under 5."""
    expected = p * counts.sum()
    keep = expected >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("power_a", [0.01, 0.5, 1.0])
def test_query_slot_law_matches_the_formula(power_a: float) -> None:
    """10^5 draws: the first query slot follows i^(a-1)/sum (chi-square p > 0.001)."""
    cfg = ZoologyConfig(vocab=256, seq_len=96, pairs=8, power_a=power_a)
    counts = _first_slot_counts(cfg, 100_000, seed=11)
    assert _chi_square_p(counts, cfg.slot_probabilities()) > 1e-3


def test_chi_square_rejects_a_wrong_law() -> None:
    """The same test fails a generator whose slots follow another power (uniform slots
    tested against a = 0.01), so the check above can fail."""
    uniform = ZoologyConfig(vocab=256, seq_len=96, pairs=8, power_a=1.0)
    counts = _first_slot_counts(uniform, 100_000, seed=11)
    skewed = ZoologyConfig(vocab=256, seq_len=96, pairs=8, power_a=0.01)
    assert _chi_square_p(counts, skewed.slot_probabilities()) < 1e-6


def test_slots_are_distinct_and_in_range() -> None:
    s = draw_slots(CFG, 1000, np.random.default_rng(0))
    assert s.shape == (1000, 8) and s.min() >= 0 and s.max() < CFG.slots
    assert all(len(set(r)) == 8 for r in s)


def test_filler_repeats_counted_and_absent_without_random_filler() -> None:
    cfg = ZoologyConfig(vocab=64, seq_len=128, pairs=8)
    b = generate(cfg, 4000, np.random.default_rng(5))
    got = filler_repeats(b.tokens, b.targets, cfg)
    # each unlabelled query-region position repeats one of the K stored keys w.p. K/V
    positions = cfg.seq_len - 2 * cfg.pairs - cfg.pairs
    expected = positions * cfg.pairs / cfg.vocab
    assert got["per_sequence"] == pytest.approx(expected, rel=0.05)
    clean = ZoologyConfig(vocab=64, seq_len=128, pairs=8, random_non_queries=False)
    b = generate(clean, 100, np.random.default_rng(5))
    assert filler_repeats(b.tokens, b.targets, clean)["unlabelled_key_repeats"] == 0


def test_floors_and_label() -> None:
    f = floors(CFG)
    assert f["value_marginal"] == 1 / 128 and f["best_no_binding"] == 1 / 8
    assert CFG.label == "V256-L64-K8-a0.01"


@pytest.mark.parametrize(
    "bad, key",
    [
        ({"pairs": 0}, "task.pairs"),
        ({"pairs": 200}, "task.pairs"),
        ({"seq_len": 20}, "task.seq_len"),
        ({"power_a": 0}, "task.power_a"),
        ({"typo": 1}, "typo"),
    ],
)
def test_bad_settings_fail_naming_the_key(bad: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        build_task({"name": "zoology_mqar", "vocab": 256, "seq_len": 64, "pairs": 8, **bad})


def test_adapter_self_test_reports_repeats() -> None:
    task = build_task({"name": "zoology_mqar", "vocab": 256, "seq_len": 64, "pairs": 8})
    held = task.eval_set(50)
    assert task.oracle(held) == []
    report = task.self_tests(held)["filler_repeats"]
    assert report["ok"] and report["unlabelled_key_repeats"] >= 0
