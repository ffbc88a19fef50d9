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


# --------------------------------------------------------------------------- evaluation


def _tiny_model(variant: str = "hybrid_square"):
    import torch

    from arbench.models.kvbench import KVModelConfig, KVTransformer

    torch.manual_seed(0)
    cfg = KVModelConfig(
        variant=variant, d_model=16, layers=2, heads=2, kv_heads=2, head_dim=8, ffn_hidden=32
    )
    return KVTransformer(cfg)


def test_a_load_signal_sets_the_number_of_keys() -> None:
    from arbench.tasks.base import Signal
    from arbench.tasks.kvbench import KVBenchTask

    task = KVBenchTask(KVConfig(n=8))
    b = task.train_batch(0, 3, 4, Signal(load=2))
    assert b.tokens.shape == (4, KVConfig(n=2).length)
    assert oracle_check(b.tokens, b.targets, KVConfig(n=2)) == []
    assert task.train_batch(0, 3, 4).tokens.shape == (4, CFG.length)


def test_sweep_sets_are_valid_and_independent_of_the_other_lengths() -> None:
    from arbench.tasks.kvbench import sweep_set

    at, b = sweep_set(CFG, 32, 5)
    assert at.n == 32 and oracle_check(b.tokens, b.targets, at) == []
    _, again = sweep_set(CFG, 32, 5)
    assert np.array_equal(b.tokens, again.tokens)


def test_evaluation_sweeps_lengths_and_reads_per_index_cross_entropy(tmp_path) -> None:
    from arbench.tasks.base import save_eval_set
    from arbench.tasks.kvbench import KVBenchTask, heldout

    save_eval_set(heldout(CFG, 6), tmp_path / "eval.npz")
    task = KVBenchTask(CFG, tmp_path)
    lines: list[str] = []
    scores = task.evaluate(
        _tiny_model(),
        examples=3,
        n=[16, 8],
        lengths=[400],
        index_entries=10,
        index_examples=2,
        tile=64,
        progress=lines.append,
    )
    assert 0.0 <= scores["accuracy"] <= 1.0
    assert list(scores["per_config"]) == ["n8", "n16", "n25"]  # ascending; 400 // 16 = 25
    row = scores["per_config"]["n16"]
    assert row["tokens"] == 3 * KVConfig(n=16).length and row["length"] == 256
    assert row["tokens_per_s"] > 0 and row["peak_mib"] > 0 and len(lines) == 3
    ce = scores["per_index"]
    assert len(ce["first"]) == len(ce["second"]) == 10
    # every key's first entry is unpredictable: the first entry is always a first occurrence
    assert ce["first"][0] is not None and ce["second"][0] is None
    assert task.eval_tokens(3, n=[16, 8], lengths=[400]) == 3 * (128 + 256 + 128 + 400)


def test_tiled_evaluation_scores_like_the_plain_one(tmp_path) -> None:
    """Attention over more than ``tile`` tokens runs tiled: the same predictions."""
    from arbench.tasks.base import save_eval_set
    from arbench.tasks.kvbench import KVBenchTask, heldout

    save_eval_set(heldout(CFG, 2), tmp_path / "eval.npz")
    task = KVBenchTask(CFG, tmp_path)
    model = _tiny_model("hybrid_square")
    plain = task.evaluate(model, examples=2, n=[32], index_entries=0, tile=4096)
    tiled = task.evaluate(model, examples=2, n=[32], index_entries=0, tile=48)
    assert plain["per_config"]["n32"]["accuracy"] == tiled["per_config"]["n32"]["accuracy"]


def test_a_sweep_set_that_fails_its_oracle_stops_the_evaluation(monkeypatch) -> None:
    import arbench.tasks.kvbench as kv

    real = kv.generate

    def broken(cfg, count, rng, signal=None):
        b = real(cfg, count, rng, signal)
        b.targets[0, b.targets[0] != IGNORE] = (b.targets[0, b.targets[0] != IGNORE] + 1) % 10
        return b

    monkeypatch.setattr(kv, "generate", broken)
    with pytest.raises(RuntimeError, match="n=8 fails its oracle"):
        kv.sweep(_tiny_model(), CFG, [8], 2)


def test_index_entries_must_be_even() -> None:
    from arbench.tasks.kvbench import index_set

    with pytest.raises(ValueError, match="index_entries"):
        index_set(CFG, 7, 1)


def test_max_tokens_caps_the_sequences_read_at_long_lengths() -> None:
    from arbench.tasks.kvbench import KVBenchTask, sweep_examples

    assert sweep_examples(CFG, 8, 100, None) == 100
    assert sweep_examples(CFG, 256, 100, 32768) == 8  # 4,096 tokens each
    assert sweep_examples(CFG, 4096, 100, 32768) == 1  # never fewer than one
    task = KVBenchTask(CFG)
    assert task.eval_tokens(100, n=[256], max_tokens=32768) == 100 * 128 + 8 * 4096


LONG = KVConfig(n=8, key_digits=7, value_digits=3, mutant_j=7, mutant_mix=0.5)


def test_the_long_sweep_draws_each_kind_apart() -> None:
    """A mutant-cluster task's sweep sets: every "mutant" sequence holds a cluster of j
    near-duplicate keys, no "plain" one does, and each kind has its own stream."""
    from arbench.tasks.kvbench import sweep_kinds, sweep_set

    assert sweep_kinds(LONG) == ("mutant", "plain") and sweep_kinds(CFG) == ()
    at_m, mutant = sweep_set(LONG, 32, 4, "mutant")
    at_p, plain = sweep_set(LONG, 32, 4, "plain")
    assert not oracle_check(mutant.tokens, mutant.targets, at_m)
    assert not oracle_check(plain.tokens, plain.targets, at_p)
    assert min(mutant_clusters(mutant.tokens, at_m)) >= 7
    assert max(mutant_clusters(plain.tokens, at_p)) < 7
    with pytest.raises(ValueError, match="sweep kind"):
        sweep_set(LONG, 32, 4, "needle")


def test_the_long_sweep_scores_mutant_and_plain_sequences_apart() -> None:
    """Each length: ``examples`` sequences of each kind, their exact match apart and per
    sequence, the pooled accuracy their mean weighted by second occurrences; the chunked
    layer-by-layer pass scores as the whole-sequence one."""
    from arbench.tasks.kvbench import KVBenchTask, sweep

    model = _tiny_model("hybrid_square")
    out = sweep(model, LONG, [10], 3, batch_tokens=1 << 12, tile=64)
    row = out["n10"]
    assert set(row["kinds"]) == {"mutant", "plain"} and row["examples"] == 6
    for kind in row["kinds"].values():
        assert kind["examples"] == 3 and len(kind["per_sequence"]) == 3
        assert kind["second_occurrences"] == 30
        assert kind["accuracy"] == pytest.approx(np.mean(kind["per_sequence"]))
    pooled = np.mean([k["accuracy"] for k in row["kinds"].values()])
    assert row["accuracy"] == pytest.approx(pooled) and row["tokens"] == 6 * 240
    chunked = sweep(model, LONG, [10], 3, batch_tokens=1 << 12, tile=16, chunk=50)["n10"]
    assert chunked["kinds"] == row["kinds"]
    assert KVBenchTask(LONG).eval_tokens(3, lengths=[240]) == 3 * 192 + 2 * 3 * 240
