"""Lattice recall: generator vs its independent oracle, corruption, layout, floors, adapter."""

from __future__ import annotations

import time

import numpy as np
import pytest

from arbench.tasks import IGNORE, build_task
from arbench.tasks.base import load_eval_set, save_eval_set, stream_rng
from arbench.tasks.lattice_recall import (
    LatticeConfig,
    LatticeRecallTask,
    floors,
    generate,
    heldout,
    oracle_check,
    with_headline,
)

SMALL = {"n_keys": 64, "n_values": 64}
CFGS = [
    LatticeConfig(pairs=16, **SMALL),
    LatticeConfig(pairs=16, filler=3, **SMALL),
    LatticeConfig(pairs=16, overwrite=0.25, **SMALL),
    LatticeConfig(pairs=16, filler=2, overwrite=0.5, queries=8, answer="key", **SMALL),
    LatticeConfig(pairs=16, strata=4, overwrite=0.3, **SMALL),
    LatticeConfig(pairs=16, strata=4, queries=8, filler=1, answer="key", **SMALL),
    LatticeConfig(pairs=32, queries=100, **SMALL),  # Q capped at P
    LatticeConfig(pairs=64, n_keys=64, n_values=128, overwrite=0.5),  # every key stored
]


@pytest.mark.parametrize("cfg", CFGS)
def test_oracle_accepts_generated(cfg: LatticeConfig) -> None:
    cfg.validate()
    b = generate(cfg, 32, stream_rng(3, 7))
    assert b.tokens.shape == b.targets.shape == (32, cfg.length)
    assert oracle_check(b.tokens, b.targets, cfg) == []
    assert ((b.targets != IGNORE).sum(1) == cfg.n_queries).all()


def test_layout_and_last_write_wins() -> None:
    cfg = LatticeConfig(pairs=16, filler=2, overwrite=0.25, answer="sep", **SMALL)
    P, M, f, B = cfg.pairs, cfg.n_updates, cfg.filler, cfg.block
    assert M == 4 and cfg.length == (P + M) * B + 2 * P and cfg.vocab_size == 130
    b = generate(cfg, 16, stream_rng(0, 0))
    for tok, tgt in zip(b.tokens, b.targets, strict=True):
        w = tok[: cfg.write_len].reshape(P + M, B)
        keys, values, fill = w[:, f], w[:, f + 1], w[:, :f]
        assert len(set(keys[:P])) == P and set(keys[P:]) <= set(keys[:P])
        assert len(set(values)) == P + M and (values >= cfg.n_keys).all()
        assert not set(fill.ravel()) & set(keys[:P])  # filler: unstored keys only
        assert (fill < cfg.n_keys).all()
        latest = {}
        for k, v in zip(keys, values, strict=True):
            latest[k] = v
        q = tok[cfg.write_len :].reshape(-1, 2)
        assert (q[:, 1] == cfg.sep_id).all() and len(set(q[:, 0])) == P
        at = np.flatnonzero(tgt != IGNORE)
        assert (tok[at] == cfg.sep_id).all()
        assert [latest[k] for k in q[:, 0]] == tgt[at].tolist()
    key_cfg = LatticeConfig(pairs=16, filler=2, overwrite=0.25, answer="key", **SMALL)
    kb = generate(key_cfg, 16, stream_rng(0, 0))
    assert (kb.tokens == b.tokens).all()  # same rows, the answer read one slot earlier
    at = np.nonzero(kb.targets != IGNORE)
    assert (kb.tokens[at] < cfg.n_keys).all()


def test_query_info_reads_updates_and_strata_from_tokens() -> None:
    cfg = LatticeConfig(pairs=16, strata=4, overwrite=0.25, filler=2, **SMALL)
    b = generate(cfg, 64, stream_rng(1, 1))
    info = cfg.query_info(b.tokens)
    assert (info.updated.sum(1) == cfg.n_updates).all()  # Q = P: every update is asked
    assert all((np.bincount(s, minlength=4) == 4).all() for s in info.stratum)
    for r in range(3):
        keys = b.tokens[r, cfg.filler : cfg.write_len : cfg.block]
        for q in range(cfg.n_queries):
            k = info.key[r, q]
            assert info.updated[r, q] == ((keys == k).sum() == 2)
            assert info.store_index[r, q] == np.flatnonzero(keys == k)[0]
            assert info.stratum[r, q] == info.store_index[r, q] // 4
            assert b.targets[r, info.answer_pos[r, q]] != IGNORE


def test_uniform_queries_cover_every_depth() -> None:
    cfg = LatticeConfig(pairs=32, queries=8, **SMALL)
    info = cfg.query_info(generate(cfg, 400, stream_rng(0, 2)).tokens)
    depth = np.bincount(info.store_index.ravel(), minlength=32)
    assert depth.min() > 50  # each of the 32 store positions asked ~100 times


def test_streams_are_pure_functions_and_disjoint() -> None:
    cfg = LatticeConfig(pairs=16, filler=2, overwrite=0.25, **SMALL)
    a = generate(cfg, 8, stream_rng(1, 5))
    again = generate(cfg, 8, stream_rng(1, 5))
    assert (a.tokens == again.tokens).all() and (a.targets == again.targets).all()
    assert not (a.tokens == generate(cfg, 8, stream_rng(1, 6)).tokens).all()
    assert not (a.tokens == generate(cfg, 8, stream_rng(2, 5)).tokens).all()
    assert not (heldout(cfg, 8).tokens == generate(cfg, 8, stream_rng(0, 0)).tokens).all()


def _write(cfg: LatticeConfig, i: int, slot: int) -> int:
    """Position of write block i's key (slot 0) or value (slot 1)."""
    return i * cfg.block + cfg.filler + slot


def _corrupt(kind: str, tok: np.ndarray, tgt: np.ndarray, cfg: LatticeConfig) -> None:
    P = cfg.pairs
    info = cfg.query_info(tok[:1])
    at = info.answer_pos[0]
    if kind == "flip_target":
        tgt[0, at[0]] = cfg.n_keys + (tgt[0, at[0]] - cfg.n_keys + 1) % cfg.n_values
    elif kind == "swap_values":
        a, b = _write(cfg, 0, 1), _write(cfg, 1, 1)
        tok[0, [a, b]] = tok[0, [b, a]]
    elif kind == "duplicate_key":
        tok[0, _write(cfg, 1, 0)] = tok[0, _write(cfg, 0, 0)]
    elif kind == "first_write_wins":  # an updated key answered with its old value
        q = np.flatnonzero(info.updated[0])[0]
        tgt[0, at[q]] = tok[0, _write(cfg, int(info.store_index[0, q]), 1)]
    elif kind == "stored_key_as_filler":
        tok[0, 0] = tok[0, _write(cfg, 3, 0)]
    elif kind == "update_unstored_key":
        stored = set(tok[0, cfg.filler : P * cfg.block : cfg.block].tolist())
        tok[0, _write(cfg, P, 0)] = next(k for k in range(cfg.n_keys) if k not in stored)
    elif kind == "missing_target":
        tgt[0, at[-1]] = IGNORE
    elif kind == "target_off_answer":
        tgt[0, at[0] - 1] = tgt[0, at[0]]
    elif kind == "query_repeated":
        tok[0, at[1] - 1] = tok[0, at[0] - 1]
    elif kind == "sep_missing":
        tok[0, at[0]] = cfg.unused_id
    elif kind == "value_in_key_slot":
        tok[0, _write(cfg, 2, 0)] = cfg.n_keys


KINDS = [
    "flip_target",
    "swap_values",
    "duplicate_key",
    "first_write_wins",
    "stored_key_as_filler",
    "update_unstored_key",
    "missing_target",
    "target_off_answer",
    "query_repeated",
    "sep_missing",
    "value_in_key_slot",
]


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_rejects_corruption(kind: str) -> None:
    cfg = LatticeConfig(pairs=16, filler=2, overwrite=0.25, **SMALL)
    b = generate(cfg, 4, stream_rng(0, 1))
    assert oracle_check(b.tokens, b.targets, cfg) == []
    _corrupt(kind, b.tokens, b.targets, cfg)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert problems and all(p.startswith("row 0") for p in problems)


def test_oracle_checks_strata_and_shape() -> None:
    cfg = LatticeConfig(pairs=16, strata=4, queries=8, **SMALL)
    uniform = LatticeConfig(pairs=16, queries=8, **SMALL)
    b = generate(uniform, 64, stream_rng(0, 3))  # uniform queries: strata unbalanced somewhere
    assert any("per stratum" in p for p in oracle_check(b.tokens, b.targets, cfg))
    assert "expected" in oracle_check(b.tokens[:, :-2], b.targets[:, :-2], cfg)[0]


def test_floors_match_monte_carlo() -> None:
    cfg = LatticeConfig(pairs=8, overwrite=0.25, strata=2, **SMALL)
    P, M = cfg.pairs, cfg.n_updates
    f = floors(cfg)
    assert f["value_marginal"] == pytest.approx(1 / 64)
    assert f["uniform_pair_no_binding"] == pytest.approx(1 / (P + M))
    assert f["best_no_binding"] == pytest.approx(1 / P + (P - M) / P**2)
    assert floors(LatticeConfig(pairs=8, **SMALL))["best_no_binding"] == pytest.approx(1 / 8)
    # the strategy: key matching tells an updated query; guess among that pass's values
    b = generate(cfg, 20000, stream_rng(0, 4))
    info = cfg.query_info(b.tokens)
    rng = np.random.default_rng(0)
    values = b.tokens[:, cfg.filler + 1 : cfg.write_len : cfg.block]
    pick = np.where(info.updated, P + rng.integers(0, M, info.key.shape), rng.integers(0, P))
    rows = np.arange(len(values))[:, None]
    hit = values[rows, pick] == b.targets[rows, info.answer_pos]
    assert f["best_no_binding"] == pytest.approx(hit.mean(), abs=0.004)


@pytest.mark.parametrize(
    ("task", "needle"),
    [
        ({"pairs": 70, "n_keys": 64}, "task.pairs=70 exceeds the key vocabulary task.n_keys"),
        ({"pairs": 60, "n_values": 64, "overwrite": 0.5}, "task.n_values"),
        ({"pairs": 0}, "task.pairs"),
        ({"overwrite": 1.0}, "task.overwrite"),
        ({"overwrite": -0.1}, "task.overwrite"),
        ({"answer": "mask"}, "task.answer"),
        ({"filler": -1}, "task.filler"),
        ({"filler": 2, "pairs": 64, "n_keys": 64}, "task.filler"),
        ({"strata": 3, "pairs": 16}, "task.strata"),
        ({"strata": -1}, "task.strata"),
        ({"queries": -2}, "task.queries"),
        ({"pairz": 3}, "unknown key 'pairz'"),
    ],
)
def test_bad_settings_name_the_key(task: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle) as err:
        build_task({"name": "lattice_recall", **task})
    assert "\n" not in str(err.value)


def test_large_store_generates_fast() -> None:
    for f in (0, 8):
        cfg = LatticeConfig(pairs=8192, queries=8192, filler=f, overwrite=0.25, strata=8)
        t = time.perf_counter()
        b = generate(cfg, 8, stream_rng(0, 0))
        assert time.perf_counter() - t < 2.0
        assert oracle_check(b.tokens, b.targets, cfg) == []


def test_adapter_round_trips_a_wide_held_out_set_and_splits_scores(tmp_path, monkeypatch) -> None:
    settings = {"name": "lattice_recall", "pairs": 16, "overwrite": 0.25, "strata": 2}
    task = build_task(settings, tmp_path)  # default sizes: SEP = 32,769 needs int32
    assert task.vocab_size == 32770 and task.cfg.sep_id > np.iinfo(np.int16).max
    held = task.eval_set(8)
    save_eval_set(held, tmp_path / "eval.npz")
    assert (load_eval_set(tmp_path).tokens == held.tokens).all()  # stored without a wrap
    assert task.oracle(load_eval_set(tmp_path)) == []
    assert (task.held_out().tokens == held.tokens).all()
    a, b = task.train_batch(1, 2, 4), task.train_batch(1, 2, 4)
    assert (a.tokens == b.tokens).all() and task.oracle(a) == []
    assert "P=16" in task.summary()

    info = task.cfg.query_info(held.tokens)

    def right_when_updated(model, tokens, targets, batch=256):
        pred = np.full(targets.shape, -1)
        rows = np.arange(len(tokens))[:, None]
        pos = info.answer_pos
        pred[rows, pos] = np.where(info.updated, targets[rows, pos], -1)
        return pred

    monkeypatch.setattr("arbench.evaluate.recall.predict", right_when_updated)
    scores = task.evaluate(object())
    assert scores["accuracy_updated"] == 1.0 and scores["accuracy_untouched"] == 0.0
    assert scores["accuracy"] == pytest.approx(4 / 16)
    assert scores["queries"] == 8 * 16 and scores["updated_queries"] == 8 * 4
    assert 0.0 <= scores["accuracy_stratum_0"] <= 1.0 and "accuracy_stratum_1" in scores


def test_evaluate_runs_a_real_model(tmp_path) -> None:
    from arbench.models.lm import ModelConfig, build_model

    settings = {"name": "lattice_recall", "pairs": 8, "n_keys": 32, "n_values": 32}
    task = build_task(settings, tmp_path)
    save_eval_set(task.eval_set(4), tmp_path / "eval.npz")
    model = build_model(ModelConfig(vocab_size=task.vocab_size, d_model=8, layers=1), 0)
    scores = task.evaluate(model)
    assert 0.0 <= scores["accuracy"] <= 1.0 and scores["accuracy_updated"] is None


def test_batches_mark_the_store_pass_keys() -> None:
    """key_positions: where the address-spread regulariser reads the keys' write addresses."""
    cfg = LatticeConfig(pairs=5, filler=2, overwrite=0.4, n_keys=32, n_values=32)
    batch = generate(cfg, 3, np.random.default_rng(1))
    assert batch.key_positions.shape == (3, 5)
    assert (batch.key_positions == np.arange(5) * cfg.block + 2).all()
    keys = np.take_along_axis(batch.tokens, batch.key_positions, axis=1)
    info = cfg.query_info(batch.tokens)
    assert all(set(info.key[r]) == set(keys[r]) for r in range(3))  # every stored key asked


def test_the_headline_option_reports_updated_or_untouched_keys() -> None:
    out = {"accuracy": 0.8, "accuracy_updated": 0.5, "accuracy_untouched": 0.9}
    assert with_headline(out, "all") == out
    assert with_headline(out, "updated") == {**out, "accuracy": 0.5, "accuracy_all": 0.8}
    assert with_headline(out, "untouched")["accuracy"] == 0.9
    with pytest.raises(ValueError, match="eval.headline=updated: no held-out query"):
        with_headline({**out, "accuracy_updated": None}, "updated")
    with pytest.raises(ValueError, match="eval.headline must be"):
        with_headline(out, "stale")
    assert LatticeRecallTask.eval_option_names() == {"headline", "batch_tokens"}
