"""Haystack (filler and pairs) and collision generators vs their independent oracle,
corruptions, and floors."""

from __future__ import annotations

import time

import numpy as np
import pytest

from arbench.tasks import IGNORE, build_task
from arbench.tasks.base import FLOOR_COLUMNS, Signal, save_eval_set
from arbench.tasks.haystack import (
    CollisionTask,
    HaystackConfig,
    HaystackTask,
    floors,
    generate,
    heldout,
    oracle_check,
    stream_rng,
)

KINDS = {"filler": "haystack", "pairs": "haystack", "reuse": "collision"}  # kind -> task
SIGNALS = [
    None,
    Signal(gap=0.0),
    Signal(gap=0.5),
    Signal(gap=1.0),
    Signal(dense=True),
    Signal(gap=0.0, dense=True),
    Signal(gap=0.5, dense=True),
    Signal(gap=1.0, dense=True),
]
SMALL = {"pairs": 4, "n_keys": 8, "n_values": 5, "seq_len": 40}  # collisions are frequent


def _block(kind: str, **settings) -> dict:
    """The config block of ``kind``: the collision task takes its kind without being told."""
    extra = {} if kind == "reuse" else {"distractors": kind}
    return {"name": KINDS[kind], **extra, **settings}


def _gaps(tokens: np.ndarray, cfg: HaystackConfig) -> np.ndarray:
    """Gap units per row: filler tokens, or value tokens beyond the table's P (queries hold
    none) for pairs."""
    if cfg.distractors == "filler":
        return (tokens >= cfg.filler_base).sum(axis=1)
    is_value = (tokens >= cfg.n_keys) & (tokens < cfg.n_keys + cfg.n_values)
    return is_value.sum(axis=1) - cfg.pairs


def _offsets(tokens: np.ndarray, cfg: HaystackConfig) -> np.ndarray:
    """Where each row's table starts: its first non-PAD token."""
    return np.argmax(tokens != cfg.pad_id, axis=1)


@pytest.mark.parametrize("signal", SIGNALS, ids=repr)
@pytest.mark.parametrize("layout", ["fixed", "shifting"])
@pytest.mark.parametrize("answer", ["key", "mask"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_oracle_accepts_generated(
    kind: str, answer: str, layout: str, signal: Signal | None
) -> None:
    for extra in ({}, SMALL):
        task = build_task(_block(kind, answer=answer, layout=layout, **extra))
        assert task.name == KINDS[kind] and task.cfg.distractors == kind
        b = task.train_batch(3, 7, 64, signal)
        assert b.tokens.shape == b.targets.shape == (64, task.cfg.seq_len)
        assert task.oracle(b) == []
        supervised = (b.targets != IGNORE).sum(axis=1)
        dense = signal is not None and signal.dense
        assert (supervised == (task.cfg.pairs if dense else 1)).all()
        assert ((b.tokens >= 0) & (b.tokens < task.vocab_size)).all()
        assert (task.cfg.mask_id in b.tokens) == (answer == "mask")
        if kind != "filler":  # the filler ids are not in a pairs vocabulary
            assert (b.tokens < task.cfg.filler_base).all()
    assert task.oracle(task.eval_set(64)) == []


@pytest.mark.parametrize("kind", ["pairs", "reuse"])
def test_distractor_pair_rule(kind: str) -> None:
    cfg = HaystackConfig(**SMALL, distractors=kind)
    b = generate(cfg, 200, stream_rng(0, 0))
    P, G = cfg.pairs, cfg.full_gap
    table = b.tokens[:, 0 : 2 * P : 2]
    gap_keys = b.tokens[:, 2 * P : 2 * P + 2 * G : 2]
    in_table = (gap_keys[:, :, None] == table[:, None, :]).any(axis=2)
    assert in_table.all() if kind == "reuse" else not in_table.any()
    assert (gap_keys < cfg.n_keys).all()
    # the target is the table's (first) binding even where the gap rebinds its key
    ans = np.flatnonzero(b.targets[0] != IGNORE)[0]
    asked = b.tokens[0, ans]
    assert b.targets[0, ans] == b.tokens[0, 1 + 2 * list(table[0]).index(asked)]


def test_filler_gap_is_uniform_filler() -> None:
    cfg = HaystackConfig(**SMALL, n_filler=7)
    b = generate(cfg, 500, stream_rng(0, 0))
    P, G = cfg.pairs, cfg.full_gap
    assert G == 40 - 2 * 4 - 4
    gap = b.tokens[:, 2 * P : 2 * P + G]
    assert ((gap >= cfg.filler_base) & (gap < cfg.filler_base + 7)).all()
    assert (b.tokens[:, : 2 * P] < cfg.filler_base).all()  # table and queries hold none
    assert (b.tokens[:, 2 * P + G :] < cfg.n_keys).all()  # key-mode queries: keys only
    counts = np.bincount(gap.ravel() - cfg.filler_base, minlength=7)
    assert counts.min() > 0.9 * gap.size / 7 and counts.max() < 1.1 * gap.size / 7
    # the kinds share one seed's tables and query orders; only the gap differs
    pairs = generate(HaystackConfig(**SMALL, distractors="pairs"), 500, stream_rng(0, 0))
    assert (b.tokens[:, : 2 * P] == pairs.tokens[:, : 2 * P]).all()
    assert (b.tokens[:, -P:] == pairs.tokens[:, -P:]).all()


def test_vocab_size_and_filler_ids() -> None:
    f = HaystackConfig()
    assert (f.pad_id, f.mask_id, f.filler_base) == (118, 119, 120)
    assert f.vocab_size == 64 + 54 + 2 + 64
    assert HaystackConfig(n_filler=5).vocab_size == 64 + 54 + 2 + 5
    for kind in ("pairs", "reuse"):
        assert HaystackConfig(distractors=kind).vocab_size == 64 + 54 + 2
        assert HaystackConfig(distractors=kind, n_filler=9).vocab_size == 64 + 54 + 2
    assert build_task({"name": "haystack"}).vocab_size == 184
    assert build_task({"name": "haystack", "distractors": "pairs"}).vocab_size == 120
    assert build_task({"name": "collision"}).vocab_size == 120


@pytest.mark.parametrize("kind", ["filler", "pairs"])
def test_gap_curriculum_spans_its_range(kind: str) -> None:
    cfg = HaystackConfig(distractors=kind)
    assert cfg.full_gap == (52 if kind == "filler" else 26)  # the kind's own unit
    task = HaystackTask(cfg)
    hi = round(0.5 * cfg.full_gap)
    g = _gaps(task.train_batch(0, 0, 2000, Signal(gap=0.5)).tokens, cfg)
    assert g.min() == 0 and g.max() == hi
    assert set(np.unique(g)) == set(range(hi + 1))
    assert (_gaps(task.train_batch(0, 0, 64, Signal(gap=0.0)).tokens, cfg) == 0).all()
    assert (_gaps(task.train_batch(0, 0, 64).tokens, cfg) == cfg.full_gap).all()
    assert (_gaps(task.train_batch(0, 0, 64, Signal(gap=1.0)).tokens, cfg) <= cfg.full_gap).all()
    held_out = task.eval_set(64)
    assert (_gaps(held_out.tokens, cfg) == cfg.full_gap).all()
    assert ((held_out.targets != IGNORE).sum(axis=1) == 1).all()  # end-only
    with pytest.raises(ValueError, match="signal.gap"):
        task.train_batch(0, 0, 4, Signal(gap=1.5))


@pytest.mark.parametrize("kind", ["filler", "pairs"])
@pytest.mark.parametrize("answer", ["key", "mask"])
def test_supervision_end_only_or_dense(answer: str, kind: str) -> None:
    cfg = HaystackConfig(answer=answer, distractors=kind)
    end = generate(cfg, 64, stream_rng(1, 1))
    dense = generate(cfg, 64, stream_rng(1, 1), signal=Signal(dense=True))
    assert ((end.targets != IGNORE).sum(axis=1) == 1).all()
    assert ((dense.targets != IGNORE).sum(axis=1) == cfg.pairs).all()
    assert (end.tokens == dense.tokens).all()
    # the end-only target is the last of the dense ones
    for e, d in zip(end.targets, dense.targets, strict=True):
        assert np.flatnonzero(e != IGNORE).tolist() == np.flatnonzero(d != IGNORE)[-1:].tolist()
    at = np.nonzero(dense.targets != IGNORE)
    read = dense.tokens[at]
    assert ((read < cfg.n_keys) if answer == "key" else (read == cfg.mask_id)).all()


@pytest.mark.parametrize("kind", ["filler", "pairs"])
@pytest.mark.parametrize("answer", ["key", "mask"])
def test_layouts_place_the_table(answer: str, kind: str) -> None:
    shifting = HaystackConfig(seq_len=128, answer=answer, layout="shifting", distractors=kind)
    fixed = HaystackConfig(seq_len=128, answer=answer, distractors=kind)
    for sig in (Signal(gap=0.0), Signal(gap=0.5)):
        s = generate(shifting, 200, stream_rng(0, 3), signal=sig)
        f = generate(fixed, 200, stream_rng(0, 3), signal=sig)
        assert (_offsets(f.tokens, fixed) == 0).all()
        off = _offsets(s.tokens, shifting)
        used = 2 * shifting.pairs + shifting.gap_unit * _gaps(s.tokens, shifting)
        used += shifting.slot_width * 4
        assert len(np.unique(off)) > 5 and (off >= 0).all() and (off <= 128 - used).all()
    # at the full gap only the rounding slack of G_max is left to shift by (none for filler)
    odd = HaystackConfig(seq_len=129, answer=answer, layout="shifting", distractors=kind)
    slack = {0} if kind == "filler" else {0, 1}
    assert set(_offsets(generate(odd, 200, stream_rng(0, 4)).tokens, odd)) == slack
    # and in the default sizes nothing is left to shift or trail
    tight_cfg = HaystackConfig(layout="shifting", answer=answer, distractors=kind)
    tight = generate(tight_cfg, 50, stream_rng(0, 0))
    assert (_offsets(tight.tokens, tight_cfg) == 0).all()
    assert (tight.tokens != tight_cfg.pad_id).all()


def test_streams_are_pure_functions_and_disjoint() -> None:
    for kind in KINDS:
        task = build_task(_block(kind, layout="shifting", seq_len=96))
        sig = Signal(gap=0.5, dense=True)
        a, b = task.train_batch(1, 5, 8, sig), task.train_batch(1, 5, 8, sig)
        assert (a.tokens == b.tokens).all() and (a.targets == b.targets).all()
        assert not (a.tokens == task.train_batch(1, 6, 8, sig).tokens).all()
        assert not (a.tokens == task.train_batch(2, 5, 8, sig).tokens).all()
        ev = task.eval_set(8).tokens
        assert (ev == task.eval_set(8).tokens).all()
        assert not any(
            (ev == task.train_batch(seed, step, 8).tokens).all()
            for seed in range(3)
            for step in range(3)
        )


def _corrupt(kind: str, tok: np.ndarray, tgt: np.ndarray, cfg: HaystackConfig) -> tuple[int, str]:
    """Apply defect ``kind`` to a fixed-layout, full-gap, end-only batch; return the row it
    hit and a phrase the oracle's report must contain."""
    P, G, w, L, u = cfg.pairs, cfg.full_gap, cfg.slot_width, cfg.seq_len, cfg.gap_unit
    q0 = 2 * P + u * G  # the first query slot's key
    filler = cfg.filler_base  # a filler id (outside the vocabulary unless filler)
    r = 0
    last = int(np.flatnonzero(tgt[r] != IGNORE)[-1])
    if kind == "wrong_answer":
        tgt[r, last] = cfg.n_keys + (tgt[r, last] - cfg.n_keys + 1) % cfg.n_values
        return r, "the table binds"
    if kind == "latest_binding":  # collision: answer with the gap's later binding of the key
        for r in range(len(tok)):
            last = int(np.flatnonzero(tgt[r] != IGNORE)[-1])
            asked = tok[r, last - (w - 1)]
            later = [
                tok[r, t + 1]
                for t in range(2 * P, q0, 2)
                if tok[r, t] == asked and tok[r, t + 1] != tgt[r, last]
            ]
            if later:
                tgt[r, last] = later[-1]
                return r, "the table binds"
        raise AssertionError("no row rebinds its last query's key")
    if kind == "table_key_in_haystack_gap":
        tok[r, 2 * P] = tok[r, 0]
        return r, "is a table key"
    if kind == "fresh_key_in_collision_gap":
        tok[r, 2 * P] = next(k for k in range(cfg.n_keys) if k not in tok[r, 0 : 2 * P : 2])
        return r, "is not a table key"
    if kind == "table_key_in_filler_gap":
        tok[r, 2 * P + 3] = tok[r, 2]
        return r, f"key token {tok[r, 2]} at {2 * P + 3} inside the filler gap"
    if kind == "fresh_key_in_filler_gap":
        fresh = next(k for k in range(cfg.n_keys) if k not in tok[r, 0 : 2 * P : 2])
        tok[r, q0 - 1] = fresh  # right before the queries
        return r, f"key token {fresh} at {q0 - 1} inside the filler gap"
    if kind == "value_in_filler_gap":
        tok[r, 2 * P] = cfg.n_keys + 1
        return r, f"value token {cfg.n_keys + 1} at {2 * P} inside the filler gap"
    if kind == "mask_in_filler_gap":
        tok[r, 2 * P + 5] = cfg.mask_id
        return r, f"MASK token {cfg.mask_id} at {2 * P + 5} inside the filler gap"
    if kind == "filler_in_table":
        tok[r, 2] = filler
        return r, "not (key, value)"
    if kind == "filler_in_query_region":
        tok[r, q0 + w] = filler  # the second query's key
        return r, f"filler token {filler} at {q0 + w} in the query region"
    if kind == "filler_for_mask":
        tok[r, q0 + 1] = filler  # the first query's MASK
        return r, f"filler token {filler} at {q0 + 1} in the query region"
    if kind == "filler_in_pair_gap":  # outside the vocabulary of a pairs task
        tok[r, 2 * P] = filler
        return r, f"unexpected token {filler}"
    if kind == "duplicate_table_key":
        tok[r, 2] = tok[r, 0]
        return r, "stored twice"
    if kind == "key_asked_twice":
        tok[r, q0 + w] = tok[r, q0]
        return r, "asked twice"
    if kind == "key_never_asked":  # drop the first query slot, the rest moves up
        tok[r, q0 : L - w] = tok[r, q0 + w :].copy()
        tok[r, L - w :] = cfg.pad_id
        tgt[r, q0 : L - w] = tgt[r, q0 + w :].copy()
        tgt[r, L - w :] = IGNORE
        return r, "never asked"
    if kind == "unknown_key_asked":
        tok[r, q0] = next(k for k in range(cfg.n_keys) if k not in tok[r, 0 : 2 * P : 2])
        return r, "not a table key"
    if kind == "target_off_answer":
        tgt[r, 2 * P + 1] = tgt[r, last]  # at a distractor's value / a filler token
        return r, "not at an answer position"
    if kind == "target_moved":
        tgt[r, last - 1], tgt[r, last] = tgt[r, last], IGNORE
        return r, "last query"
    if kind == "missing_last_target":
        tgt[r, last] = IGNORE
        return r, "last query"
    if kind == "value_in_query_region":
        at = q0 + 2 if cfg.answer == "key" else q0 + w * (P - 1) + 1  # a key / the last MASK
        tok[r, at] = cfg.n_keys
        return r, "value token"
    if kind == "pad_in_gap":
        tok[r, 2 * P] = cfg.pad_id
        if cfg.distractors == "filler":
            return r, f"PAD token {cfg.pad_id} at {2 * P} inside the filler gap"
        return r, "non-PAD token"
    if kind == "pad_in_query_region":
        tok[r, q0 + w] = cfg.pad_id
        return r, "non-PAD token"
    if kind == "pad_in_table":
        tok[r, 1] = cfg.pad_id
        return r, "not (key, value)"
    if kind == "lead_in_fixed_layout":
        tok[r, 1:] = tok[r, :-1].copy()
        tok[r, 0] = cfg.pad_id
        tgt[r, 1:] = tgt[r, :-1].copy()
        tgt[r, 0] = IGNORE
        return r, "lead PAD"
    raise ValueError(kind)


COMMON = [
    "wrong_answer",
    "duplicate_table_key",
    "key_asked_twice",
    "key_never_asked",
    "unknown_key_asked",
    "target_off_answer",
    "target_moved",
    "missing_last_target",
    "value_in_query_region",
    "pad_in_gap",
    "pad_in_query_region",
    "pad_in_table",
    "lead_in_fixed_layout",
]
FILLER = [
    "table_key_in_filler_gap",
    "fresh_key_in_filler_gap",
    "value_in_filler_gap",
    "mask_in_filler_gap",
    "filler_in_table",
    "filler_in_query_region",
]
CASES = [(k, c) for k in KINDS for c in COMMON]
CASES += [("filler", c) for c in FILLER]
CASES += [("pairs", "table_key_in_haystack_gap"), ("reuse", "fresh_key_in_collision_gap")]
CASES += [("pairs", "filler_in_pair_gap"), ("reuse", "filler_in_pair_gap")]
CASES += [("reuse", "latest_binding")]


@pytest.mark.parametrize("answer", ["key", "mask"])
@pytest.mark.parametrize(("kind", "defect"), CASES)
def test_oracle_rejects_corruption(kind: str, defect: str, answer: str) -> None:
    # pairs: one trailing PAD in both answer modes leaves room to shift a row in the fixed
    # layout; a full filler gap fills the sequence, so the shift drops its last token
    cfg = HaystackConfig(seq_len=65 if answer == "key" else 69, answer=answer, distractors=kind)
    b = generate(cfg, 16, stream_rng(0, 1))
    assert oracle_check(b.tokens, b.targets, cfg) == []
    r, needle = _corrupt(defect, b.tokens, b.targets, cfg)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert problems and all(p.startswith(f"row {r}:") for p in problems)
    assert any(needle in p for p in problems), problems


def test_filler_oracle_names_a_mask_mode_filler_for_mask() -> None:
    cfg = HaystackConfig(answer="mask")
    b = generate(cfg, 4, stream_rng(0, 2))
    r, needle = _corrupt("filler_for_mask", b.tokens, b.targets, cfg)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert any(needle in p for p in problems) and any("not followed by MASK" in p for p in problems)


def test_oracle_rejects_bad_shapes() -> None:
    cfg = HaystackConfig()
    b = generate(cfg, 4, stream_rng(0, 0))
    assert oracle_check(b.tokens, b.targets[:, :-1], cfg)[0].startswith("batch:")
    short = oracle_check(b.tokens[:, :-1], b.targets[:, :-1], cfg)
    assert len(short) == 4 and all("task.seq_len" in p for p in short)


def test_floors() -> None:
    h = HaystackTask(HaystackConfig()).floors()
    p = HaystackTask(HaystackConfig(distractors="pairs")).floors()
    c = CollisionTask(HaystackConfig(distractors="reuse")).floors()
    assert h == p == c and set(h) <= set(FLOOR_COLUMNS)
    assert h["value_marginal"] == 1 / 54
    assert c["uniform_pair_no_binding"] == pytest.approx(1 / 4 + 3 / (4 * 54), rel=1e-12)
    assert c["uniform_pair_no_binding"] == pytest.approx(0.264, abs=5e-4)
    assert floors(HaystackConfig(n_filler=3)) == h  # the filler vocabulary sets no floor
    # best_no_binding against a Monte Carlo of "answer the table's most frequent value"
    cfg = HaystackConfig(pairs=4, n_keys=8, n_values=5, seq_len=40)
    vals = np.random.default_rng(0).integers(0, 5, size=(20000, 4))
    mode = np.array([np.bincount(r).max() for r in vals]) / 4
    assert floors(cfg)["best_no_binding"] == pytest.approx(mode.mean(), abs=0.005)
    assert floors(cfg)["best_no_binding"] > floors(cfg)["uniform_pair_no_binding"]


@pytest.mark.parametrize(
    ("task", "needle"),
    [
        ({"name": "haystack", "seq_len": 12}, "task.seq_len=12 leaves no room for a filler"),
        (
            {"name": "haystack", "seq_len": 13, "distractors": "pairs"},
            "task.seq_len=13 leaves no room for a distractor pair",
        ),
        ({"name": "collision", "seq_len": 15, "answer": "mask"}, "task.seq_len=15"),
        ({"name": "haystack", "pairs": 70}, "task.n_keys"),
        ({"name": "collision", "pairs": 9, "n_keys": 8, "seq_len": 100}, "task.n_keys"),
        (
            {"name": "haystack", "pairs": 8, "n_keys": 8, "distractors": "pairs"},
            "task.n_keys=8 leaves no fresh",
        ),
        ({"name": "haystack", "pairs": 0}, "task.pairs"),
        ({"name": "haystack", "n_filler": 0}, "task.n_filler must be >= 1"),
        ({"name": "haystack", "answer": "value"}, "task.answer"),
        ({"name": "collision", "layout": "random"}, "task.layout"),
        ({"name": "collision", "n_values": 1}, "task.n_values"),
        ({"name": "collision", "gap": 3}, "unknown key 'gap'"),
        ({"name": "haystack", "distractors": "fresh"}, "task.distractors must be one of"),
        ({"name": "haystack", "distractors": "reuse"}, "task.distractors.*collision task's"),
        ({"name": "collision", "distractors": "filler"}, "task.distractors.*haystack task's"),
        ({"name": "collision", "distractors": "pairs"}, "task.distractors.*'reuse'"),
        # the kind is checked before the settings that only another kind needs
        ({"name": "collision", "distractors": "pairs", "n_keys": 4}, "task.distractors"),
    ],
)
def test_bad_task_configs_name_the_key(task: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        build_task(task)


def test_kinds_take_their_own_settings() -> None:
    # filler needs no fresh key, pairs and collision ignore the filler vocabulary
    assert build_task({"name": "haystack", "pairs": 8, "n_keys": 8}).cfg.full_gap == 40
    assert build_task({"name": "haystack", "seq_len": 13}).cfg.full_gap == 1
    assert build_task({"name": "collision", "n_filler": 0}).vocab_size == 120
    assert build_task({"name": "collision", "distractors": "reuse"}).cfg.distractors == "reuse"
    with pytest.raises(ValueError, match="task.distractors"):
        CollisionTask(HaystackConfig())  # the dataclass default is the haystack's filler
    with pytest.raises(ValueError, match="task.distractors"):
        HaystackTask(HaystackConfig(distractors="reuse"))
    for kind in KINDS:  # a config written by to_dict builds the same task again
        t = build_task(_block(kind, answer="mask"))
        assert build_task(t.cfg.to_dict(t.name)).cfg == t.cfg


def test_adapters_declare_themselves() -> None:
    h = build_task({"name": "haystack"})
    p = build_task({"name": "haystack", "distractors": "pairs"})
    c = build_task({"name": "collision", "pairs": 4, "n_keys": 4, "seq_len": 40})  # no fresh key
    assert isinstance(h, HaystackTask) and isinstance(c, CollisionTask)
    assert (h.cfg.distractors, p.cfg.distractors, c.cfg.distractors) == ("filler", "pairs", "reuse")
    for t in (h, p, c):
        assert (t.data, t.layout, t.signals) == ("stream", "bars", frozenset({"gap", "dense"}))
        assert t.oracle(t.train_batch(0, 0, 16, Signal(gap=0.5, dense=True))) == []
    assert h.vocab_size == 64 + 54 + 2 + 64 and p.vocab_size == 64 + 54 + 2
    assert h.summary() == (
        "haystack: 4 pairs, 54 values, L=64 (filler gap of 52 tokens), fixed layout, "
        "answer at query key"
    )
    assert p.summary() == (
        "haystack: 4 pairs, 54 values, L=64 (gap 26 pairs), fixed layout, answer at query key"
    )
    m = build_task({"name": "collision", "answer": "mask", "layout": "shifting"})
    assert m.summary() == (
        "collision: 4 pairs, 54 values, L=64 (gap 24 pairs), shifting layout, answer at MASK"
    )
    assert h.eval_option_names() == set()
    # the held-out sets of the kinds share their tables and differ in the distractor rule
    pb, cb = p.eval_set(32), heldout(HaystackConfig(distractors="reuse"), 32)
    hb = h.eval_set(32)
    assert (pb.tokens[:, :8] == cb.tokens[:, :8]).all() and (
        hb.tokens[:, :8] == cb.tokens[:, :8]
    ).all()
    assert oracle_check(pb.tokens, pb.targets, HaystackConfig(distractors="reuse")) != []
    assert oracle_check(cb.tokens, cb.targets, p.cfg) != []
    assert oracle_check(pb.tokens, pb.targets, h.cfg) != []  # pairs are not filler
    assert oracle_check(hb.tokens, hb.targets, p.cfg) != []  # nor filler pairs


@pytest.mark.parametrize("kind", list(KINDS))
def test_generation_is_vectorised(kind: str) -> None:
    """Batches are drawn without a per-row loop: 64 rows at L=512 take well under 50 ms."""
    cost = {}
    for L in (64, 512):
        cfg = HaystackConfig(seq_len=L, distractors=kind, layout="shifting")
        generate(cfg, 64, stream_rng(0, 0), Signal(gap=0.5, dense=True))
        t = time.perf_counter()
        for step in range(20):
            generate(cfg, 64, stream_rng(0, step), Signal(gap=0.5, dense=True))
        cost[L] = (time.perf_counter() - t) / 20
    assert cost[512] < 0.05, cost  # seconds per batch, generously


def test_evaluate_round_trip(tmp_path) -> None:
    from arbench.models import ModelConfig, build_model

    task = build_task({"name": "collision", "answer": "mask"}, tmp_path)
    save_eval_set(task.eval_set(12), tmp_path / "eval.npz")
    model = build_model(ModelConfig(vocab_size=task.vocab_size, d_model=8, layers=1), seed=0)
    scores = task.evaluate(model)
    assert 0.0 <= scores["accuracy"] <= 1.0
    assert scores["supervised"] == 12 and scores["sequences"] == 12
    with pytest.raises(ValueError, match="data folder"):
        build_task({"name": "haystack"}).evaluate(model)


@pytest.mark.parametrize("name", ["haystack", "collision"])
def test_a_reserved_shift_moves_the_held_out_content_only_in_the_shifting_layout(name) -> None:
    base = {"name": name, "pairs": 4, "n_keys": 16, "n_values": 10, "seq_len": 64, "shift": 16}
    shifting = build_task({**base, "layout": "shifting"})
    fixed = build_task({**base, "layout": "fixed"})
    assert shifting.cfg.full_gap == fixed.cfg.full_gap  # the same gaps in both layouts
    for task, moves in ((shifting, True), (fixed, False)):
        held_out = task.eval_set(200)
        assert task.oracle(held_out) == []
        lead = (held_out.tokens == task.cfg.pad_id).argmin(axis=1)  # first non-PAD position
        assert (lead.max() > 0) == moves and lead.max() <= 16
        assert (held_out.tokens[:, -1] == task.cfg.pad_id).mean() > (0.0 if moves else 0.99)


def test_a_negative_shift_names_the_key() -> None:
    with pytest.raises(ValueError, match="task.shift"):
        build_task({"name": "haystack", "shift": -1})
