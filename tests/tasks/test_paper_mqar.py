"""The paper's MQAR probe: generator vs its independent oracle, the corruptions the oracle
must catch, the layout and its statistics, floors, settings, and the MASK never predicted."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from arbench.evaluate.recall import accuracy, predict
from arbench.tasks import IGNORE, build_task
from arbench.tasks.base import save_eval_set, stream_rng
from arbench.tasks.paper_mqar import (
    PaperMQARConfig,
    derangements,
    floors,
    generate,
    heldout,
    no_binding_self_test,
    oracle_check,
    rebind,
    rebinding_self_test,
)

CFGS = [
    PaperMQARConfig(),
    PaperMQARConfig(pairs=16),
    PaperMQARConfig(pairs=8),
    PaperMQARConfig(pairs=4, vocab=20, slack=0),
]


@pytest.mark.parametrize("cfg", CFGS)
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_oracle_accepts_generated(cfg: PaperMQARConfig, seed: int) -> None:
    b = generate(cfg, 128, stream_rng(seed, 3))
    assert b.tokens.shape == b.targets.shape == (128, cfg.length)
    assert oracle_check(b.tokens, b.targets, cfg) == []


def test_value_counts_match_the_paper() -> None:
    assert [PaperMQARConfig(pairs=k).n_values for k in (32, 16, 8)] == [26, 42, 50]


def test_layout() -> None:
    cfg = PaperMQARConfig()
    K = cfg.pairs
    assert cfg.length == 72 and cfg.mask_id == 63
    b = generate(cfg, 512, stream_rng(0, 0))
    keys = b.tokens[:, 0 : 2 * K : 2]
    assert (keys == np.arange(5, 5 + K)).all()  # fixed keys 5 .. 4+K in order
    values = b.tokens[:, 1 : 2 * K : 2]
    assert ((values >= 5 + K) & (values < 63)).all()
    assert ((b.tokens[:, 2 * K] >= 5) & (b.tokens[:, 2 * K] < 5 + K)).all()  # a query key
    assert (b.tokens[:, 2 * K + 1] == 63).all()  # the MASK at the answer slot
    assert (b.tokens != 63).sum(1).tolist() == [cfg.length - 1] * len(b)  # and nowhere else
    slack = b.tokens[:, 2 * K + 2 :]
    assert slack.shape[1] == 6 and slack.min() == 5 and slack.max() == 62  # prefill range
    assert (slack < 5 + K).any() and (slack >= 5 + K).any()  # keys and values alike
    assert ((b.targets != IGNORE).sum(1) == 1).all()
    assert (np.flatnonzero((b.targets != IGNORE).any(0)) == [2 * K + 1]).all()
    rows = np.arange(len(b))
    asked = b.tokens[:, 2 * K] - 5
    assert (b.targets[:, 2 * K + 1] == values[rows, asked]).all()


def test_the_query_is_uniform_and_values_repeat() -> None:
    cfg = PaperMQARConfig()
    n = 32_000
    b = generate(cfg, n, stream_rng(5, 0))
    counts = np.bincount(b.tokens[:, 2 * cfg.pairs] - 5, minlength=cfg.pairs)
    assert len(counts) == cfg.pairs
    expected = n / cfg.pairs
    assert (np.abs(counts - expected) < 0.2 * expected).all()  # about 6 standard errors
    values = b.tokens[:, 1 : 2 * cfg.pairs : 2]
    freq = np.bincount(values.ravel() - 37, minlength=cfg.n_values)
    assert len(freq) == cfg.n_values and (freq > 0).all()  # every value id occurs
    assert (np.abs(freq / freq.sum() - 1 / 26) < 0.005).all()
    # drawn with replacement: at K = 32 > 26 values every table repeats one; at K = 8 some do
    assert all(len(set(r)) < cfg.pairs for r in values[:100].tolist())
    small = PaperMQARConfig(pairs=8)
    v8 = generate(small, 1000, stream_rng(5, 1)).tokens[:, 1:16:2]
    repeats = np.mean([len(set(r)) < 8 for r in v8.tolist()])
    assert 0.3 < repeats < 0.6  # 1 - prod(1 - i/50) = 0.45


def _corrupt(kind: str, tok: np.ndarray, tgt: np.ndarray, cfg: PaperMQARConfig) -> None:
    K = cfg.pairs
    a = 2 * K + 1
    lo, hi = cfg.value_range
    if kind == "target_changed":
        tgt[0, a] = lo + (tgt[0, a] - lo + 1) % cfg.n_values
    elif kind == "key_swapped":
        tok[0, [0, 2]] = tok[0, [2, 0]]
    elif kind == "mask_replaced":
        tok[0, a] = tgt[0, a]
    elif kind == "value_out_of_range":
        tok[0, 3] = 5  # a key id in a value slot
    elif kind == "value_is_mask":
        tok[0, 1] = cfg.mask_id
    elif kind == "extra_supervised":
        tgt[0, a + 1] = tgt[0, a]
    elif kind == "target_moved":
        tgt[0, a - 1], tgt[0, a] = tgt[0, a], IGNORE
    elif kind == "query_not_a_key":
        tok[0, 2 * K] = lo
    elif kind == "mask_in_slack":
        tok[0, -1] = cfg.mask_id
    elif kind == "unused_id":
        tok[0, -2] = 0


NEEDLES = {  # each corruption, and what the oracle's report says about it
    "target_changed": "at the answer slot, the table gives",
    "key_swapped": "keys out of order",
    "mask_replaced": "MASK missing",
    "value_out_of_range": "outside [",
    "value_is_mask": "outside [",
    "extra_supervised": "supervised positions besides the answer slot",
    "target_moved": "supervised positions besides the answer slot",
    "query_not_a_key": "is not a key",
    "mask_in_slack": "outside the prefill range",
    "unused_id": "outside the prefill range",
}


@pytest.mark.parametrize("cfg", [PaperMQARConfig(), PaperMQARConfig(pairs=4, vocab=20)])
@pytest.mark.parametrize("kind", sorted(NEEDLES))
def test_oracle_rejects_corruption(kind: str, cfg: PaperMQARConfig) -> None:
    b = generate(cfg, 4, stream_rng(0, 1))
    assert oracle_check(b.tokens, b.targets, cfg) == []
    _corrupt(kind, b.tokens, b.targets, cfg)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert problems and all(p.startswith("row 0") for p in problems)
    assert any(NEEDLES[kind] in p for p in problems), problems


def test_oracle_reads_the_table_not_the_generator() -> None:
    """A target that is not the asked key's table entry is reported even with every token
    in place, with both values named; a sequence of the wrong length is reported."""
    cfg = PaperMQARConfig(pairs=4, vocab=20)
    b = generate(cfg, 200, stream_rng(2, 2))
    row = int(np.flatnonzero(b.tokens[:, 8] == 5)[0])  # a row asking the first key
    b.targets[row, 9] = b.tokens[row, 3]  # the second pair's value
    problems = oracle_check(b.tokens, b.targets, cfg)
    if b.tokens[row, 3] != b.tokens[row, 1]:
        assert problems == [
            f"row {row}: target {b.tokens[row, 3]} at the answer slot, the table gives "
            f"{b.tokens[row, 1]}"
        ]
    assert oracle_check(b.tokens[:, :-1], b.targets[:, :-1], cfg)  # wrong length


def test_floors_at_k32() -> None:
    f = floors(PaperMQARConfig())
    assert f["value_marginal"] == pytest.approx(1 / 26) and round(f["value_marginal"], 4) == 0.0385
    assert f["uniform_pair_no_binding"] == pytest.approx(1 / 32 + 31 / (32 * 26))
    assert round(f["uniform_pair_no_binding"], 4) == 0.0685
    assert f["table"] == pytest.approx(1 / 32)
    assert f["best_no_binding"] > f["uniform_pair_no_binding"] > f["table"]


def test_the_no_binding_floor_holds_on_the_data() -> None:
    cfg = PaperMQARConfig()
    held_out = heldout(cfg, 4000)
    test = no_binding_self_test(held_out, cfg)
    assert test["ok"], test
    # a "held-out set" whose tables draw from two values only: the guesser is off the floor
    cheat = heldout(cfg, 4000)
    K = cfg.pairs
    cheat.tokens[:, 1 : 2 * K : 2] = 37 + cheat.tokens[:, 1 : 2 * K : 2] % 2
    asked = cheat.tokens[:, 2 * K] - 5
    cheat.targets[:, 2 * K + 1] = cheat.tokens[np.arange(len(cheat)), 2 * asked + 1]
    assert oracle_check(cheat.tokens, cheat.targets, cfg) == []
    assert not no_binding_self_test(cheat, cfg)["ok"]


def test_same_seed_same_batch() -> None:
    cfg = PaperMQARConfig()
    a, b, c = (generate(cfg, 16, stream_rng(1, s)) for s in (4, 4, 5))
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.targets, b.targets)
    assert not np.array_equal(a.tokens, c.tokens)
    assert np.array_equal(heldout(cfg, 8).tokens, heldout(cfg, 8).tokens)
    assert not np.array_equal(heldout(cfg, 8).tokens, generate(cfg, 8, stream_rng(0, 0)).tokens)


@pytest.mark.parametrize(
    ("task", "needle"),
    [
        ({"name": "paper_mqar", "pairs": 60}, "task.pairs=60 is too large for the vocabulary"),
        ({"name": "paper_mqar", "pairs": 8, "vocab": 15}, "task.vocab=15"),
        ({"name": "paper_mqar", "pairs": 0}, "task.pairs must be >= 1"),
        ({"name": "paper_mqar", "slack": -1}, "task.slack must be >= 0"),
        ({"name": "paper_mqar", "paris": 8}, "unknown key 'paris'"),
    ],
)
def test_bad_settings_fail_early_naming_the_key(task: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle) as info:
        build_task(task)
    assert "\n" not in str(info.value)


def test_smallest_vocabulary_is_accepted() -> None:
    build_task({"name": "paper_mqar", "pairs": 8, "vocab": 16})  # two values


class _Fake:
    """A stand-in model: the logits at every position are ``scores`` (the same row)."""

    def __init__(self, scores: torch.Tensor) -> None:
        self.scores = scores

    def eval(self):
        return self

    def hidden(self, tok):
        return torch.zeros(*tok.shape, 1), None

    def logits(self, h):
        return self.scores.expand(len(h), -1).clone()


def test_predict_never_returns_an_excluded_id() -> None:
    scores = torch.arange(10, dtype=torch.float32)  # id 9 largest, then 8, then 7
    tokens = np.zeros((3, 4), dtype=np.int64)
    targets = np.full((3, 4), IGNORE)
    targets[:, 2] = 8
    assert (predict(_Fake(scores), tokens, targets)[:, 2] == 9).all()
    pred = predict(_Fake(scores), tokens, targets, exclude=(9,))
    assert (pred[:, 2] == 8).all() and (pred[:, [0, 1, 3]] == -1).all()
    assert (predict(_Fake(scores), tokens, targets, exclude=[9, 8])[:, 2] == 7).all()
    assert accuracy(_Fake(scores), tokens, targets)["accuracy"] == 0.0
    assert accuracy(_Fake(scores), tokens, targets, exclude=(9,))["accuracy"] == 1.0


def test_never_predicted_and_positions() -> None:
    paper = build_task({"name": "paper_mqar"})
    assert paper.never_predicted() == (63,) and paper.positions() == 72
    assert build_task({"name": "paper_mqar", "vocab": 80}).never_predicted() == (79,)
    mqar = build_task({"name": "mqar"})
    assert mqar.never_predicted() == () and mqar.positions() == mqar.cfg.length == 128


class _Lookup:
    """Answers the asked key's table value, with an even larger logit on the MASK: right
    only when evaluation excludes the MASK."""

    def __init__(self, cfg: PaperMQARConfig) -> None:
        self.cfg = cfg

    def eval(self):
        return self

    def hidden(self, tok):
        K = self.cfg.pairs
        out = torch.zeros(*tok.shape, self.cfg.vocab)
        rows = torch.arange(len(tok))
        out[rows, 2 * K + 1, tok[rows, 2 * (tok[:, 2 * K] - 5) + 1]] = 1.0
        out[:, :, self.cfg.mask_id] = 2.0
        return out, None

    def logits(self, h):
        return h


def test_adapter_streams_validates_and_evaluates_without_the_mask(tmp_path) -> None:
    task = build_task({"name": "paper_mqar", "pairs": 8}, tmp_path)
    assert (task.data, task.layout, task.vocab_size) == ("stream", "bars", 64)
    assert "K=8" in task.summary() and "L=24" in task.summary()
    a, b = task.train_batch(2, 9, 6), task.train_batch(2, 9, 6)
    assert (a.tokens == b.tokens).all() and (a.targets == b.targets).all()
    held_out = task.eval_set(300)
    assert task.oracle(held_out) == []
    assert all(t["ok"] for t in task.self_tests(held_out).values())
    save_eval_set(held_out, tmp_path / "eval.npz")
    scores = task.evaluate(_Lookup(task.cfg))
    assert scores["accuracy"] == 1.0 and scores["supervised"] == 300
    assert accuracy(_Lookup(task.cfg), held_out.tokens, held_out.targets)["accuracy"] == 0.0
    assert task.floors() == floors(task.cfg)


def test_derangements_have_no_fixed_point_and_are_uniform() -> None:
    rng = np.random.default_rng(0)
    perm = derangements(30000, 3, rng)
    assert (np.sort(perm, 1) == np.arange(3)).all() and not (perm == np.arange(3)).any()
    # the two derangements of 3 items, (1 2 0) and (2 0 1), about equally often
    share = (perm[:, 0] == 1).mean()
    assert abs(share - 0.5) < 0.02
    with pytest.raises(ValueError, match="at least 2"):
        derangements(4, 1, rng)


def test_rebinding_moves_every_value_and_keeps_the_original_answer() -> None:
    cfg = PaperMQARConfig(pairs=8)
    held_out = heldout(cfg, 500)
    control = rebind(held_out, cfg, stream_rng(0, 0, purpose=3))
    K = cfg.pairs
    assert (control.targets == held_out.targets).all()
    assert (control.tokens[:, 0 : 2 * K : 2] == held_out.tokens[:, 0 : 2 * K : 2]).all()
    assert (control.tokens[:, 2 * K :] == held_out.tokens[:, 2 * K :]).all()
    test = rebinding_self_test(held_out, cfg)
    assert test["ok"] and test["problems"] == [], test
    assert floors(cfg)["rebound_binder"] == pytest.approx(1 / cfg.n_values)


@pytest.mark.parametrize("kind", ["identity", "answer kept", "query moved"])
def test_rebinding_self_test_catches_a_broken_control(kind: str, monkeypatch) -> None:
    """A control that leaves the table alone, keeps the asked pair's value, or moves the
    query fails the self-test."""
    import arbench.tasks.paper_mqar as pm

    cfg = PaperMQARConfig()
    held_out = heldout(cfg, 2000)
    K = cfg.pairs
    real = pm.rebind

    def broken(batch, cfg, rng):
        tokens = batch.tokens.copy()
        if kind == "answer kept":
            tokens = real(batch, cfg, rng).tokens
            rows = np.arange(len(batch))
            asked = batch.tokens[:, 2 * K] - 5
            tokens[rows, 2 * asked + 1] = batch.tokens[rows, 2 * asked + 1]
        elif kind == "query moved":
            tokens = real(batch, cfg, rng).tokens
            tokens[:, 2 * K] = 5 + (tokens[:, 2 * K] - 4) % K
        return pm.Batch(tokens=tokens, targets=batch.targets.copy())

    monkeypatch.setattr(pm, "rebind", broken)
    assert not rebinding_self_test(held_out, cfg)["ok"]


def test_the_evaluator_scores_the_rebinding_control(tmp_path) -> None:
    """A lookup model (a perfect binder) scores 1.0 held out and the 1/V floor on the
    control, against the original answers."""
    task = build_task({"name": "paper_mqar", "pairs": 8}, tmp_path)
    save_eval_set(task.eval_set(2000), tmp_path / "eval.npz")
    scores = task.evaluate(_Lookup(task.cfg), rebinding=True)
    assert scores["accuracy"] == 1.0
    floor = floors(task.cfg)["rebound_binder"]
    assert abs(scores["rebinding_accuracy"] - floor) < 5 * (floor * (1 - floor) / 2000) ** 0.5
