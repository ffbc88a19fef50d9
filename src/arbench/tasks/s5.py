"""S5 running products (the state-tracking guardrail): generator, oracle and floors.

A sequence is g_1 .. g_d (d = ``depth``), each the token of an element of the symmetric group
S5 drawn uniformly from all 120; the target at position i is the token of the running product
p_i = g_1 . g_2 . ... . g_i. Elements are indexed in the lexicographic order of
``itertools.permutations(range(5))`` (token id = index), and a permutation is the tuple of its
images, p[x] = p(x). The composition convention, used everywhere here:

    (a . b)(x) = b(a(x))   (apply a first, then b),   so   p_i = p_{i-1} . g_i.

Every position is supervised at once and products appear only as targets, never as inputs, so
no prefix holds an answer. Each p_i is uniform over S5 (its last factor g_i is uniform and
independent of p_{i-1}), so the value floor is exactly 1/120 and nothing else (no table to
bind) applies. `S5Task` is the adapter: a "stream" task rendered as bars.
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from arbench.settings import whole_number
from arbench.tasks.base import (
    IGNORE,
    Batch,
    ConfigTask,
    register_task,
    stream_rng,
)

DEGREE = 5  # S5 acts on {0, .., 4}
ORDER = math.factorial(DEGREE)  # 120 elements, the vocabulary


def _cayley() -> tuple[np.ndarray, np.ndarray]:
    """(elements (120, 5) in itertools order, table (120, 120) with table[i, j] = index of
    e_i . e_j), built once so the generator composes by lookup."""
    elements = np.array(list(itertools.permutations(range(DEGREE))), dtype=np.int64)
    index = {tuple(p): i for i, p in enumerate(elements.tolist())}
    # (e_i . e_j)(x) = e_j(e_i(x)): composed[i, j, x] = elements[j, elements[i, x]]
    composed = elements[np.arange(ORDER)[None, :, None], elements[:, None, :]]
    table = np.array([[index[tuple(p)] for p in row] for row in composed.tolist()], np.int64)
    return elements, table


ELEMENTS, CAYLEY = _cayley()
ELEMENTS.setflags(write=False)
CAYLEY.setflags(write=False)
IDENTITY = 0  # (0, 1, 2, 3, 4) comes first in lexicographic order


@dataclass(frozen=True)
class S5Config:
    """One S5 setting: ``depth`` is the number of composed elements per sequence (the knob)."""

    depth: int = 8

    @property
    def vocab_size(self) -> int:
        return ORDER

    @property
    def length(self) -> int:
        return self.depth

    def validate(self) -> None:
        """Semantic checks a schema cannot express; raise ValueError naming the key."""
        whole_number(self.depth, "task.depth")

    def to_dict(self) -> dict[str, Any]:
        return {"name": "s5", **asdict(self)}


def generate(cfg: S5Config, n: int, rng: np.random.Generator) -> Batch:
    """Draw ``n`` sequences of ``depth`` uniform S5 elements and their running products
    (vectorised over sequences, one table lookup per position; int64)."""
    tokens = rng.integers(0, ORDER, size=(n, cfg.depth), dtype=np.int64)
    targets = np.empty_like(tokens)
    product = np.full(n, IDENTITY, dtype=np.int64)
    for i in range(cfg.depth):
        product = CAYLEY[product, tokens[:, i]]  # p_i = p_{i-1} . g_i
        targets[:, i] = product
    return Batch(tokens=tokens, targets=targets)


def heldout(cfg: S5Config, n: int, seed: int = 0) -> Batch:
    """The held-out evaluation set: drawn from the evaluation seed range (purpose 1)."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


# --------------------------------------------------------------------------- oracle


def unrank(index: int) -> tuple[int, ...]:
    """The ``index``-th permutation of range(5) in lexicographic order, by its factorial-base
    digits (Lehmer code): the oracle's own decoding, independent of itertools and the table."""
    pool = list(range(DEGREE))
    out = []
    for place in range(DEGREE - 1, -1, -1):
        digit, index = divmod(index, math.factorial(place))
        out.append(pool.pop(digit))
    return tuple(out)


def rank(perm: tuple[int, ...]) -> int:
    """Lexicographic index of a permutation of range(5) (the inverse of `unrank`)."""
    pool = list(range(DEGREE))
    index = 0
    for pos, x in enumerate(perm):
        digit = pool.index(x)
        index += digit * math.factorial(DEGREE - 1 - pos)
        pool.pop(digit)
    return index


def compose(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """a . b as functions: apply a, then b, (a . b)(x) = b(a(x))."""
    return tuple(b[a[x]] for x in range(DEGREE))


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: S5Config) -> list[str]:
    """Re-derive every running product from the tokens alone; return the problems by row.

    Independent of `generate`: tokens are decoded by `unrank`, multiplied by explicit function
    composition and re-encoded by `rank`; out-of-range tokens, a wrong length and any target
    (IGNORE included) that is not the product are reported.
    """
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    if tokens.ndim != 2 or tokens.shape != targets.shape:
        return [f"shape mismatch or not 2-D: {tokens.shape} vs {targets.shape}"]
    problems: list[str] = []
    for r in range(tokens.shape[0]):
        seq, tgt = tokens[r].tolist(), targets[r].tolist()
        if len(seq) != cfg.depth:
            problems.append(f"row {r}: length {len(seq)} != depth {cfg.depth}")
            continue
        bad_tokens = [t for t, g in enumerate(seq) if not 0 <= g < ORDER]
        if bad_tokens:
            problems.append(f"row {r}: tokens out of range [0, {ORDER}) at {bad_tokens[:5]}")
            continue
        product = tuple(range(DEGREE))
        ignored, wrong = [], []
        for t, g in enumerate(seq):
            product = compose(product, unrank(g))
            if tgt[t] == IGNORE:
                ignored.append(t)
            elif tgt[t] != rank(product):
                wrong.append(t)
        if ignored:
            problems.append(f"row {r}: no target (IGNORE) where a product is due at {ignored[:5]}")
        if wrong:
            problems.append(f"row {r}: targets disagree with the oracle at positions {wrong[:5]}")
    return problems


# --------------------------------------------------------------------------- floors


def floors(cfg: S5Config) -> dict[str, float]:
    """Chance levels: value_marginal = 1/120 exactly, since every running product is uniform
    (its last factor is uniform and independent of the rest); no binding floor applies."""
    return {"value_marginal": 1.0 / ORDER}


# --------------------------------------------------------------------------- adapter


@register_task
class S5Task(ConfigTask):
    """Training and evaluation adapter: batches are pure functions of (seed, step); evaluation
    reads the held-out set the workflow wrote (``eval.npz`` in the data folder)."""

    name = "s5"
    data = "stream"
    layout = "bars"
    signals = frozenset()

    config_class = S5Config
    functions = sys.modules[__name__]

    def summary(self) -> str:
        return f"S5 running products, depth {self.cfg.depth} ({ORDER} classes)"

    def evaluate(self, model: Any, examples: int | None = None) -> dict[str, Any]:
        """Held-out accuracy over every product of two or more elements (the headline: the
        first slot's product is its own input, so copying would score 1/depth there),
        ``all_slots_accuracy`` with it, and ``final_accuracy``, the depth-d product alone."""
        from arbench.evaluate.recall import accuracy

        held_out = self.held_out()
        composed = held_out.targets.copy()
        if composed.shape[1] > 1:
            composed[:, 0] = IGNORE
        scores = accuracy(model, held_out.tokens, composed)
        scores["all_slots_accuracy"] = accuracy(model, held_out.tokens, held_out.targets)[
            "accuracy"
        ]
        last = np.full_like(held_out.targets, IGNORE)
        last[:, -1] = held_out.targets[:, -1]
        scores["final_accuracy"] = accuracy(model, held_out.tokens, last)["accuracy"]
        return scores
