"""The paper's own MQAR probe (`paper_mqar`): generator, oracle, floors and adapter.

This task reproduces the layout the paper's code trains on: ``make_mqar_batch`` with
``query_layout="after_table"`` in ``dualgoose/toy_data.py``, driven by
``scripts/mqar_probe.py``, of JIBSIL/dualgoose at commit 824f4b73; the code here is this
project's own, none of the paper's is reused. One sequence over a vocabulary of ``vocab``
ids (64 by default) is laid out as:

* ids 0-4 are never used; the K keys are the fixed ids 5 .. 4+K, and the values are ids in
  [5+K, vocab-1), each pair's value drawn uniformly and independently (with replacement);
  the last id, vocab-1, is the MASK. There is no padding or filler id;
* the length is L = 2K + 2 + ``slack`` (72 at K = 32 with the default slack of 6). Every
  position is first filled with an id drawn uniformly from [5, vocab-1), keys and values
  alike;
* the table ``5 v_0 6 v_1 ... (4+K) v_{K-1}`` then overwrites positions 0 .. 2K-1, keys in
  increasing order; one pair index j, uniform over the K pairs, is asked: key 5+j sits at
  position 2K and the answer slot 2K+1 holds the MASK; positions 2K+2 .. L-1 (the slack)
  keep their random ids;
* only the answer slot is supervised, with target v_j; the prediction is the argmax at the
  MASK with the MASK itself excluded (`PaperMQARTask.never_predicted`).

How it differs from our `mqar` task (`arbench.tasks.mqar`): there the K keys are drawn
without replacement from their own vocabulary and stored in random order, the rest of the
sequence is filler, and every stored key is asked once in a query region (K supervised
positions per sequence, read at the key or at a MASK after it). Here the keys are the same
ids in the same order in every sequence, the sequence is prefilled with random ids (which
may repeat a key or a value after the query), and a single key is asked, answered at a MASK
right after it (one supervised position per sequence).
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from arbench.tasks.base import IGNORE, Batch, ConfigTask, register_task, stream_rng
from arbench.tasks.mqar import _expected_max_count, uniform_pair_hit

FIRST_ID = 5  # ids below it are never written


class FixedKeyIds:
    """The paper's probes' vocabulary, from a setting's ``pairs`` and ``vocab``: ids 0-4
    unused, the keys the fixed ids 5 .. 4+pairs, values every id above them but the last,
    which is the MASK (shared by `paper_mqar` and `paper_haystack`)."""

    pairs: int
    vocab: int

    @property
    def vocab_size(self) -> int:
        return self.vocab

    @property
    def mask_id(self) -> int:
        return self.vocab - 1

    @property
    def key_range(self) -> tuple[int, int]:
        """Keys are ``lo <= t < hi``: the fixed ids 5 .. 4+pairs."""
        return FIRST_ID, FIRST_ID + self.pairs

    @property
    def value_range(self) -> tuple[int, int]:
        """Values are ``lo <= t < hi``: every id above the keys but the MASK."""
        return FIRST_ID + self.pairs, self.vocab - 1

    @property
    def n_values(self) -> int:
        lo, hi = self.value_range
        return hi - lo


@dataclass(frozen=True)
class PaperMQARConfig(FixedKeyIds):
    """One setting of the paper's probe: ``pairs`` K, the vocabulary size ``vocab`` (MASK
    included, as its last id) and the ``slack`` of random ids after the answer slot."""

    pairs: int = 32
    vocab: int = 64
    slack: int = 6

    @property
    def length(self) -> int:
        return 2 * self.pairs + 2 + self.slack

    @property
    def query_position(self) -> int:
        return 2 * self.pairs

    @property
    def answer_position(self) -> int:
        return 2 * self.pairs + 1

    def validate(self) -> None:
        """Semantic checks a schema cannot express; raise ValueError naming the key."""
        if self.pairs < 1:
            raise ValueError(f"task.pairs must be >= 1, got {self.pairs}")
        if self.slack < 0:
            raise ValueError(f"task.slack must be >= 0, got {self.slack}")
        if self.n_values < 2:
            raise ValueError(
                f"task.pairs={self.pairs} is too large for the vocabulary task.vocab="
                f"{self.vocab}: keys 5..{4 + self.pairs} and the MASK leave "
                f"{max(self.n_values, 0)} value ids, at least 2 needed "
                f"(task.vocab >= {self.pairs + 8})"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"name": "paper_mqar", **asdict(self)}


def generate(cfg: PaperMQARConfig, n: int, rng: np.random.Generator) -> Batch:
    """Draw ``n`` independent sequences from ``rng`` (vectorised over sequences; int64)."""
    K, L = cfg.pairs, cfg.length
    key_lo, _ = cfg.key_range
    val_lo, val_hi = cfg.value_range
    tokens = rng.integers(FIRST_ID, cfg.mask_id, size=(n, L), dtype=np.int64)
    values = rng.integers(val_lo, val_hi, size=(n, K), dtype=np.int64)
    asked = rng.integers(0, K, size=n, dtype=np.int64)
    tokens[:, 0 : 2 * K : 2] = key_lo + np.arange(K, dtype=np.int64)
    tokens[:, 1 : 2 * K : 2] = values
    tokens[:, cfg.query_position] = key_lo + asked
    tokens[:, cfg.answer_position] = cfg.mask_id
    targets = np.full((n, L), IGNORE, dtype=np.int64)
    targets[:, cfg.answer_position] = values[np.arange(n), asked]
    return Batch(tokens=tokens, targets=targets)


def heldout(cfg: PaperMQARConfig, n: int, seed: int = 0) -> Batch:
    """The held-out evaluation set: drawn from the evaluation seed range."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


# --------------------------------------------------------------------------- oracle


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: PaperMQARConfig) -> list[str]:
    """Re-derive every target from the token stream alone; return a list of problems.

    Written independently of `generate`: for each row it checks the table (the i-th even
    position holds key 5+i, the odd one after it a value id), reads the query key at
    position 2K, looks it up by scanning the table for that key, and expects that entry's
    value at the MASK in position 2K+1 and IGNORE everywhere else. The slack must hold ids
    of the prefill range [5, vocab-1). Every defect is reported with its row.
    """
    if tokens.shape != targets.shape:
        return [f"shape mismatch {tokens.shape} vs {targets.shape}"]
    if tokens.ndim != 2 or tokens.shape[1] != cfg.length:
        return [f"sequence length {tokens.shape[1:]} != {cfg.length}"]
    K = cfg.pairs
    key_lo, key_hi = cfg.key_range
    val_lo, val_hi = cfg.value_range
    q_at, a_at = 2 * K, 2 * K + 1
    problems: list[str] = []
    for r in range(tokens.shape[0]):
        seq, tgt = tokens[r].tolist(), targets[r].tolist()
        for i in range(K):
            if seq[2 * i] != key_lo + i:
                problems.append(
                    f"row {r}: keys out of order: position {2 * i} holds {seq[2 * i]}, "
                    f"expected key {key_lo + i}"
                )
            v = seq[2 * i + 1]
            if not val_lo <= v < val_hi:
                problems.append(
                    f"row {r}: value {v} at position {2 * i + 1} outside [{val_lo}, {val_hi})"
                )
        if seq[a_at] != cfg.mask_id:
            problems.append(f"row {r}: MASK missing at the answer slot {a_at} (holds {seq[a_at]})")
        for t in range(a_at + 1, len(seq)):
            if not FIRST_ID <= seq[t] < cfg.mask_id:
                problems.append(f"row {r}: slack token {seq[t]} at {t} outside the prefill range")
        expected = [IGNORE] * len(seq)
        query = seq[q_at]
        hits = [p for p in range(0, 2 * K, 2) if seq[p] == query]
        if not key_lo <= query < key_hi:
            problems.append(f"row {r}: query token {query} at {q_at} is not a key")
        elif len(hits) != 1:
            problems.append(f"row {r}: query key {query} stored {len(hits)} times in the table")
        else:
            expected[a_at] = seq[hits[0] + 1]
        if tgt[a_at] != expected[a_at]:
            problems.append(
                f"row {r}: target {tgt[a_at]} at the answer slot, the table gives {expected[a_at]}"
            )
        elsewhere = [t for t in range(len(seq)) if t != a_at and tgt[t] != IGNORE]
        if elsewhere:
            problems.append(
                f"row {r}: supervised positions besides the answer slot {elsewhere[:5]}"
            )
    return problems


# --------------------------------------------------------------------------- rebinding


def derangements(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` permutations of ``range(k)`` with no fixed point, uniform over derangements
    (rejection: a row with a fixed point is redrawn, about e draws per row); (n, k)."""
    if k < 2:
        raise ValueError(f"a derangement needs at least 2 items, got {k}")
    perm = np.argsort(rng.random((n, k)), axis=1)
    redo = (perm == np.arange(k)).any(axis=1)
    while redo.any():
        perm[redo] = np.argsort(rng.random((int(redo.sum()), k)), axis=1)
        redo = (perm == np.arange(k)).any(axis=1)
    return perm


def rebind(batch: Batch, cfg: PaperMQARConfig, rng: np.random.Generator) -> Batch:
    """The paper's rebinding control (``--rebind-eval``; the hardened script's derangement):
    each table's values moved to other keys by a random derangement (from ``rng``), the query
    and every target left as they were, i.e. scored against the **original** answer.

    A model that reads the binding in context now answers the value the query key holds in
    the rebound table, which equals the original only when two pairs drew the same value
    (1/V, the ``rebound_binder`` floor); a model that scores on the control as on the
    held-out set is not reading the table's binding.
    """
    K = cfg.pairs
    tokens = batch.tokens.copy()
    values = tokens[:, 1 : 2 * K : 2]
    tokens[:, 1 : 2 * K : 2] = np.take_along_axis(values, derangements(len(batch), K, rng), 1)
    return Batch(tokens=tokens, targets=batch.targets.copy())


def rebinding_set(held_out: Batch, cfg: PaperMQARConfig) -> Batch:
    """The held-out set's rebinding control, drawn from its own seed range (purpose 3)."""
    return rebind(held_out, cfg, stream_rng(0, 0, purpose=3))


def rebinding_self_test(
    held_out: Batch, cfg: PaperMQARConfig, tolerance_se: float = 5.0
) -> dict[str, Any]:
    """Check the control does what it claims: keys, query, MASK, slack and each row's values
    (as a multiset) are unchanged, no pair keeps its value slot, and a binder (the value the
    query key holds in the rebound table) scores the ``rebound_binder`` floor against the
    original targets (within ``tolerance_se`` standard errors)."""
    K = cfg.pairs
    control = rebinding_set(held_out, cfg)
    values = slice(1, 2 * K, 2)
    rest = np.ones(cfg.length, dtype=bool)
    rest[values] = False
    problems = []
    if not np.array_equal(control.tokens[:, rest], held_out.tokens[:, rest]):
        problems.append("the control changed a token outside the table's values")
    if not np.array_equal(
        np.sort(control.tokens[:, values], 1), np.sort(held_out.tokens[:, values], 1)
    ):
        problems.append("the control changed a row's multiset of values")
    if not np.array_equal(control.targets, held_out.targets):
        problems.append("the control changed a target")
    rows = np.arange(len(held_out))
    asked = held_out.tokens[:, cfg.query_position] - FIRST_ID
    binder = control.tokens[rows, 2 * asked + 1]
    score = float((binder == held_out.targets[:, cfg.answer_position]).mean())
    floor = floors(cfg)["rebound_binder"]
    se = math.sqrt(floor * (1 - floor) / max(len(rows), 1))
    return {
        "ok": bool(not problems and abs(score - floor) <= tolerance_se * se),
        "binder_accuracy": score,
        "rebound_binder_floor": floor,
        "tolerance": tolerance_se * se,
        "problems": problems,
    }


# --------------------------------------------------------------------------- floors


def floors(cfg: PaperMQARConfig) -> dict[str, float]:
    """Chance levels computed from the config, never typed in (V = ``n_values``).

    * value_marginal: guess a uniformly random value id, 1/V.
    * uniform_pair_no_binding: the paper's no-binding strategy, answer the value of a
      uniformly chosen table pair: 1/K + (K-1)/(K V), since values repeat.
    * best_no_binding: answer the most frequent value of the table, E[max count]/K.
    * table: name the right pair of the table by chance, 1/K.
    * rebound_binder: a perfect binder on the rebinding control (`rebind`), scored against
      the original answer: another pair's value equals it with probability 1/V.
    """
    K, V = cfg.pairs, cfg.n_values
    return {
        "value_marginal": 1.0 / V,
        "uniform_pair_no_binding": uniform_pair_hit(K, V),
        "best_no_binding": _expected_max_count(K, V) / K,
        "table": 1.0 / K,
        "rebound_binder": 1.0 / V,
    }


def no_binding_self_test(held_out: Batch, cfg: PaperMQARConfig, tolerance_se: float = 5.0) -> dict:
    """Check the uniform-pair floor against the data: a guesser answering the value of a
    uniformly chosen table pair (drawn from the control seed range, purpose 2) scores
    `floors`' ``uniform_pair_no_binding`` within ``tolerance_se`` standard errors."""
    K = cfg.pairs
    rows, at = np.nonzero(held_out.targets != IGNORE)
    guess = stream_rng(0, 0, purpose=2).integers(0, K, size=len(rows))
    hits = held_out.tokens[rows, 2 * guess + 1] == held_out.targets[rows, at]
    score = float(hits.mean()) if len(hits) else 0.0
    floor = floors(cfg)["uniform_pair_no_binding"]
    se = math.sqrt(floor * (1 - floor) / max(len(hits), 1))
    return {
        "ok": bool(len(hits) and abs(score - floor) <= tolerance_se * se),
        "guesser_accuracy": score,
        "uniform_pair_floor": floor,
        "tolerance": tolerance_se * se,
    }


# --------------------------------------------------------------------------- adapter


@register_task
class PaperMQARTask(ConfigTask):
    """Training and evaluation adapter: batches are pure functions of (seed, step); evaluation
    reads the held-out set the workflow wrote (``eval.npz`` in the data folder) and never
    predicts the MASK."""

    name = "paper_mqar"
    data = "stream"
    layout = "bars"
    config_class = PaperMQARConfig
    functions = sys.modules[__name__]

    def summary(self) -> str:
        c = self.cfg
        return (
            f"K={c.pairs}, vocab {c.vocab}, {c.n_values} values, L={c.length}, "
            "fixed keys, one query, answer at MASK"
        )

    def never_predicted(self) -> tuple[int, ...]:
        return (self.cfg.mask_id,)

    def positions(self) -> int:
        return self.cfg.length

    def self_tests(self, held_out: Batch) -> dict[str, dict[str, Any]]:
        tests = {"no_binding": no_binding_self_test(held_out, self.cfg)}
        if self.cfg.pairs >= 2:
            tests["rebinding"] = rebinding_self_test(held_out, self.cfg)
        return tests

    def evaluate(
        self, model: Any, examples: int | None = None, rebinding: bool = False
    ) -> dict[str, Any]:
        """Held-out accuracy on the stored evaluation set (all of it; ``examples`` is the count
        the set was written with), the MASK excluded from the argmax; with ``rebinding``, also
        the accuracy on its rebinding control against the original answers (`rebind`), as
        ``rebinding_accuracy``."""
        from arbench.evaluate.recall import accuracy

        held_out = self.held_out()
        never = self.never_predicted()
        scores = accuracy(model, held_out.tokens, held_out.targets, exclude=never)
        if rebinding:
            control = rebinding_set(held_out, self.cfg)
            scores["rebinding_accuracy"] = accuracy(
                model, control.tokens, control.targets, exclude=never
            )["accuracy"]
        return scores
