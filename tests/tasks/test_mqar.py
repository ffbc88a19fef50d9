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
    rebind,
    rebinding_self_test,
    stream_rng,
    uniform_pair_hit,
)

CFGS = [
    MQARConfig(),
    MQARConfig(answer="mask"),
    MQARConfig(pairs=4, n_keys=8, n_values=5, seq_len=40),
    MQARConfig(pairs=4, n_keys=8, n_values=5, seq_len=40, answer="mask"),
]


@pytest.mark.parametrize("cfg", CFGS)
def test_oracle_accepts_generated(cfg: MQARConfig) -> None:
    b = generate(cfg, 64, stream_rng(3, 7))
    assert oracle_check(b.tokens, b.targets, cfg) == []
    assert b.tokens.shape == (64, cfg.length)
    assert ((b.targets != IGNORE).sum(1) == cfg.pairs).all()


@pytest.mark.parametrize("answer", ["key", "mask"])
def test_layout_invariants(answer: str) -> None:
    cfg = MQARConfig(pairs=8, n_keys=16, n_values=16, answer=answer)
    b = generate(cfg, 32, stream_rng(0, 0))
    keys = b.tokens[:, 0 : 2 * cfg.pairs : 2]
    assert all(len(set(r)) == cfg.pairs for r in keys.tolist())  # distinct keys
    assert (keys < cfg.n_keys).all()
    vals = b.tokens[:, 1 : 2 * cfg.pairs : 2]
    assert ((vals >= cfg.n_keys) & (vals < cfg.n_keys + cfg.n_values)).all()
    # answers never appear in the query region: it holds keys, MASK and filler only
    q = b.tokens[:, 2 * cfg.pairs :]
    assert ((q < cfg.n_keys) | (q == cfg.mask_id) | (q == cfg.filler_id)).all()
    # the answer is read at the query key itself, or at the MASK right after it
    at = np.nonzero(b.targets != IGNORE)
    read = b.tokens[at]
    assert ((read < cfg.n_keys) if answer == "key" else (read == cfg.mask_id)).all()
    assert (cfg.mask_id in b.tokens) == (answer == "mask")


def test_streams_are_pure_functions_and_disjoint() -> None:
    cfg = MQARConfig(pairs=8, n_keys=16, n_values=16)
    a = generate(cfg, 8, stream_rng(1, 5)).tokens
    assert (a == generate(cfg, 8, stream_rng(1, 5)).tokens).all()
    assert not (a == generate(cfg, 8, stream_rng(1, 6)).tokens).all()
    ev = heldout(cfg, 8, 1).tokens
    assert not any((ev == generate(cfg, 8, stream_rng(1, s)).tokens).all() for s in range(3))


def _corrupt(kind: str, tok: np.ndarray, tgt: np.ndarray, cfg: MQARConfig) -> None:
    K = cfg.pairs
    ans = np.flatnonzero(tgt[0] != IGNORE)  # answer positions
    p = ans[0]
    key_at = p if cfg.answer == "key" else p - 1  # where the first query's key sits
    if kind == "wrong_answer":
        tgt[0, p] = cfg.n_keys + (tgt[0, p] - cfg.n_keys + 1) % cfg.n_values
    elif kind == "duplicate_key":
        tok[0, 2] = tok[0, 0]
    elif kind == "value_in_key_slot":
        tok[0, 1] = 0
    elif kind == "missing_target":
        tgt[0, ans[-1]] = IGNORE
    elif kind == "target_off_answer":
        tgt[0, key_at + 1 if cfg.answer == "key" else key_at] = tgt[0, p]
    elif kind == "dropped_query":
        tok[0, key_at : key_at + 2] = cfg.filler_id
        tgt[0, p] = IGNORE
    elif kind == "answer_leaked":
        tok[0, key_at + 1] = tgt[0, p]
    elif kind == "unknown_key_queried":
        stored = set(tok[0, 0 : 2 * K : 2].tolist())
        tok[0, key_at] = next(k for k in range(cfg.n_keys) if k not in stored)
    elif kind == "wrong_layout_token":  # a MASK in key layout, a bare key in mask layout
        tok[0, key_at + 1] = cfg.mask_id if cfg.answer == "key" else cfg.filler_id


@pytest.mark.parametrize("answer", ["key", "mask"])
@pytest.mark.parametrize(
    "kind",
    [
        "wrong_answer",
        "duplicate_key",
        "value_in_key_slot",
        "missing_target",
        "target_off_answer",
        "dropped_query",
        "answer_leaked",
        "unknown_key_queried",
        "wrong_layout_token",
    ],
)
def test_oracle_rejects_corruption(kind: str, answer: str) -> None:
    cfg = MQARConfig(pairs=8, n_keys=16, n_values=16, answer=answer)
    b = generate(cfg, 4, stream_rng(0, 1))
    _corrupt(kind, b.tokens, b.targets, cfg)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert problems and all(p.startswith("row 0") for p in problems)


def test_floors_match_monte_carlo() -> None:
    cfg = MQARConfig(pairs=32, n_keys=64, n_values=26)
    f = floors(cfg)
    assert f["value_marginal"] == pytest.approx(1 / 26)
    rng = np.random.default_rng(0)
    n = 20000
    vals = rng.integers(0, cfg.n_values, size=(n, cfg.pairs))
    mode_hits = np.array([np.bincount(r).max() for r in vals]) / cfg.pairs
    assert f["best_no_binding"] == pytest.approx(mode_hits.mean(), abs=0.002)
    # the paper's strategy: answer the value of a uniformly chosen pair of the table
    asked, guessed = rng.integers(0, cfg.pairs, size=(2, n))
    rows = np.arange(n)
    pair_hits = vals[rows, asked] == vals[rows, guessed]
    assert f["uniform_pair_no_binding"] == pytest.approx(pair_hits.mean(), abs=0.004)
    assert f["rebinding_control"] == pytest.approx(pair_hits.mean(), abs=0.004)
    assert f["best_no_binding"] > f["uniform_pair_no_binding"] > 1 / cfg.pairs
    small = floors(MQARConfig(pairs=2, n_keys=4, n_values=2, seq_len=8))
    # two values from {a, b}: max count is 2 w.p. 1/2, else 1 -> E[max]/K = 0.75
    assert small["best_no_binding"] == pytest.approx(0.75)


def test_floors_reproduce_the_papers() -> None:
    """The paper's stated floors follow from 26 values (MQAR, K = 32) and 54 (collision, K = 4)."""
    assert floors(MQARConfig())["value_marginal"] == pytest.approx(0.038, abs=5e-4)
    assert floors(MQARConfig())["uniform_pair_no_binding"] == pytest.approx(0.068, abs=1e-3)
    assert uniform_pair_hit(4, 54) == pytest.approx(0.26, abs=5e-3)


@pytest.mark.parametrize(
    ("task", "needle"),
    [
        ({"name": "mqar", "pairs": 70, "n_keys": 64}, "task.n_keys"),
        ({"name": "mqar", "pairs": 8, "seq_len": 20}, "task.seq_len"),
        ({"name": "mqar", "pairs": 0}, "task.pairs"),
        ({"name": "mqar", "paris": 8}, "unknown key 'paris'"),
        ({"name": "mqar", "answer": "value"}, "task.answer"),
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


@pytest.mark.parametrize("cfg", CFGS)
def test_rebinding_permutes_each_table_and_the_oracle_rederives_it(cfg: MQARConfig) -> None:
    held_out = heldout(cfg, 200)
    control = rebind(held_out, cfg, stream_rng(0, 0, purpose=2))
    assert oracle_check(control.tokens, control.targets, cfg) == []
    K = cfg.pairs
    keys, values = held_out.tokens[:, 0 : 2 * K : 2], held_out.tokens[:, 1 : 2 * K : 2]
    assert (control.tokens[:, 0 : 2 * K : 2] == keys).all()  # the same key table
    new = control.tokens[:, 1 : 2 * K : 2]
    assert (np.sort(new, axis=1) == np.sort(values, axis=1)).all()  # values permuted only
    assert (control.tokens[:, 2 * K :] == held_out.tokens[:, 2 * K :]).all()  # same queries
    assert (control.targets != held_out.targets).any()  # and re-bound


def test_the_rebinding_self_test_catches_a_control_that_does_not_rebind(monkeypatch) -> None:
    import arbench.tasks.mqar as mqar

    cfg = MQARConfig()
    held_out = heldout(cfg, 500)
    good = rebinding_self_test(held_out, cfg)
    assert good["ok"] and good["oracle_problems"] == []
    assert abs(good["memoriser_accuracy"] - floors(cfg)["rebinding_control"]) < 0.01
    # a "control" that leaves the binding alone: the memoriser keeps 1.0
    monkeypatch.setattr(mqar, "rebinding_set", lambda b, c: b)
    assert not rebinding_self_test(held_out, cfg)["ok"]

    # a cyclic shift never leaves a pair in place: the memoriser falls below the floor
    def shifted(batch, c):
        out = rebind(batch, c, stream_rng(0, 0, purpose=2))
        vals = batch.tokens[:, 1 : 2 * c.pairs : 2]
        out.tokens[:, 1 : 2 * c.pairs : 2] = np.roll(vals, 1, axis=1)
        return mqar.Batch(out.tokens, _rederive(out.tokens, batch.targets, c))

    monkeypatch.setattr(mqar, "rebinding_set", shifted)
    assert not rebinding_self_test(held_out, cfg)["ok"]


def _rederive(tokens: np.ndarray, targets: np.ndarray, cfg: MQARConfig) -> np.ndarray:
    """Targets of ``tokens`` by table lookup at the answer positions of ``targets``."""
    out = targets.copy()
    for r in range(len(tokens)):
        table = dict(
            zip(tokens[r, 0 : 2 * cfg.pairs : 2], tokens[r, 1 : 2 * cfg.pairs : 2], strict=True)
        )
        for t in np.flatnonzero(targets[r] != IGNORE):
            out[r, t] = table[tokens[r, t] if cfg.answer == "key" else tokens[r, t - 1]]
    return out


class _Lookup:
    """A stand-in model answering each query from a key -> value map: read from the sequence's
    own table (it binds in context) or from the held-out set's original tables (it memorised)."""

    def __init__(self, cfg: MQARConfig, vocab: int, memorised: dict | None = None) -> None:
        self.cfg, self.vocab, self.memorised = cfg, vocab, memorised

    def eval(self):
        return self

    def hidden(self, tok):
        import torch

        K = self.cfg.pairs
        out = torch.zeros(*tok.shape, self.vocab)
        for r, row in enumerate(tok.tolist()):
            keys = tuple(row[0 : 2 * K : 2])
            table = (
                self.memorised[keys]
                if self.memorised
                else dict(zip(keys, row[1 : 2 * K : 2], strict=True))
            )
            for t in range(2 * K, len(row)):
                if row[t] in table:
                    out[r, t, table[row[t]]] = 1.0
        return out, None

    def logits(self, h):
        return h


def test_rebinding_scores_binding_in_context_and_exposes_memorising(tmp_path) -> None:
    settings = {"name": "mqar", "pairs": 8, "n_keys": 16, "n_values": 26}
    task = build_task(settings, tmp_path)
    held_out = task.eval_set(300)
    save_eval_set(held_out, tmp_path / "eval.npz")
    K = task.cfg.pairs
    memory = {}
    for row in held_out.tokens.tolist():
        keys = tuple(row[0 : 2 * K : 2])
        memory[keys] = dict(zip(keys, row[1 : 2 * K : 2], strict=True))
    binder = task.evaluate(_Lookup(task.cfg, task.vocab_size), rebinding=True)
    assert binder["accuracy"] == 1.0 and binder["rebinding_accuracy"] == 1.0
    memoriser = task.evaluate(_Lookup(task.cfg, task.vocab_size, memory), rebinding=True)
    assert memoriser["accuracy"] == 1.0
    floor = floors(task.cfg)["rebinding_control"]
    assert abs(memoriser["rebinding_accuracy"] - floor) < 0.03
    assert "rebinding_accuracy" not in task.evaluate(_Lookup(task.cfg, task.vocab_size))
