"""The paper's own long-retrieval probe (`paper_haystack`): the wall, the curriculum and the
collision keys as its code lays them out; generator, oracle, floors and adapter.

The layout is that of ``make_long_retrieval_batch`` in ``dualgoose/toy_data.py``, driven by
``scripts/long_retrieval_probe.py``, of JIBSIL/dualgoose at commit 824f4b73; the code here is
this project's own, none of the paper's is reused. One sequence of length L over a
vocabulary of ``vocab`` ids (64 by default):

* ids 0-4 are never used; the P keys are the fixed ids 5 .. 4+P; values *and* distractors
  share the ids [5+P, vocab-1) (54 of them at P = 4); the last id, vocab-1, is the MASK;
* every position is first filled with a distractor, an id drawn uniformly from that shared
  range, so a key id appears only where the layout writes one;
* the table ``5 v_0 6 v_1 ... (4+P) v_{P-1}`` (keys in increasing order, each value drawn
  uniformly with replacement) sits at ``L - 2Q - G - 2P``: G distractors follow it, and the
  last 2Q positions hold the Q queries (``queries``), each ``key MASK``, for Q *distinct*
  keys of the table in random order; every one of them is supervised (Q = 1: the end-only
  signal; Q > 1: dense supervision). The queries stay at the end and the table moves;
* with ``collision``, the gap holds G // 2 decoy pairs that reuse the table's own keys (each
  drawn uniformly from the P) with fresh values, and an odd last gap position stays a
  distractor; the answer is still the table's, the first, binding.

The full gap is G_max = L - 2P - 2Q (54 at L = 64 end-only, 48 with 4 queries). A training
batch under the distance curriculum (`Signal.gap`, a fraction f of G_max) draws *one* gap for
the whole batch, uniformly from 0 .. round(f G_max), as the paper's probe does; without one
(and always in the held-out set) the gap is G_max and the table starts at position 0. The
prediction is the argmax at a MASK with the MASK itself excluded.

How it differs from our `haystack` and `collision` tasks (`arbench.tasks.haystack`): there
the keys are 4 of 64 key ids in random order, the gap holds filler ids of their own class
(so any copy of a table value scores 0.264), all four keys are queried and only the last is
supervised, and a curriculum draws a gap per sequence with the table fixed at 0.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from arbench.tasks.base import IGNORE, Batch, ConfigTask, Signal, register_task, stream_rng
from arbench.tasks.haystack import table_floors
from arbench.tasks.paper_mqar import FixedKeyIds


@dataclass(frozen=True)
class PaperHaystackConfig(FixedKeyIds):
    """One setting of the paper's long-retrieval probe: ``pairs`` P, the length ``seq_len``,
    the vocabulary ``vocab`` (MASK included, as its last id), the number of supervised
    ``queries`` Q and whether the gap holds ``collision`` decoys."""

    pairs: int = 4
    seq_len: int = 64
    vocab: int = 64
    queries: int = 1
    collision: bool = False

    @property
    def full_gap(self) -> int:
        return self.seq_len - 2 * self.pairs - 2 * self.queries

    def validate(self) -> None:
        """Semantic checks a schema cannot express; raise ValueError naming the key."""
        if self.pairs < 1:
            raise ValueError(f"task.pairs must be >= 1, got {self.pairs}")
        if not 1 <= self.queries <= self.pairs:
            raise ValueError(
                f"task.queries must be in [1, task.pairs={self.pairs}], got {self.queries}"
            )
        if self.full_gap < 0:
            raise ValueError(
                f"task.seq_len={self.seq_len} is too short for {self.pairs} pairs and "
                f"{self.queries} queries (at least {2 * self.pairs + 2 * self.queries})"
            )
        if self.n_values < 2:
            raise ValueError(
                f"task.vocab={self.vocab} leaves {max(self.n_values, 0)} value ids beside "
                f"keys 5..{4 + self.pairs} and the MASK; at least 2 needed "
                f"(task.vocab >= {self.pairs + 8})"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"name": "paper_haystack", **asdict(self)}


def _gap(cfg: PaperHaystackConfig, rng: np.random.Generator, signal: Signal | None) -> int:
    """The batch's one gap: G_max without a curriculum, else uniform in 0 .. round(f G_max)."""
    if signal is None or signal.gap is None:
        return cfg.full_gap
    f = float(signal.gap)
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"signal.gap must be a fraction in [0, 1], got {signal.gap}")
    return int(rng.integers(0, int(round(f * cfg.full_gap)) + 1))


def generate(
    cfg: PaperHaystackConfig, n: int, rng: np.random.Generator, signal: Signal | None = None
) -> Batch:
    """Draw ``n`` sequences from ``rng`` (vectorised over rows; int64), all at one gap."""
    P, Q, L = cfg.pairs, cfg.queries, cfg.seq_len
    key_lo, _ = cfg.key_range
    val_lo, val_hi = cfg.value_range
    gap = _gap(cfg, rng, signal)
    tokens = rng.integers(val_lo, val_hi, size=(n, L), dtype=np.int64)
    values = rng.integers(val_lo, val_hi, size=(n, P), dtype=np.int64)
    start = L - 2 * Q - gap - 2 * P
    tokens[:, start : start + 2 * P : 2] = key_lo + np.arange(P, dtype=np.int64)
    tokens[:, start + 1 : start + 2 * P : 2] = values
    if cfg.collision:
        decoys = gap // 2
        at = start + 2 * P + 2 * np.arange(decoys)
        tokens[:, at] = key_lo + rng.integers(0, P, size=(n, decoys))
        tokens[:, at + 1] = rng.integers(val_lo, val_hi, size=(n, decoys))
    asked = np.argsort(rng.random((n, P)), axis=1)[:, :Q]  # Q distinct pairs per row
    keys_at = L - 2 * Q + 2 * np.arange(Q)
    tokens[:, keys_at] = key_lo + asked
    tokens[:, keys_at + 1] = cfg.mask_id
    targets = np.full((n, L), IGNORE, dtype=np.int64)
    targets[:, keys_at + 1] = np.take_along_axis(values, asked, axis=1)
    return Batch(tokens=tokens, targets=targets)


def heldout(cfg: PaperHaystackConfig, n: int, seed: int = 0) -> Batch:
    """The held-out evaluation set: the full gap, from the evaluation seed range."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


# --------------------------------------------------------------------------- oracle


def _row_problems(seq: list[int], tgt: list[int], cfg: PaperHaystackConfig, r: int) -> list[str]:
    """One row's defects, found by reading it (see `oracle_check`)."""
    P, Q, L = cfg.pairs, cfg.queries, cfg.seq_len
    key_lo, key_hi = cfg.key_range
    val_lo, val_hi = cfg.value_range
    is_key = [key_lo <= t < key_hi for t in seq]
    out: list[str] = []
    # the table: the first key of the row, then P keys in increasing order at even offsets
    if not any(is_key[: L - 2 * Q]):
        return [f"row {r}: no key before the queries"]
    start = is_key.index(True)
    table = {}
    for i in range(P):
        p = start + 2 * i
        if p + 1 >= L - 2 * Q or seq[p] != key_lo + i:
            out.append(f"row {r}: table pair {i} at {p} is not key {key_lo + i}")
            continue
        if not val_lo <= seq[p + 1] < val_hi:
            out.append(f"row {r}: table value {seq[p + 1]} at {p + 1} outside [{val_lo}, {val_hi})")
        table[seq[p]] = seq[p + 1]
    gap_from, gap_to = start + 2 * P, L - 2 * Q
    # before the table and in the gap: distractors only, or decoy pairs of table keys
    for t in range(0, start):
        if not val_lo <= seq[t] < val_hi:
            out.append(f"row {r}: token {seq[t]} at {t} before the table is not a distractor")
    for t in range(gap_from, gap_to):
        offset = t - gap_from
        decoy_key = cfg.collision and offset % 2 == 0 and t + 1 < gap_to
        if decoy_key and not is_key[t]:
            out.append(f"row {r}: collision gap position {t} holds {seq[t]}, not a table key")
        elif not decoy_key and not val_lo <= seq[t] < val_hi:
            out.append(f"row {r}: gap token {seq[t]} at {t} is not a distractor")
    # the queries: Q distinct keys, each with a MASK after it and the table's value as target
    expected = [IGNORE] * L
    asked = []
    for q in range(Q):
        k, a = L - 2 * Q + 2 * q, L - 2 * Q + 2 * q + 1
        if not is_key[k]:
            out.append(f"row {r}: query {q} at {k} holds {seq[k]}, not a key")
            continue
        if seq[a] != cfg.mask_id:
            out.append(f"row {r}: MASK missing after query {q} (position {a} holds {seq[a]})")
        asked.append(seq[k])
        expected[a] = table.get(seq[k], IGNORE)
    if len(set(asked)) != len(asked):
        out.append(f"row {r}: a key is queried twice ({asked})")
    for t in range(L):
        if tgt[t] != expected[t]:
            out.append(f"row {r}: target {tgt[t]} at {t}, the table gives {expected[t]}")
    return out


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: PaperHaystackConfig) -> list[str]:
    """Re-derive every target from the token stream alone; return a list of problems.

    Written independently of `generate`: each row is read, not regenerated. The table is
    where the row's first key id stands, and must hold the P keys in increasing order, each
    followed by a value id; before it only distractors may stand; in the gap, distractors, or
    (collision) decoy pairs whose keys are table keys; the last 2Q positions must be Q
    distinct keys each followed by the MASK, whose target is the key's *table* value (the
    first binding), and no other position may be supervised. Every defect names its row.
    """
    if tokens.shape != targets.shape:
        return [f"shape mismatch {tokens.shape} vs {targets.shape}"]
    if tokens.ndim != 2 or tokens.shape[1] != cfg.seq_len:
        return [f"sequence length {tokens.shape[1:]} != {cfg.seq_len}"]
    problems: list[str] = []
    for r in range(tokens.shape[0]):
        problems += _row_problems(tokens[r].tolist(), targets[r].tolist(), cfg, r)
    return problems


# --------------------------------------------------------------------------- floors


def floors(cfg: PaperHaystackConfig) -> dict[str, float]:
    """Chance levels computed from the config, never typed in (V = ``n_values``).

    * value_marginal: a uniformly random value id, 1/V: the paper's wall floor (1/54).
      Distractors share the value ids, so copying a random context token scores no better.
    * uniform_pair_no_binding: the value of a uniformly chosen table pair, 1/P + (P-1)/(P V).
    * best_no_binding: the most frequent value of the table, E[max count]/P.
    """
    return table_floors(cfg.pairs, cfg.n_values)


# --------------------------------------------------------------------------- adapter


@register_task
class PaperHaystackTask(ConfigTask):
    """Training and evaluation adapter: batches are pure functions of (seed, step, signal);
    the distance curriculum (`Signal.gap`) is the one training signal it honours (dense
    supervision is its ``queries`` setting, as in the paper); evaluation reads the held-out
    set the workflow wrote (``eval.npz``) and never predicts the MASK."""

    name = "paper_haystack"
    data = "stream"
    layout = "bars"
    signals = frozenset({"gap"})
    config_class = PaperHaystackConfig
    functions = sys.modules[__name__]

    def summary(self) -> str:
        c = self.cfg
        gap = f"{c.full_gap // 2} decoy pairs" if c.collision else f"{c.full_gap} distractors"
        asked = f"{c.queries} quer{'y' if c.queries == 1 else 'ies'}"
        return (
            f"paper_haystack: {c.pairs} fixed keys, {c.n_values} values, L={c.seq_len} "
            f"({gap}), {asked} at the end, answer at MASK"
        )

    def never_predicted(self) -> tuple[int, ...]:
        return (self.cfg.mask_id,)

    def positions(self) -> int:
        return self.cfg.seq_len

    def evaluate(self, model: Any, examples: int | None = None) -> dict[str, Any]:
        """Held-out accuracy over every supervised answer of the stored set (all of it;
        ``examples`` is the count the set was written with), the MASK excluded."""
        from arbench.evaluate.recall import accuracy

        held_out = self.held_out()
        return accuracy(model, held_out.tokens, held_out.targets, exclude=self.never_predicted())
