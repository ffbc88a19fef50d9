"""Masked multi-query associative recall (MQAR): generator, oracle and floors.

A sequence holds K key-value pairs (keys drawn without replacement from a key
vocabulary, values drawn fresh and uniformly, with replacement, from a disjoint value
vocabulary), then a query region in which every stored key is asked once. Loss and
accuracy are taken only at the answer positions, and the answer never appears in the
input, so neither teacher forcing nor elimination can leak it. Where the answer is read
is ``answer``:

* ``"key"`` (the default): at the query key itself, the next-token convention of
  Zoology's MQAR; the query slot is ``key FILLER``. A causal model needs one shift (to
  bind k_{t-1} with v_t).
* ``"mask"``: at a MASK token after the query key (slot ``key MASK``), the layout a
  bidirectional denoiser needs; a causal model must carry the query key forward one
  more step, and in our pilots no convolution-free cell ever learned it.

Choices the paper leaves open, and the pilots behind them, are in docs/PROTOCOL.md.

Targets use the project convention (`arbench.tasks.base`): ``targets[t]`` is the token the
model must output at position ``t`` (IGNORE where nothing is supervised). `MQARTask` is the
adapter the workflow trains and evaluates through: a "stream" task whose batches are drawn on
the fly, rendered as bars with contrasts.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from arbench.tasks.base import (
    IGNORE,
    Batch,
    ConfigTask,
    register_task,
    stream_rng,
)

ANSWERS = ("key", "mask")


@dataclass(frozen=True)
class MQARConfig:
    """Sizes of one MQAR setting; ``seq_len`` 0 means the dense layout 4K; ``answer`` is
    where the value is read ("key" or "mask", see the module docstring)."""

    pairs: int = 32
    n_keys: int = 64
    n_values: int = 26
    seq_len: int = 0
    answer: str = "key"

    @property
    def mask_id(self) -> int:
        return self.n_keys + self.n_values

    @property
    def filler_id(self) -> int:
        return self.n_keys + self.n_values + 1

    @property
    def vocab_size(self) -> int:
        return self.n_keys + self.n_values + 2

    @property
    def length(self) -> int:
        return self.seq_len or 4 * self.pairs

    def validate(self) -> None:
        """Semantic checks a schema cannot express; raise ValueError naming the key."""
        if self.pairs < 1:
            raise ValueError(f"task.pairs must be >= 1, got {self.pairs}")
        if self.pairs > self.n_keys:
            raise ValueError(
                f"task.pairs={self.pairs} exceeds the key vocabulary task.n_keys={self.n_keys}"
            )
        if self.answer not in ANSWERS:
            raise ValueError(f"task.answer must be one of {ANSWERS}, got {self.answer!r}")
        if self.n_values < 2:
            raise ValueError(f"task.n_values must be >= 2, got {self.n_values}")
        region = self.length - 2 * self.pairs
        if region < 2 * self.pairs or region % 2:
            raise ValueError(
                f"task.seq_len={self.seq_len} must leave an even query region of at least "
                f"2*pairs={2 * self.pairs} tokens after the {2 * self.pairs} pair tokens"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"name": "mqar", **asdict(self)}


def generate(cfg: MQARConfig, n: int, rng: np.random.Generator) -> Batch:
    """Draw ``n`` independent MQAR sequences from ``rng`` (vectorised over sequences; int64)."""
    K, L = cfg.pairs, cfg.length
    keys = np.argsort(rng.random((n, cfg.n_keys)), axis=1)[:, :K]
    values = cfg.n_keys + rng.integers(0, cfg.n_values, size=(n, K))
    tokens = np.full((n, L), cfg.filler_id, dtype=np.int64)
    targets = np.full((n, L), IGNORE, dtype=np.int64)
    tokens[:, 0 : 2 * K : 2] = keys
    tokens[:, 1 : 2 * K : 2] = values

    n_slots = (L - 2 * K) // 2
    # choose K of the query region's two-token slots, in increasing order
    slots = np.sort(np.argsort(rng.random((n, n_slots)), axis=1)[:, :K], axis=1)
    order = np.argsort(rng.random((n, K)), axis=1)  # which pair each slot asks
    key_pos = 2 * K + 2 * slots
    rows = np.arange(n)[:, None]
    tokens[rows, key_pos] = np.take_along_axis(keys, order, axis=1)
    answer_pos = key_pos
    if cfg.answer == "mask":
        answer_pos = key_pos + 1
        tokens[rows, answer_pos] = cfg.mask_id
    targets[rows, answer_pos] = np.take_along_axis(values, order, axis=1)
    return Batch(tokens=tokens, targets=targets)


def heldout(cfg: MQARConfig, n: int, seed: int = 0) -> Batch:
    """The held-out evaluation set: drawn from the evaluation seed range."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


# --------------------------------------------------------------------------- oracle


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: MQARConfig) -> list[str]:
    """Re-derive every target from the token stream alone; return a list of problems.

    Written independently of `generate`: it walks each sequence left to right,
    records bindings from the pair block, and answers each query by lookup: at the
    key itself (``answer="key"``) or at the MASK that follows it (``"mask"``). Any
    disagreement or structural defect is reported with its row.
    """
    problems: list[str] = []
    K = cfg.pairs
    is_key = lambda t: 0 <= t < cfg.n_keys
    is_value = lambda t: cfg.n_keys <= t < cfg.n_keys + cfg.n_values
    if tokens.shape != targets.shape:
        return [f"shape mismatch {tokens.shape} vs {targets.shape}"]
    for r in range(tokens.shape[0]):
        seq, tgt = tokens[r].tolist(), targets[r].tolist()
        if len(seq) != cfg.length:
            problems.append(f"row {r}: length {len(seq)} != {cfg.length}")
            continue
        table: dict[int, int] = {}
        for i in range(K):
            k, v = seq[2 * i], seq[2 * i + 1]
            if not is_key(k) or not is_value(v):
                problems.append(f"row {r}: pair {i} is not (key, value): ({k}, {v})")
            elif k in table:
                problems.append(f"row {r}: key {k} stored twice")
            table[k] = v
        asked: set[int] = set()
        expected = [IGNORE] * len(seq)
        for t in range(2 * K, len(seq)):
            tok = seq[t]
            if cfg.answer == "mask" and tok == cfg.mask_id:
                q, at = seq[t - 1], t
            elif cfg.answer == "key" and is_key(tok):
                q, at = tok, t
            elif tok == cfg.filler_id or (cfg.answer == "mask" and is_key(tok)):
                continue
            else:
                problems.append(f"row {r}: unexpected token {tok} at {t} in query region")
                continue
            if q not in table:
                problems.append(f"row {r}: query at {at} asks non-stored token {q}")
                continue
            if q in asked:
                problems.append(f"row {r}: key {q} queried twice")
            asked.add(q)
            expected[at] = table[q]
        if len(asked) != K and not any(p.startswith(f"row {r}:") for p in problems):
            problems.append(f"row {r}: {len(asked)} of {K} keys queried")
        if expected != tgt:
            bad = [t for t in range(len(seq)) if expected[t] != tgt[t]]
            problems.append(f"row {r}: targets disagree with the oracle at positions {bad[:5]}")
    return problems


# --------------------------------------------------------------------------- rebinding


def rebind(batch: Batch, cfg: MQARConfig, rng: np.random.Generator) -> Batch:
    """The rebinding control: each sequence's key table re-bound, its values permuted among
    its own keys (a uniform permutation per row, from ``rng``), every target re-derived.

    Keys, positions and the multiset of values are unchanged, so a model that binds in
    context scores as before, while anything that answers the original binding (a memoriser
    of pairs) falls to the rebinding floor, 1/K + (K-1)/(K V) (`floors`).
    """
    K = cfg.pairs
    n = len(batch)
    tokens, targets = batch.tokens.copy(), batch.targets.copy()
    keys, values = tokens[:, 0 : 2 * K : 2], tokens[:, 1 : 2 * K : 2]
    perm = np.argsort(rng.random((n, K)), axis=1)
    rebound = np.take_along_axis(values, perm, axis=1)
    tokens[:, 1 : 2 * K : 2] = rebound
    slot = np.full((n, cfg.n_keys), -1, dtype=np.int64)  # key id -> its pair index
    np.put_along_axis(slot, keys, np.arange(K)[None, :].repeat(n, 0), axis=1)
    rows, at = np.nonzero(targets != IGNORE)
    asked = tokens[rows, at] if cfg.answer == "key" else tokens[rows, at - 1]
    targets[rows, at] = rebound[rows, slot[rows, asked]]
    return Batch(tokens=tokens, targets=targets)


def rebinding_set(held_out: Batch, cfg: MQARConfig) -> Batch:
    """The held-out set's rebinding control, drawn from its own seed range (purpose 2)."""
    return rebind(held_out, cfg, stream_rng(0, 0, purpose=2))


def rebinding_self_test(held_out: Batch, cfg: MQARConfig, tolerance_se: float = 5.0) -> dict:
    """Check the control does what it claims: the oracle re-derives every rebound target, and
    a memoriser answering the original binding scores the rebinding floor (within
    ``tolerance_se`` standard errors) rather than the 1.0 it scores on the held-out set."""
    control = rebinding_set(held_out, cfg)
    answered = held_out.targets != IGNORE
    same = (held_out.targets == control.targets) & answered
    per_row = same.sum(axis=1) / answered.sum(axis=1)  # the memoriser's accuracy per sequence
    memoriser = float(per_row.mean())
    floor = uniform_pair_hit(cfg.pairs, cfg.n_values)
    se = float(per_row.std(ddof=1)) / math.sqrt(len(per_row)) if len(per_row) > 1 else 1.0
    problems = oracle_check(control.tokens, control.targets, cfg)
    ok = not problems and abs(memoriser - floor) <= tolerance_se * se
    return {
        "ok": bool(ok),
        "memoriser_accuracy": memoriser,
        "rebinding_floor": floor,
        "tolerance": tolerance_se * se,
        "oracle_problems": problems[:5],
    }


# --------------------------------------------------------------------------- floors


def _expected_max_count(draws: int, categories: int) -> float:
    """E[max_j N_j] for N ~ Multinomial(draws, uniform over categories), exactly.

    P(max <= m) = draws! / c^draws * [x^draws] (sum_{j<=m} x^j / j!)^c, evaluated
    with a log-space polynomial power (stable for the sizes used here).
    """
    total = 0.0
    log_norm = math.lgamma(draws + 1) - draws * math.log(categories)
    for m in range(draws):
        # coefficient of x^draws in (truncated exp series)^categories
        base = np.array([1.0 / math.factorial(j) for j in range(min(m, draws) + 1)])
        poly = np.array([1.0])
        power, exp_ = base, categories
        while exp_:
            if exp_ & 1:
                poly = np.convolve(poly, power)[: draws + 1]
            power = np.convolve(power, power)[: draws + 1]
            exp_ >>= 1
        coeff = poly[draws] if len(poly) > draws else 0.0
        p_le = math.exp(log_norm + math.log(coeff)) if coeff > 0 else 0.0
        total += 1.0 - min(1.0, p_le)
    return total


def uniform_pair_hit(pairs: int, n_values: int) -> float:
    """P(the value of a uniformly chosen table pair equals the asked pair's value) when the
    K values are drawn uniformly with replacement from ``n_values``: 1/K + (K-1)/(K V)."""
    return 1.0 / pairs + (pairs - 1) / (pairs * n_values)


def floors(cfg: MQARConfig) -> dict[str, float]:
    """Chance levels computed from the config, never typed in.

    * value_marginal: guess a uniformly random value token, 1/n_values.
    * uniform_pair_no_binding: the paper's no-binding strategy, answer the value of a
      uniformly chosen stored pair: 1/K + (K-1)/(K V) (values repeat, so the wrong pair
      is sometimes right).
    * best_no_binding: the strongest strategy that knows the multiset of stored values but
      not which key holds which: answer the most frequent stored value, E[max count]/K.
    * rebinding_control: the table floor of a rebinding control (keys re-bound to fresh
      values), naming a uniformly chosen value of the table, for the actual draw: the
      same 1/K + (K-1)/(K V), not the 1/K of distinct values.
    """
    K = cfg.pairs
    return {
        "value_marginal": 1.0 / cfg.n_values,
        "uniform_pair_no_binding": uniform_pair_hit(K, cfg.n_values),
        "best_no_binding": _expected_max_count(K, cfg.n_values) / K,
        "rebinding_control": uniform_pair_hit(K, cfg.n_values),
    }


# --------------------------------------------------------------------------- adapter


@register_task
class MQARTask(ConfigTask):
    """Training and evaluation adapter: batches are pure functions of (seed, step); evaluation
    reads the held-out set the workflow wrote (``eval.npz`` in the data folder)."""

    name = "mqar"
    data = "stream"
    layout = "bars"
    config_class = MQARConfig
    functions = sys.modules[__name__]

    def summary(self) -> str:
        c = self.cfg
        where = "query key" if c.answer == "key" else "MASK"
        return f"K={c.pairs}, {c.n_keys} keys, {c.n_values} values, L={c.length}, answer at {where}"

    def self_tests(self, held_out: Batch) -> dict[str, dict[str, Any]]:
        return {"rebinding": rebinding_self_test(held_out, self.cfg)}

    def positions(self) -> int:
        return self.cfg.length

    def evaluate(
        self, model: Any, examples: int | None = None, rebinding: bool = False
    ) -> dict[str, Any]:
        """Held-out accuracy on the stored evaluation set (all of it; ``examples`` is the count
        the set was written with); with ``rebinding``, also the accuracy on its rebinding
        control (`rebind`), as ``rebinding_accuracy``."""
        from arbench.evaluate.recall import accuracy

        held_out = self.held_out()
        scores = accuracy(model, held_out.tokens, held_out.targets)
        if rebinding:
            control = rebinding_set(held_out, self.cfg)
            scores["rebinding_accuracy"] = accuracy(model, control.tokens, control.targets)[
                "accuracy"
            ]
        return scores
