"""S5 running products as the paper ran them (`paper_s5`): the interleaved masked layout of its
state-tracking probe; generator, oracle, floors and adapter.

The layout is that of ``make_batch`` in ``scripts/state_tracking_probe.py`` of
JIBSIL/dualgoose at commit 824f4b73; the code here is this project's own, none of the
paper's is reused. A sequence of ``depth`` d elements g_1 .. g_d of S5, each drawn uniformly
from all 120, is laid out over 2d positions as

    g_1 MASK g_2 MASK ... g_d MASK

and the MASK at position 2i+1 is answered by the running product p_i. Elements are the
token ids 0-119 in the lexicographic order of ``itertools.permutations(range(5))`` (as in
`arbench.tasks.s5`, whose group table this module reads); id 120 is the MASK. The product is
the paper's: function composition with the new element applied *first*,

    p_i = p_{i-1} o g_i,   (a o b)(x) = a(b(x)),

the mirror image of our `s5` task's p_i = p_{i-1} . g_i (apply p_{i-1}, then g_i); each
convention is the other's on reversed words, so no result depends on it.

The paper's accuracy is the mean over every product slot, the first included; p_1 = g_1 is
a copy of the token before it, so a model that only copies scores 1/d + (d-1)/(120 d). The
adapter reports that (``accuracy``, comparable with the paper's ``eval_accuracy``), the
accuracy at each slot and ours, over products of two or more (``composed_accuracy``), side by
side. How it differs from our `s5`: there the target p_i is read at g_i itself and the
products never occupy a position of their own.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from arbench.settings import whole_number
from arbench.tasks.base import IGNORE, Batch, ConfigTask, register_task, stream_rng
from arbench.tasks.s5 import CAYLEY, DEGREE, IDENTITY, ORDER, rank, unrank

MASK = ORDER  # the one id beyond the 120 elements


@dataclass(frozen=True)
class PaperS5Config:
    """One setting of the paper's S5 probe: ``depth`` is the number of elements composed (the
    paper's L); the sequence is twice as long."""

    depth: int = 4

    @property
    def vocab_size(self) -> int:
        return ORDER + 1

    @property
    def mask_id(self) -> int:
        return MASK

    @property
    def seq_len(self) -> int:
        return 2 * self.depth

    def validate(self) -> None:
        """Semantic checks a schema cannot express; raise ValueError naming the key."""
        whole_number(self.depth, "task.depth")

    def to_dict(self) -> dict[str, Any]:
        return {"name": "paper_s5", **asdict(self)}


def generate(cfg: PaperS5Config, n: int, rng: np.random.Generator) -> Batch:
    """Draw ``n`` sequences of ``depth`` uniform elements, each followed by a MASK whose target
    is the running product (vectorised over rows, one table lookup per slot; int64)."""
    elements = rng.integers(0, ORDER, size=(n, cfg.depth), dtype=np.int64)
    tokens = np.full((n, cfg.seq_len), MASK, dtype=np.int64)
    targets = np.full((n, cfg.seq_len), IGNORE, dtype=np.int64)
    tokens[:, 0::2] = elements
    product = np.full(n, IDENTITY, dtype=np.int64)
    for i in range(cfg.depth):
        # CAYLEY[a, b] applies a first, then b: p_{i-1} o g_i applies g_i first
        product = CAYLEY[elements[:, i], product]
        targets[:, 2 * i + 1] = product
    return Batch(tokens=tokens, targets=targets)


def heldout(cfg: PaperS5Config, n: int, seed: int = 0) -> Batch:
    """The held-out evaluation set: drawn from the evaluation seed range (purpose 1)."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


# --------------------------------------------------------------------------- oracle


def _after(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """a o b as functions: apply b, then a, (a o b)(x) = a(b(x))."""
    return tuple(a[b[x]] for x in range(DEGREE))


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: PaperS5Config) -> list[str]:
    """Re-derive every running product from the tokens alone; return the problems by row.

    Independent of `generate`: elements are decoded by `unrank` (factorial digits), multiplied
    by explicit function composition and re-encoded by `rank`. Every even position must hold
    an element and every odd one the MASK; each MASK's target must be the product so far and
    no element may be supervised. Every defect names its row.
    """
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    if tokens.ndim != 2 or tokens.shape != targets.shape:
        return [f"shape mismatch or not 2-D: {tokens.shape} vs {targets.shape}"]
    if tokens.shape[1] != cfg.seq_len:
        return [f"sequence length {tokens.shape[1]} != 2 x depth = {cfg.seq_len}"]
    problems: list[str] = []
    for r in range(tokens.shape[0]):
        seq, tgt = tokens[r].tolist(), targets[r].tolist()
        product = tuple(range(DEGREE))
        for i in range(cfg.depth):
            g, m = seq[2 * i], seq[2 * i + 1]
            if not 0 <= g < ORDER:
                problems.append(f"row {r}: position {2 * i} holds {g}, not an element of S5")
                break
            if m != MASK:
                problems.append(f"row {r}: position {2 * i + 1} holds {m}, not the MASK")
            if tgt[2 * i] != IGNORE:
                problems.append(f"row {r}: the element at {2 * i} is supervised ({tgt[2 * i]})")
            product = _after(product, unrank(g))
            if tgt[2 * i + 1] != rank(product):
                problems.append(
                    f"row {r}: target {tgt[2 * i + 1]} at {2 * i + 1}, the product is "
                    f"{rank(product)}"
                )
    return problems


# --------------------------------------------------------------------------- floors


def floors(cfg: PaperS5Config) -> dict[str, float]:
    """Chance levels computed from the config, never typed in (d = ``depth``).

    * value_marginal: 1/120, exact: every running product is uniform (its newest factor is
      uniform and independent of the rest), so a guess given any single element is too.
    * copy_only: the paper's all-slot accuracy of a model that copies g_1 into p_1 and
      guesses the rest, 1/d + (d-1)/(120 d): the best score that composes nothing.
    """
    d = cfg.depth
    return {"value_marginal": 1.0 / ORDER, "copy_only": 1.0 / d + (d - 1) / (ORDER * d)}


# --------------------------------------------------------------------------- adapter


@register_task
class PaperS5Task(ConfigTask):
    """Training and evaluation adapter: batches are pure functions of (seed, step);
    evaluation reads the held-out set the workflow wrote (``eval.npz``) and never predicts
    the MASK."""

    name = "paper_s5"
    data = "stream"
    layout = "bars"
    signals = frozenset()
    config_class = PaperS5Config
    functions = sys.modules[__name__]

    def summary(self) -> str:
        d = self.cfg.depth
        return f"paper_s5: depth {d}, interleaved g MASK ({2 * d} positions), {ORDER} classes"

    def never_predicted(self) -> tuple[int, ...]:
        return (MASK,)

    def positions(self) -> int:
        return self.cfg.seq_len

    def evaluate(self, model: Any, examples: int | None = None) -> dict[str, Any]:
        """The paper's accuracy over every product slot (``accuracy``), each slot's accuracy
        (``slot_accuracy``, p_1 .. p_d), ours over products of two or more
        (``composed_accuracy``) and the depth-d product alone (``final_accuracy``), from one
        pass over the stored held-out set."""
        from arbench.evaluate.recall import predict

        held_out = self.held_out()
        targets = held_out.targets
        hit = predict(model, held_out.tokens, targets, exclude=self.never_predicted()) == targets
        slots = hit[:, 1::2].mean(axis=0)
        per_sequence = hit[:, 1::2].mean(axis=1)
        d = self.cfg.depth
        return {
            "accuracy": float(slots.mean()),
            "correct": int(hit[:, 1::2].sum()),
            "total": int(hit[:, 1::2].size),
            "per_sequence": per_sequence.tolist(),
            "slot_accuracy": [float(s) for s in slots],
            "composed_accuracy": float(slots[1:].mean()) if d > 1 else float("nan"),
            "final_accuracy": float(slots[-1]),
        }
