"""MQAR generator vs its independent oracle, corruption detection, and floors."""

from __future__ import annotations

import numpy as np
import pytest

from arbench.tasks import IGNORE, build_task
from arbench.tasks.base import save_eval_set
from arbench.tasks.mqar import (
    MQARConfig,
    floors,
    generate,
    heldout,
    oracle_check,
    stream_rng,
)

CFGS = [MQARConfig(), MQARConfig(pairs=4, n_keys=8, n_values=5, seq_len=40)]


@pytest.mark.parametrize("cfg", CFGS)
def test_oracle_accepts_generated(cfg: MQARConfig) -> None:
    b = generate(cfg, 64, stream_rng(3, 7))
    assert oracle_check(b.tokens, b.targets, cfg) == []
    assert b.tokens.shape == (64, cfg.length)
    assert ((b.targets != IGNORE).sum(1) == cfg.pairs).all()


def test_layout_invariants() -> None:
    cfg = MQARConfig(pairs=8, n_keys=16, n_values=16)
    b = generate(cfg, 32, stream_rng(0, 0))
    keys = b.tokens[:, 0 : 2 * cfg.pairs : 2]
    assert all(len(set(r)) == cfg.pairs for r in keys.tolist())  # distinct keys
    assert (keys < cfg.n_keys).all()
    vals = b.tokens[:, 1 : 2 * cfg.pairs : 2]
    assert ((vals >= cfg.n_keys) & (vals < cfg.n_keys + cfg.n_values)).all()
    # answers never appear in the query region: it holds keys, MASK and filler only
    q = b.tokens[:, 2 * cfg.pairs :]
    assert ((q < cfg.n_keys) | (q == cfg.mask_id) | (q == cfg.filler_id)).all()


def test_streams_are_pure_functions_and_disjoint() -> None:
    cfg = MQARConfig(pairs=8, n_keys=16, n_values=16)
    a = generate(cfg, 8, stream_rng(1, 5)).tokens
    assert (a == generate(cfg, 8, stream_rng(1, 5)).tokens).all()
    assert not (a == generate(cfg, 8, stream_rng(1, 6)).tokens).all()
    ev = heldout(cfg, 8, 1).tokens
    assert not any((ev == generate(cfg, 8, stream_rng(1, s)).tokens).all() for s in range(3))


def _corrupt(kind: str, tok: np.ndarray, tgt: np.ndarray, cfg: MQARConfig) -> None:
    K = cfg.pairs
    mask_pos = np.flatnonzero(tgt[0] != IGNORE)
    if kind == "wrong_answer":
        p = mask_pos[0]
        tgt[0, p] = cfg.n_keys + (tgt[0, p] - cfg.n_keys + 1) % cfg.n_values
    elif kind == "duplicate_key":
        tok[0, 2] = tok[0, 0]
    elif kind == "value_in_key_slot":
        tok[0, 1] = 0
    elif kind == "missing_target":
        tgt[0, mask_pos[-1]] = IGNORE
    elif kind == "target_off_mask":
        tgt[0, 2 * K] = tgt[0, mask_pos[0]]
    elif kind == "dropped_query":
        p = mask_pos[0]
        tok[0, p - 1 : p + 1] = cfg.filler_id
        tgt[0, p] = IGNORE
    elif kind == "answer_leaked":
        tok[0, mask_pos[0]] = tgt[0, mask_pos[0]]
    elif kind == "unknown_key_queried":
        stored = set(tok[0, 0 : 2 * K : 2].tolist())
        tok[0, mask_pos[0] - 1] = next(k for k in range(cfg.n_keys) if k not in stored)


@pytest.mark.parametrize(
    "kind",
    [
        "wrong_answer",
        "duplicate_key",
        "value_in_key_slot",
        "missing_target",
        "target_off_mask",
        "dropped_query",
        "answer_leaked",
        "unknown_key_queried",
    ],
)
def test_oracle_rejects_corruption(kind: str) -> None:
    cfg = MQARConfig(pairs=8, n_keys=16, n_values=16)
    b = generate(cfg, 4, stream_rng(0, 1))
    _corrupt(kind, b.tokens, b.targets, cfg)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert problems and all(p.startswith("row 0") for p in problems)


def test_floors_match_monte_carlo() -> None:
    cfg = MQARConfig(pairs=32, n_keys=64, n_values=64)
    f = floors(cfg)
    assert f["value_marginal"] == pytest.approx(1 / 64)
    rng = np.random.default_rng(0)
    vals = rng.integers(0, cfg.n_values, size=(20000, cfg.pairs))
    mode_hits = np.array([np.bincount(r).max() for r in vals]) / cfg.pairs
    assert f["best_no_binding"] == pytest.approx(mode_hits.mean(), abs=0.002)
    small = floors(MQARConfig(pairs=2, n_keys=4, n_values=2, seq_len=8))
    # two values from {a, b}: max count is 2 w.p. 1/2, else 1 -> E[max]/K = 0.75
    assert small["best_no_binding"] == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("task", "needle"),
    [
        ({"name": "mqar", "pairs": 70, "n_keys": 64}, "task.n_keys"),
        ({"name": "mqar", "pairs": 8, "seq_len": 20}, "task.seq_len"),
        ({"name": "mqar", "pairs": 0}, "task.pairs"),
        ({"name": "mqar", "paris": 8}, "unknown key 'paris'"),
        ({"name": "nope"}, "unknown task"),
    ],
)
def test_bad_task_configs_name_the_key(task: dict, needle: str) -> None:
    with pytest.raises((ValueError, KeyError), match=needle):
        build_task(task)


def test_adapter_streams_validates_and_reads_its_held_out_set(tmp_path) -> None:
    task = build_task({"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8}, tmp_path)
    assert (task.data, task.layout) == ("stream", "bars")
    a, b = task.train_batch(2, 9, 6), task.train_batch(2, 9, 6)
    assert (a.tokens == b.tokens).all() and (a.targets == b.targets).all()
    held_out = task.eval_set(16)
    assert task.oracle(held_out) == []
    held_out.targets[3, np.flatnonzero(held_out.targets[3] != IGNORE)[0]] = 0  # a key id
    assert task.oracle(held_out)[0].startswith("row 3")
    save_eval_set(task.eval_set(16), tmp_path / "eval.npz")

    class Constant:  # a "model" that always answers the first value: chance-level accuracy
        def eval(self):
            return self

        def hidden(self, tok):
            import torch

            return torch.zeros(*tok.shape, 1), None

        def logits(self, h):
            import torch

            out = torch.zeros(len(h), task.vocab_size)
            out[:, task.cfg.n_keys] = 1.0
            return out

    scores = task.evaluate(Constant())
    assert scores["supervised"] == 16 * 4 and 0.0 <= scores["accuracy"] < 0.5
