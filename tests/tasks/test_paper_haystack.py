"""The paper's long-retrieval probe: generator vs its independent oracle, the corruptions the
oracle must catch, the layout (fixed keys, shared value and distractor ids, queries at the
end, one gap per batch), collision decoys, floors against guessers, and bad settings."""

from __future__ import annotations

import numpy as np
import pytest

from arbench.tasks import IGNORE, build_task
from arbench.tasks.base import Batch, Signal, stream_rng
from arbench.tasks.paper_haystack import (
    PaperHaystackConfig,
    floors,
    generate,
    heldout,
    oracle_check,
)

CFGS = [
    PaperHaystackConfig(),
    PaperHaystackConfig(queries=4),
    PaperHaystackConfig(collision=True, queries=4),
    PaperHaystackConfig(collision=True, seq_len=65),  # an odd gap: one plain distractor left
    PaperHaystackConfig(pairs=2, seq_len=16, vocab=12),
]


@pytest.mark.parametrize("cfg", CFGS)
@pytest.mark.parametrize("gap", [None, 0.0, 0.5, 1.0])
def test_oracle_accepts_generated(cfg: PaperHaystackConfig, gap: float | None) -> None:
    for step in range(4):
        b = generate(cfg, 64, stream_rng(3, step), Signal(gap=gap))
        assert b.tokens.shape == b.targets.shape == (64, cfg.seq_len)
        assert oracle_check(b.tokens, b.targets, cfg) == []


def test_layout_at_the_full_gap() -> None:
    cfg = PaperHaystackConfig()
    assert (cfg.full_gap, cfg.n_values, cfg.mask_id) == (54, 54, 63)
    assert PaperHaystackConfig(queries=4).full_gap == 48
    b = heldout(cfg, 512)
    assert (b.tokens[:, 0:8:2] == np.arange(5, 9)).all()  # the table at 0, keys in order
    rest = np.delete(b.tokens, [0, 2, 4, 6, 62, 63], axis=1)
    assert rest.min() == 9 and rest.max() == 62  # values and distractors share 9..62
    assert ((b.tokens[:, 62] >= 5) & (b.tokens[:, 62] < 9)).all()  # the one query key
    assert (b.tokens[:, 63] == 63).all() and (b.tokens == 63).sum() == 512  # MASK only there
    assert (np.flatnonzero((b.targets != IGNORE).any(0)) == [63]).all()
    asked = b.tokens[:, 62] - 5
    assert (b.targets[:, 63] == b.tokens[np.arange(512), 2 * asked + 1]).all()
    counts = np.bincount(asked, minlength=4)
    assert (np.abs(counts - 128) < 50).all()  # every key asked, about equally


def test_a_curriculum_batch_has_one_gap_and_the_table_moves() -> None:
    cfg = PaperHaystackConfig(queries=4)
    starts = set()
    for step in range(40):
        b = generate(cfg, 32, stream_rng(0, step), Signal(gap=0.5))
        first = (b.tokens == 5).argmax(1)  # where each row's table starts
        assert len(set(first.tolist())) == 1  # one gap for the whole batch
        gap = cfg.seq_len - 8 - 8 - int(first[0])
        assert 0 <= gap <= round(0.5 * cfg.full_gap)
        starts.add(int(first[0]))
        # the queries never move: 4 distinct keys, each before a MASK
        assert (b.tokens[:, 57::2] == 63).all() and (b.tokens[:, 56::2] < 9).all()
        assert all(len(set(r)) == 4 for r in b.tokens[:, 56::2].tolist())
    assert len(starts) > 10  # and the gap varies from batch to batch
    full = generate(cfg, 8, stream_rng(0, 0), Signal(gap=1.0))
    assert oracle_check(full.tokens, full.targets, cfg) == []


def test_collision_decoys_rebind_the_table_keys() -> None:
    cfg = PaperHaystackConfig(collision=True, queries=4)
    b = heldout(cfg, 256)
    gap = b.tokens[:, 8:56]
    assert ((gap[:, ::2] >= 5) & (gap[:, ::2] < 9)).all()  # 24 decoy keys, all table keys
    assert (gap[:, 1::2] >= 9).all()
    # the target is the table's value, and a decoy rebinding the asked key is common
    rows = np.arange(256)
    asked = b.tokens[:, 56] - 5
    assert (b.targets[:, 57] == b.tokens[rows, 2 * asked + 1]).all()
    latest = [
        [v for k, v in zip(g[::2], g[1::2], strict=True) if k == a + 5][-1]
        for g, a in zip(gap.tolist(), asked.tolist(), strict=True)
    ]
    assert np.mean(np.array(latest) == b.targets[:, 57]) < 0.1  # the last binding is wrong


def _corrupt(b: Batch, fn) -> list[str]:
    tokens, targets = b.tokens.copy(), b.targets.copy()
    fn(tokens, targets)
    return oracle_check(tokens, targets, CFG)


CFG = PaperHaystackConfig(queries=2, collision=True)


@pytest.mark.parametrize(
    ("name", "fn", "expect"),
    [
        (
            "wrong target",
            lambda t, y: y.__setitem__((0, 63), (y[0, 63] - 9 + 1) % 54 + 9),
            "target",
        ),
        ("target on a decoy", lambda t, y: y.__setitem__((1, 63), t[1, 11]), "target"),
        ("keys out of order", lambda t, y: t.__setitem__((2, 2), 7), "not key 6"),
        ("a key in the gap", lambda t, y: t.__setitem__((3, 13), 6), "not a distractor"),
        ("decoy not a key", lambda t, y: t.__setitem__((4, 12), 30), "not a table key"),
        ("MASK missing", lambda t, y: t.__setitem__((5, 63), 20), "MASK missing"),
        ("the MASK predicted", lambda t, y: t.__setitem__((6, 31), 63), "not a distractor"),
        ("query twice", lambda t, y: t.__setitem__((7, 62), t[7, 60]), "queried twice"),
        ("extra supervision", lambda t, y: y.__setitem__((8, 20), 9), "target"),
        ("no supervision", lambda t, y: y.__setitem__((9, 61), IGNORE), "target"),
    ],
)
def test_oracle_catches_corruption(name: str, fn, expect: str) -> None:
    b = heldout(CFG, 16)
    assert oracle_check(b.tokens, b.targets, CFG) == []
    problems = _corrupt(b, fn)
    assert problems and any(expect in p for p in problems), (name, problems)


def test_floors_match_guessers() -> None:
    cfg = PaperHaystackConfig()
    f = floors(cfg)
    assert f["value_marginal"] == pytest.approx(1 / 54)
    b = heldout(cfg, 20_000)
    rng = np.random.default_rng(0)
    rows = np.arange(len(b))
    truth = b.targets[:, 63]
    pair = rng.integers(0, 4, size=len(b))
    table_copy = np.mean(b.tokens[rows, 2 * pair + 1] == truth)
    assert table_copy == pytest.approx(f["uniform_pair_no_binding"], abs=0.015)
    context = np.mean(b.tokens[rows, rng.integers(8, 62, size=len(b))] == truth)
    assert context == pytest.approx(f["value_marginal"], abs=0.005)  # a copy of the gap: 1/54


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"queries": 0}, "task.queries"),
        ({"queries": 5}, "task.queries"),
        ({"seq_len": 9}, "task.seq_len"),
        ({"vocab": 10}, "task.vocab"),
        ({"pairs": 0}, "task.pairs"),
    ],
)
def test_bad_settings_fail_naming_the_key(settings: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        build_task({"name": "paper_haystack", **settings})


def test_the_adapter_never_predicts_the_mask_and_honours_only_the_gap() -> None:
    task = build_task({"name": "paper_haystack", "queries": 4})
    assert task.never_predicted() == (63,) and task.positions() == 64
    assert task.signals == frozenset({"gap"})
    assert "4 queries" in task.summary() and "48 distractors" in task.summary()
    a = task.train_batch(1, 5, 16, Signal(gap=0.3))
    again = task.train_batch(1, 5, 16, Signal(gap=0.3))
    assert (a.tokens == again.tokens).all()  # a pure function of (seed, step, signal)
