"""MQAR as the field runs it (the Zoology layout), beside the paper's masked task (`mqar`).

One sequence of length L over a vocabulary of V tokens:

* token 0 is the filler; keys come from the lower half of the vocabulary (1 .. V/2 - 1),
  values from the upper half (V/2 .. V - 1), each drawn without replacement per sequence;
* the K pairs come first (``k v k v ...``, 2K tokens);
* the rest is a query region of (L - 2K)/2 two-token slots. K of them are chosen without
  replacement, each draw with probability proportional to i^(power_a - 1) over the slots
  still free (i = 1 is the slot nearest the pairs), so a small ``power_a`` asks most keys
  soon after they were stored. The j-th stored key is asked in the j-th drawn slot, at the
  slot's first position, and the answer (its value) is read at that position;
* with ``random_non_queries`` every other position of the query region holds a uniformly
  drawn token of the whole vocabulary instead of the filler.

Random filler has a known flaw: it sometimes repeats a stored key without a label, so the
model sees a query it is not scored on (and a value it may read as a rebinding). The
oracle counts those repeats (`filler_repeats`) and the frontier table reports the count.

An accuracy on this task means nothing without its configuration, so every config has a
name, ``V<vocab>-L<length>-K<pairs>-a<power_a>`` (`ZoologyConfig.label`), that every
report row carries.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from arbench.tasks.base import IGNORE, Batch, ConfigTask, register_task, stream_rng

FILLER = 0


@dataclass(frozen=True)
class ZoologyConfig:
    """One MQAR configuration: vocabulary, length, pairs, the query-distance knob
    ``power_a`` and whether non-query slots hold random tokens. ``seq_len`` 0 means 8K
    (a query region of 3K slots), so that a grid over K keeps the load per slot fixed."""

    vocab: int = 8192
    seq_len: int = 0
    pairs: int = 16
    power_a: float = 0.01
    random_non_queries: bool = True

    @property
    def vocab_size(self) -> int:
        return self.vocab

    @property
    def key_range(self) -> tuple[int, int]:
        """Keys are ``lo <= t < hi``: the lower half of the vocabulary without the filler."""
        return 1, self.vocab // 2

    @property
    def value_range(self) -> tuple[int, int]:
        return self.vocab // 2, self.vocab

    @property
    def length(self) -> int:
        """The sequence length: ``seq_len``, or 8K when it is 0."""
        return self.seq_len or 8 * self.pairs

    @property
    def slots(self) -> int:
        """Two-token slots of the query region."""
        return (self.length - 2 * self.pairs) // 2

    @property
    def label(self) -> str:
        """The configuration's name, carried by every accuracy reported on it."""
        return f"V{self.vocab}-L{self.length}-K{self.pairs}-a{self.power_a:g}"

    def slot_probabilities(self) -> np.ndarray:
        """P(the first drawn query slot is slot i), i = 1 .. slots: i^(a-1), normalised."""
        p = np.arange(1, self.slots + 1, dtype=np.float64) ** (self.power_a - 1.0)
        return p / p.sum()

    def validate(self) -> None:
        """Semantic checks a schema cannot express; raise ValueError naming the key."""
        lo, hi = self.key_range
        if self.pairs < 1:
            raise ValueError(f"task.pairs must be >= 1, got {self.pairs}")
        if self.pairs > hi - lo or self.pairs > self.vocab - hi:
            raise ValueError(
                f"task.pairs={self.pairs} exceeds the {hi - lo} keys or {self.vocab - hi} "
                f"values of task.vocab={self.vocab}"
            )
        if self.length % 2 or self.slots < self.pairs:
            raise ValueError(
                f"task.seq_len={self.seq_len} must be even and leave at least task.pairs="
                f"{self.pairs} query slots after the {2 * self.pairs} pair tokens"
            )
        if not self.power_a > 0:
            raise ValueError(f"task.power_a must be > 0, got {self.power_a}")


def _without_replacement(
    rng: np.random.Generator, n: int, size: int, lo: int, hi: int
) -> np.ndarray:
    """``n`` rows of ``size`` distinct integers from [lo, hi), uniformly, in random order."""
    return lo + np.argsort(rng.random((n, hi - lo)), axis=1)[:, :size]


def draw_slots(cfg: ZoologyConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rows of K distinct query slots (0-based), in the order they are drawn.

    Sequential draws without replacement with weights w_i = i^(a-1) are the Plackett-Luce
    model, whose draw order is the descending order of log w_i + Gumbel noise, so one sort
    per row gives exactly the sequential process (vectorised over rows).
    """
    log_w = np.log(cfg.slot_probabilities())
    gumbel = -np.log(-np.log(rng.random((n, cfg.slots))))
    return np.argsort(-(log_w[None, :] + gumbel), axis=1)[:, : cfg.pairs]


def generate(cfg: ZoologyConfig, n: int, rng: np.random.Generator) -> Batch:
    """Draw ``n`` independent sequences from ``rng`` (int64)."""
    K, L = cfg.pairs, cfg.length
    keys = _without_replacement(rng, n, K, *cfg.key_range)
    values = _without_replacement(rng, n, K, *cfg.value_range)
    tokens = np.full((n, L), FILLER, dtype=np.int64)
    targets = np.full((n, L), IGNORE, dtype=np.int64)
    tokens[:, 0 : 2 * K : 2] = keys
    tokens[:, 1 : 2 * K : 2] = values
    slots = draw_slots(cfg, n, rng)
    at = 2 * K + 2 * slots
    rows = np.arange(n)[:, None]
    if cfg.random_non_queries:
        noise = rng.integers(0, cfg.vocab, size=(n, L - 2 * K))
        tokens[:, 2 * K :] = noise
    tokens[rows, at] = keys
    targets[rows, at] = values
    return Batch(tokens=tokens, targets=targets)


def heldout(cfg: ZoologyConfig, n: int, seed: int = 0) -> Batch:
    """The held-out set, from the evaluation seed range (never a training batch's)."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


# --------------------------------------------------------------------------- oracle


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: ZoologyConfig) -> list[str]:
    """Re-derive every label from the tokens alone; return a list of problems.

    Independent of `generate`: it reads the table from the pair block, then checks each
    labelled position sits on a slot's first position, holds a stored key, and is labelled
    with that key's value; that every stored key is labelled exactly once; and, without
    random filler, that every unlabelled position of the query region is the filler.
    """
    problems: list[str] = []
    K, L = cfg.pairs, cfg.length
    (klo, khi), (vlo, vhi) = cfg.key_range, cfg.value_range
    if tokens.shape != targets.shape or tokens.ndim != 2 or tokens.shape[1] != L:
        return [f"shape {tokens.shape} / {targets.shape}, expected (n, {L})"]
    for r in range(tokens.shape[0]):
        seq, tgt = tokens[r].tolist(), targets[r].tolist()
        table: dict[int, int] = {}
        for i in range(K):
            k, v = seq[2 * i], seq[2 * i + 1]
            if not (klo <= k < khi and vlo <= v < vhi):
                problems.append(f"row {r}: pair {i} is not (key, value): ({k}, {v})")
            elif k in table or v in table.values():
                problems.append(f"row {r}: pair {i} repeats a key or value")
            table[k] = v
        if any(t != IGNORE for t in tgt[: 2 * K]):
            problems.append(f"row {r}: a label inside the pair block")
        asked: set[int] = set()
        for t in range(2 * K, L):
            if tgt[t] == IGNORE:
                if not cfg.random_non_queries and seq[t] != FILLER:
                    problems.append(f"row {r}: token {seq[t]} at {t} is neither query nor filler")
                continue
            if (t - 2 * K) % 2:
                problems.append(f"row {r}: label at {t} is not a slot's first position")
            q = seq[t]
            if q not in table:
                problems.append(f"row {r}: label at {t} follows non-stored token {q}")
            elif tgt[t] != table[q]:
                problems.append(f"row {r}: label at {t} is {tgt[t]}, the table says {table[q]}")
            elif q in asked:
                problems.append(f"row {r}: key {q} labelled twice")
            asked.add(q)
        if len(asked) != K:
            problems.append(f"row {r}: {len(asked)} of {K} stored keys labelled")
    return problems


def filler_repeats(tokens: np.ndarray, targets: np.ndarray, cfg: ZoologyConfig) -> dict[str, Any]:
    """Unlabelled occurrences of a sequence's stored keys in its query region (the random
    filler's flaw): their total, per sequence, and the share of sequences that have one."""
    K = cfg.pairs
    stored = tokens[:, 0 : 2 * K : 2]
    region, labels = tokens[:, 2 * K :], targets[:, 2 * K :]
    is_stored = (region[:, :, None] == stored[:, None, :]).any(axis=2)
    repeats = (is_stored & (labels == IGNORE)).sum(axis=1)
    return {
        "unlabelled_key_repeats": int(repeats.sum()),
        "per_sequence": float(repeats.mean()),
        "sequences_with_repeat": float((repeats > 0).mean()),
    }


def floors(cfg: ZoologyConfig) -> dict[str, float]:
    """Chance levels from the config: a uniform value guess, 1/(V/2); a stored value named
    at random, 1/K (values are distinct within a sequence, so no multiset advantage)."""
    n_values = cfg.value_range[1] - cfg.value_range[0]
    return {
        "value_marginal": 1.0 / n_values,
        "uniform_pair_no_binding": 1.0 / cfg.pairs,
        "best_no_binding": 1.0 / cfg.pairs,
    }


# --------------------------------------------------------------------------- adapter


@register_task
class ZoologyMQARTask(ConfigTask):
    """The Zoology MQAR task in the workflow: a stream task, batches a pure function of
    (seed, step), the held-out set written by the workflow."""

    name = "zoology_mqar"
    data = "stream"
    layout = "bars"
    config_class = ZoologyConfig
    functions = sys.modules[__name__]

    def summary(self) -> str:
        c = self.cfg
        filler = "random" if c.random_non_queries else "filler-token"
        return f"Zoology MQAR {c.label}, {filler} non-query slots"

    def self_tests(self, held_out: Batch) -> dict[str, dict[str, Any]]:
        """The held-out set's unlabelled key repeats: reported, never a failure."""
        return {
            "filler_repeats": {
                "ok": True,
                **filler_repeats(held_out.tokens, held_out.targets, self.cfg),
            }
        }

    def evaluate(self, model: Any, examples: int | None = None) -> dict[str, Any]:
        """Accuracy at the labelled query positions of the stored held-out set."""
        from arbench.evaluate.recall import accuracy

        held_out = self.held_out()
        return accuracy(model, held_out.tokens, held_out.targets)
