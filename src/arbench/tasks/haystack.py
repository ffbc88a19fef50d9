"""Haystack retrieval and collision keys: generator, oracle and floors (two tasks, one module).

A sequence holds a table of P key-value pairs (distinct keys, values uniform with
replacement), then a gap of G distractors, then a query region that asks every table key
once, in a random order; the answer is always the key's TABLE value (its first binding).
The tasks differ only in the distractors, the config's ``distractors``:

* ``haystack``, ``distractors="filler"`` (the default): the gap holds G single tokens drawn
  uniformly from a filler vocabulary of ``n_filler`` ids that are neither keys, values, PAD
  nor MASK, so a cell must learn *not to write* the gap (the interference wall).
* ``haystack``, ``distractors="pairs"``: the gap holds G (key, value) pairs whose keys are
  drawn uniformly from the keys not in the row's table (MQAR with more bindings, which the
  armed cells solve).
* ``collision`` (``distractors="reuse"``, the only kind it takes): G (key, value) pairs that
  reuse the table's keys with fresh values, so the gap holds later, wrong bindings of the
  very keys that are asked; a model that keeps the latest binding answers them instead.

Vocabulary: keys 0..n_keys-1, values n_keys..n_keys+n_values-1, PAD, MASK, then (filler
only) the filler ids n_keys+n_values+2..n_keys+n_values+n_filler+1. A query slot is the key
alone (``answer="key"``: the value is read at the key, the next-token convention of
`arbench.tasks.mqar`) or ``key MASK`` (``answer="mask"``: read at the MASK). G counts the
kind's own unit and the full gap fills the sequence: G_max = L - 2P - wP filler tokens, or
(L - 2P - wP) // 2 pairs, for slot width w. In the ``fixed`` layout the table starts at
position 0 and PAD trails; in the ``shifting`` layout a uniformly drawn lead of PAD shifts the
whole content within the sequence. ``shift`` reserves that many positions: the full gap
leaves them free, so even at the full gap (the held-out set) a shifting layout moves the
content by up to ``shift`` positions, while a fixed one leaves them as trailing PAD, so the
two layouts of one ``shift`` have the same gaps.

Training batches honour both `Signal` fields: ``gap`` (a distance curriculum: each row's G
drawn uniformly from 0..round(f * G_max), in the kind's unit; None: G_max) and ``dense``
(supervise every query, not only the last one, the task's own end-only signal). The
held-out set is always at the full gap with end-only supervision. Tables, query orders and
gap fractions are drawn first, so one seed gives every kind the same tables and questions.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from arbench.tasks.base import (
    IGNORE,
    Batch,
    ConfigTask,
    Signal,
    config_of,
    register_task,
    stream_rng,
)
from arbench.tasks.mqar import _expected_max_count, uniform_pair_hit

ANSWERS = ("key", "mask")
LAYOUTS = ("fixed", "shifting")
# filler: single filler tokens; pairs: pairs with keys outside the table (both haystack);
# reuse: pairs that rebind the table's keys (collision)
DISTRACTORS = ("filler", "pairs", "reuse")


@dataclass(frozen=True)
class HaystackConfig:
    """Sizes of one haystack or collision setting; ``answer`` is where the value is read
    ("key" or "mask"), ``layout`` whether the content sits at 0 or at a random lead, and
    ``distractors`` what fills the gap (`DISTRACTORS`; ``n_filler`` ids for "filler")."""

    pairs: int = 4
    n_keys: int = 64
    n_values: int = 54
    seq_len: int = 64
    answer: str = "key"
    layout: str = "fixed"
    distractors: str = "filler"
    n_filler: int = 64
    shift: int = 0  # positions reserved for moving the content: the full gap leaves them free

    @property
    def pad_id(self) -> int:
        return self.n_keys + self.n_values

    @property
    def mask_id(self) -> int:
        return self.n_keys + self.n_values + 1

    @property
    def filler_base(self) -> int:
        """The first filler id (the filler ids follow MASK)."""
        return self.n_keys + self.n_values + 2

    @property
    def vocab_size(self) -> int:
        return self.filler_base + (self.n_filler if self.distractors == "filler" else 0)

    @property
    def slot_width(self) -> int:
        """Tokens per query slot: the key alone, or key then MASK."""
        return 1 if self.answer == "key" else 2

    @property
    def gap_unit(self) -> int:
        """Tokens per gap unit: one filler token, or a (key, value) pair."""
        return 1 if self.distractors == "filler" else 2

    @property
    def full_gap(self) -> int:
        """G_max: the most gap units (filler tokens or pairs) between table and queries."""
        room = self.seq_len - 2 * self.pairs - self.slot_width * self.pairs - self.shift
        return room // self.gap_unit

    def validate(self) -> None:
        """Semantic checks a schema cannot express; raise ValueError naming the key."""
        if self.distractors not in DISTRACTORS:
            raise ValueError(
                f"task.distractors must be one of {DISTRACTORS}, got {self.distractors!r}"
            )
        if self.pairs < 1:
            raise ValueError(f"task.pairs must be >= 1, got {self.pairs}")
        if self.pairs > self.n_keys:
            raise ValueError(
                f"task.pairs={self.pairs} exceeds the key vocabulary task.n_keys={self.n_keys}"
            )
        if self.distractors == "pairs" and self.n_keys <= self.pairs:
            raise ValueError(
                f"task.n_keys={self.n_keys} leaves no fresh distractor key: pairs distractors "
                f"need n_keys > pairs={self.pairs}"
            )
        if self.distractors == "filler" and self.n_filler < 1:
            raise ValueError(
                f"task.n_filler must be >= 1 for filler distractors, got {self.n_filler}"
            )
        if self.answer not in ANSWERS:
            raise ValueError(f"task.answer must be one of {ANSWERS}, got {self.answer!r}")
        if self.shift < 0:
            raise ValueError(f"task.shift must be >= 0, got {self.shift}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"task.layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.n_values < 2:
            raise ValueError(f"task.n_values must be >= 2, got {self.n_values}")
        if self.full_gap < 1:
            unit = "filler token" if self.distractors == "filler" else "distractor pair"
            need = 2 * self.pairs + self.slot_width * self.pairs + self.gap_unit + self.shift
            raise ValueError(
                f"task.seq_len={self.seq_len} leaves no room for a {unit}: needs >= {need} "
                f"(2*pairs table + {self.slot_width}*pairs queries + {self.gap_unit} + shift "
                f"{self.shift})"
            )

    def to_dict(self, name: str = "haystack") -> dict[str, Any]:
        return {"name": name, **asdict(self)}


def _gap_limit(cfg: HaystackConfig, signal: Signal | None) -> int | None:
    """The largest gap a batch under ``signal`` may draw (None: every row at G_max)."""
    if signal is None or signal.gap is None:
        return None
    f = float(signal.gap)
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"signal.gap must be a fraction in [0, 1], got {signal.gap}")
    return int(round(f * cfg.full_gap))


def generate(
    cfg: HaystackConfig, n: int, rng: np.random.Generator, signal: Signal | None = None
) -> Batch:
    """Draw ``n`` independent sequences from ``rng`` (vectorised over rows; int64); the gap
    is of the kind ``cfg.distractors`` names."""
    P, L, w, u, g_max = cfg.pairs, cfg.seq_len, cfg.slot_width, cfg.gap_unit, cfg.full_gap
    NK, V = cfg.n_keys, cfg.n_values
    perm = np.argsort(rng.random((n, NK)), axis=1)  # a uniform key permutation per row
    keys = perm[:, :P]
    values = NK + rng.integers(0, V, size=(n, P))
    order = np.argsort(rng.random((n, P)), axis=1)  # which table pair each query slot asks
    limit = _gap_limit(cfg, signal)
    if limit is None:
        gaps = np.full(n, g_max, dtype=np.int64)
    else:
        gaps = rng.integers(0, limit + 1, size=n)
    used = 2 * P + u * gaps + w * P
    if cfg.layout == "shifting":
        lead = rng.integers(0, L - used + 1)
    else:
        lead = np.zeros(n, dtype=np.int64)

    tokens = np.full((n, L), cfg.pad_id, dtype=np.int64)
    targets = np.full((n, L), IGNORE, dtype=np.int64)
    rows = np.arange(n)[:, None]
    s = lead[:, None]
    i = np.arange(P)[None, :]
    tokens[rows, s + 2 * i] = keys
    tokens[rows, s + 2 * i + 1] = values
    j = np.arange(g_max)[None, :]
    live = j < gaps[:, None]
    at = np.broadcast_to(s + 2 * P + u * j, (n, g_max))[live]
    who = np.broadcast_to(rows, (n, g_max))[live]
    if cfg.distractors == "filler":
        filler = cfg.filler_base + rng.integers(0, cfg.n_filler, size=(n, g_max))
        tokens[who, at] = filler[live]
    else:
        pool = perm[:, P:] if cfg.distractors == "pairs" else keys
        pick = rng.integers(0, pool.shape[1], size=(n, g_max))
        d_keys = np.take_along_axis(pool, pick, axis=1)
        d_values = NK + rng.integers(0, V, size=(n, g_max))
        tokens[who, at] = d_keys[live]
        tokens[who, at + 1] = d_values[live]
    key_pos = s + 2 * P + u * gaps[:, None] + w * i
    tokens[rows, key_pos] = np.take_along_axis(keys, order, axis=1)
    answer_pos = key_pos + (w - 1)
    if cfg.answer == "mask":
        tokens[rows, answer_pos] = cfg.mask_id
    asked = np.take_along_axis(values, order, axis=1)
    if signal is not None and signal.dense:
        targets[rows, answer_pos] = asked
    else:
        targets[np.arange(n), answer_pos[:, -1]] = asked[:, -1]
    return Batch(tokens=tokens, targets=targets)


def heldout(cfg: HaystackConfig, n: int, seed: int = 0) -> Batch:
    """The held-out evaluation set: full gap, end-only, from the evaluation seed range."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


# --------------------------------------------------------------------------- oracle


def _walk(seq: list[int], tgt: list[int], cfg: HaystackConfig) -> list[str]:
    """Problems of one row, found by parsing it left to right (see `oracle_check`)."""
    L, P, w = cfg.seq_len, cfg.pairs, cfg.slot_width
    pad, mask = cfg.pad_id, cfg.mask_id
    is_key = lambda t: 0 <= t < cfg.n_keys
    is_value = lambda t: cfg.n_keys <= t < cfg.n_keys + cfg.n_values
    filler = cfg.distractors == "filler"
    is_filler = lambda t: filler and cfg.filler_base <= t < cfg.filler_base + cfg.n_filler

    def kind(t: int) -> str:
        if is_key(t):
            return "key"
        if is_value(t):
            return "value"
        if is_filler(t):
            return "filler"
        return {pad: "PAD", mask: "MASK"}.get(t, "unexpected")

    problems: list[str] = []
    i = 0
    while i < L and seq[i] == pad:  # the lead
        i += 1
    if cfg.layout == "fixed" and i:
        problems.append(f"{i} lead PAD tokens in the fixed layout")
    table: dict[int, int] = {}
    for p in range(P):
        if i + 1 >= L:
            return problems + [f"sequence ends inside the table (pair {p})"]
        k, v = seq[i], seq[i + 1]
        if not is_key(k) or not is_value(v):
            return problems + [f"table pair {p} at {i} is not (key, value): ({k}, {v})"]
        if k in table:
            problems.append(f"table key {k} stored twice (at {i})")
        else:
            table[k] = v
        i += 2
    gap = 0
    if filler:
        # the query region is the content's last w*P tokens; everything between the table
        # and it is the gap, which may hold filler tokens only
        end = max(t for t in range(L) if seq[t] != pad) + 1
        start = max(i, end - w * P)
        for t in range(i, start):
            if not is_filler(seq[t]):
                problems.append(f"{kind(seq[t])} token {seq[t]} at {t} inside the filler gap")
        gap, i = start - i, start
    else:
        while i + 1 < L and is_key(seq[i]) and is_value(seq[i + 1]):  # distractor pairs
            k = seq[i]
            if cfg.distractors == "pairs" and k in table:
                problems.append(f"distractor key {k} at {i} is a table key (pairs need fresh)")
            elif cfg.distractors == "reuse" and k not in table:
                problems.append(f"distractor key {k} at {i} is not a table key (collision reuses)")
            gap += 1
            i += 2
    if gap > cfg.full_gap:
        unit = "tokens" if filler else "pairs"
        problems.append(f"gap of {gap} {unit} exceeds the full gap {cfg.full_gap}")
    answers: dict[int, int] = {}  # answer position -> the key it asks
    while i < L and seq[i] != pad:  # the query region
        tok = seq[i]
        if is_key(tok) and cfg.answer == "key":
            answers[i] = tok
            i += 1
        elif is_key(tok) and i + 1 < L and seq[i + 1] == mask:
            answers[i + 1] = tok
            i += 2
        elif is_key(tok):
            problems.append(f"query key {tok} at {i} is not followed by MASK")
            i += 1
        else:  # a value, filler, MASK (without its key) or foreign token
            problems.append(f"{kind(tok)} token {tok} at {i} in the query region")
            i += 1
    asked: set[int] = set()
    for at, q in answers.items():
        if q not in table:
            problems.append(f"query at {at} asks {q}, not a table key")
        elif q in asked:
            problems.append(f"key {q} asked twice (again at {at})")
        asked.add(q)
    missing = sorted(set(table) - asked)
    if missing:
        problems.append(f"table keys {missing} never asked")
    stray = [t for t in range(i, L) if seq[t] != pad]
    if stray:
        problems.append(f"non-PAD token {seq[stray[0]]} at {stray[0]} after the query region")
    for t, y in enumerate(tgt):
        if y == IGNORE:
            continue
        if t not in answers:
            problems.append(f"target {y} at {t} is not at an answer position")
        elif table.get(answers[t]) != y:
            q = answers[t]
            problems.append(f"target {y} at {t}: the table binds {q} to {table.get(q)}")
    if answers and tgt[max(answers)] == IGNORE:
        problems.append(f"the last query's answer at {max(answers)} is not supervised")
    return problems


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: HaystackConfig) -> list[str]:
    """Re-derive every target from the token stream alone; return a list of problems.

    Written independently of `generate`: it walks each row left to right (lead PAD, P table
    pairs, the gap checked against ``cfg.distractors``, the query region, trailing PAD),
    answers each query from the table, and accepts any gap, lead and subset of supervised
    answers that includes the last query. A pairs gap is the run of (key, value) pairs after
    the table (fresh keys for "pairs", table keys for "reuse"); a filler gap is everything
    between the table and the content's last w*P tokens, and holds filler tokens only. Each
    problem names its row.
    """
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    if tokens.ndim != 2 or tokens.shape != targets.shape:
        return [f"batch: shape mismatch, tokens {tokens.shape} vs targets {targets.shape}"]
    problems: list[str] = []
    for r in range(tokens.shape[0]):
        seq, tgt = tokens[r].tolist(), targets[r].tolist()
        if len(seq) != cfg.seq_len:
            problems.append(f"row {r}: length {len(seq)} != task.seq_len={cfg.seq_len}")
            continue
        problems += [f"row {r}: {p}" for p in _walk(seq, tgt, cfg)]
    return problems


# --------------------------------------------------------------------------- floors


def floors(cfg: HaystackConfig) -> dict[str, float]:
    """Chance levels computed from the config, never typed in (the same for every kind).

    * value_marginal: guess a uniformly random value token, 1/n_values.
    * uniform_pair_no_binding: answer the value of a uniformly chosen table pair,
      1/P + (P-1)/(P V) (the collision paper's floor, about 0.264 at P=4, V=54).
    * best_no_binding: answer the most frequent table value, E[max count]/P.
    """
    return table_floors(cfg.pairs, cfg.n_values)


def table_floors(P: int, V: int) -> dict[str, float]:
    """The no-binding floors of a P-pair table over V value ids (`floors`' three)."""
    return {
        "value_marginal": 1.0 / V,
        "uniform_pair_no_binding": uniform_pair_hit(P, V),
        "best_no_binding": _expected_max_count(P, V) / P,
    }


# --------------------------------------------------------------------------- adapters


@register_task
class HaystackTask(ConfigTask):
    """Haystack adapter (filler or fresh-pair distractors, ``task.distractors``): batches
    are pure functions of (seed, step, signal); evaluation reads the held-out set the
    workflow wrote (``eval.npz``)."""

    name = "haystack"
    data = "stream"
    layout = "bars"
    signals = frozenset({"gap", "dense"})
    kinds: ClassVar[tuple[str, ...]] = ("filler", "pairs")  # the first is the default

    config_class = HaystackConfig
    functions = sys.modules[__name__]

    def __init__(self, cfg: HaystackConfig, data_dir: str | Path | None = None) -> None:
        self._check_kind(cfg.distractors)
        cfg.validate()
        super().__init__(cfg, data_dir)

    @classmethod
    def _check_kind(cls, distractors: str) -> None:
        if distractors not in cls.kinds:
            other = "collision" if distractors == "reuse" else "haystack"
            hint = f" (distractors {distractors!r} are the {other} task's)"
            raise ValueError(
                f"task.distractors must be one of {cls.kinds} for the {cls.name} task, got "
                f"{distractors!r}" + (hint if distractors in DISTRACTORS else "")
            )

    @classmethod
    def from_settings(
        cls, settings: dict[str, Any], data_dir: str | Path | None = None
    ) -> HaystackTask:
        settings = {"distractors": cls.kinds[0], **settings}  # the task's own kind by default
        cls._check_kind(settings["distractors"])
        return cls(config_of(HaystackConfig, settings), data_dir)

    def summary(self) -> str:
        c = self.cfg
        where = "query key" if c.answer == "key" else "MASK"
        gap = (
            f"filler gap of {c.full_gap} tokens"
            if c.distractors == "filler"
            else f"gap {c.full_gap} pairs"
        )
        return (
            f"{self.name}: {c.pairs} pairs, {c.n_values} values, L={c.seq_len} "
            f"({gap}), {c.layout} layout{f' (shift {c.shift})' if c.shift else ''}, "
            f"answer at {where}"
        )

    def evaluate(self, model: Any, examples: int | None = None) -> dict[str, Any]:
        """Held-out accuracy on the stored evaluation set (all of it; ``examples`` is the count
        the set was written with)."""
        from arbench.evaluate.recall import accuracy

        held_out = self.held_out()
        return accuracy(model, held_out.tokens, held_out.targets)


@register_task
class CollisionTask(HaystackTask):
    """Collision-keys adapter: distractors rebind the table's own keys to fresh values, and
    the answer stays the table's (first) binding. Its only kind is "reuse": a block that
    sets ``distractors`` to anything else is a ValueError naming ``task.distractors``."""

    name = "collision"
    kinds: ClassVar[tuple[str, ...]] = ("reuse",)
