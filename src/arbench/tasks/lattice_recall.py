"""Lattice recall: associative-memory capacity and forgetting, as a stream task.

A row writes P key-value pairs, re-writes some of them, and then asks for the latest value
of Q stored keys. It measures how many bindings a model holds (capacity, set by P) and
whether a re-write replaces the old binding (forgetting, set by the overwrite fraction).

Token ids: keys ``[0, NK)``, values ``[NK, NK + NV)``, one unused id ``NK + NV``, and SEP
``NK + NV + 1``; the vocabulary is ``NK + NV + 2`` (NK = NV = 16,384 by default). A row is
three passes, every block of the first two of the same width ``f + 2``:

* store: P blocks ``[f filler] k_i v_i`` with P distinct keys (filler f = 0 is dense MQAR;
  filler ids are drawn uniformly from the keys *not* stored in the row, so a filler token
  is never mistaken for a write);
* update: M = round(P * overwrite) of the stored keys (distinct, in random order) written
  again, ``[f filler] k v``, with a new value. Every value of a row is distinct, so an
  updated key's new value differs from its old one, and the answer is the last write;
* query: Q distinct stored keys, each as ``k SEP``. The answer (the key's latest value) is
  the target at SEP (``answer: "sep"``) or at the query key itself (``answer: "key"``, the
  next-token convention the real-text task uses). Nothing else is supervised.

Queries are drawn uniformly from the stored keys (``strata: 0``) or depth-stratified
(``strata: S > 0``): Q/S queries from each of S equal slices of the store order, shuffled
together, so accuracy can be reported by depth. A query's stratum is that of its key's
first (store-pass) write. Which queries asked an updated key, and their strata, are read
back from the tokens alone (`WriteQueryLayout.query_info`), for the evaluation and the oracle alike.

Targets follow the project convention (`arbench.tasks.base`): ``targets[t]`` is the token
the model must emit at position ``t``, IGNORE elsewhere. Every draw comes from the
generator passed in; the generator is vectorised over pairs (a loop over rows at most).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from arbench.tasks.base import (
    IGNORE,
    Batch,
    ConfigTask,
    register_task,
    stream_rng,
)

ANSWERS = ("sep", "key")
# which accuracy an evaluation reports as its headline "accuracy" (eval.headline)
Headline = Literal["all", "updated", "untouched"]


class WriteQueryLayout:
    """The layout a config with ``pairs``, ``queries``, ``filler``, ``overwrite`` and
    ``answer`` shares (lattice_recall and realtext): P store blocks ``[f filler] k v``, M
    update blocks, then Q query slots ``k SEP``, the answer read at ``answer_offset``."""

    strata: int = 0  # depth strata of the store pass (0: none); a config may declare its own

    @property
    def n_updates(self) -> int:
        """M = round(P * overwrite), the re-written keys."""
        return int(round(self.pairs * self.overwrite))

    @property
    def n_queries(self) -> int:
        """Q: ``queries`` (P when 0), capped at P."""
        return min(self.queries or self.pairs, self.pairs)

    @property
    def block(self) -> int:
        """Tokens per write block, ``[f filler] k v``."""
        return self.filler + 2

    @property
    def write_len(self) -> int:
        """Tokens of the store and update passes together."""
        return (self.pairs + self.n_updates) * self.block

    @property
    def length(self) -> int:
        return self.write_len + 2 * self.n_queries

    @property
    def answer_offset(self) -> int:
        """Where in a query slot ``k SEP`` the answer is read: 1 (SEP) or 0 (the key)."""
        return 1 if self.answer == "sep" else 0

    def query_info(self, tokens: np.ndarray) -> QueryInfo:
        """`QueryInfo` of rows in this layout: keys are read at their block slots, so filler
        tokens never count (the real-text task's filler is natural text, which holds key words
        too); a key written twice is ``updated``; strata split the store pass by depth."""
        tokens = np.asarray(tokens)
        n, B, start = len(tokens), self.block, self.write_len
        write_keys = tokens[:, self.filler : start : B]
        qkeys = tokens[:, start : start + 2 * self.n_queries : 2]
        updated = np.zeros(qkeys.shape, dtype=bool)
        store = np.full(qkeys.shape, -1, dtype=np.int64)
        for r in range(n):
            uniq, first, count = np.unique(write_keys[r], return_index=True, return_counts=True)
            at = np.minimum(np.searchsorted(uniq, qkeys[r]), len(uniq) - 1)
            found = uniq[at] == qkeys[r]
            updated[r] = found & (count[at] >= 2)
            store[r] = np.where(found, first[at], -1)
        stratum = np.full(qkeys.shape, -1, dtype=np.int64)
        if self.strata:
            stratum = np.where(store >= 0, store * self.strata // self.pairs, -1)
        slots = start + 2 * np.arange(self.n_queries) + self.answer_offset
        answer_pos = np.broadcast_to(slots, qkeys.shape).copy()
        return QueryInfo(qkeys, answer_pos, updated, store, stratum)

    def cut(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """An oracle's view of rows (n, length): write blocks (n, P + M, block) and query
        slots (n, Q, 2), cut by the layout alone."""
        n, start = len(tokens), self.write_len
        writes = tokens[:, :start].reshape(n, self.pairs + self.n_updates, self.block)
        return writes, tokens[:, start:].reshape(n, self.n_queries, 2)

    def key_problems(self, keys: np.ndarray, queried: np.ndarray) -> list[str]:
        """One row's key checks, given its write keys (store pass, then update pass) and its
        query keys: distinct stored keys, distinct updates of stored keys, distinct queries of
        stored keys."""
        P, M, Q = self.pairs, self.n_updates, self.n_queries
        stored, updated = keys[:P], keys[P:]
        checks = (
            (len(np.unique(stored)) != P, "a key is stored twice"),
            (len(np.unique(updated)) != M, "a key is updated twice"),
            (
                not np.isin(updated, stored).all(),
                "the update pass writes a key that was never stored",
            ),
            (not np.isin(queried, stored).all(), "a query asks a key that was never stored"),
            (len(np.unique(queried)) != Q, "a key is queried twice"),
        )
        return [what for bad, what in checks if bad]

    def replay_problems(
        self, keys: np.ndarray, values: np.ndarray, queried: np.ndarray, targets: np.ndarray
    ) -> list[str]:
        """One row's targets re-derived by replaying its writes in order (last write wins) and
        compared with ``targets``: the disagreeing positions, or nothing."""
        latest = dict(zip(keys.tolist(), values.tolist(), strict=True))  # later writes win
        expected = np.full(self.length, IGNORE, dtype=np.int64)
        at = self.write_len + 2 * np.arange(self.n_queries) + self.answer_offset
        expected[at] = [latest.get(k, -1) for k in queried.tolist()]
        bad = np.nonzero(expected != targets)[0]
        if len(bad):
            return [f"targets disagree with the oracle at positions {bad[:5].tolist()}"]
        return []


@dataclass(frozen=True)
class LatticeConfig(WriteQueryLayout):
    """One lattice-recall setting: ``pairs`` (P) stored, ``queries`` asked (0: P; capped at
    P), ``filler`` tokens before each write, the ``overwrite`` fraction re-written, the key
    and value vocabularies, where the answer is read, and the depth ``strata`` (0: none)."""

    pairs: int = 256
    queries: int = 0
    filler: int = 0
    overwrite: float = 0.0
    n_keys: int = 16384
    n_values: int = 16384
    answer: str = "sep"
    strata: int = 0

    @property
    def unused_id(self) -> int:
        return self.n_keys + self.n_values

    @property
    def sep_id(self) -> int:
        return self.n_keys + self.n_values + 1

    @property
    def vocab_size(self) -> int:
        return self.n_keys + self.n_values + 2

    def validate(self) -> None:
        """Semantic checks a schema cannot express; one-line ValueErrors naming the key."""
        if self.pairs < 1:
            raise ValueError(f"task.pairs must be >= 1, got {self.pairs}")
        if self.n_keys < 1 or self.n_values < 1:
            raise ValueError(
                f"task.n_keys and task.n_values must be >= 1, got {self.n_keys}, {self.n_values}"
            )
        if self.pairs > self.n_keys:
            raise ValueError(
                f"task.pairs={self.pairs} exceeds the key vocabulary task.n_keys={self.n_keys}"
            )
        if self.queries < 0:
            raise ValueError(f"task.queries must be >= 0 (0: all pairs), got {self.queries}")
        if self.filler < 0:
            raise ValueError(f"task.filler must be >= 0, got {self.filler}")
        if self.filler > 0 and self.pairs >= self.n_keys:
            raise ValueError(
                f"task.filler={self.filler} needs keys that are not stored, but task.pairs="
                f"{self.pairs} uses all task.n_keys={self.n_keys}"
            )
        if not 0.0 <= self.overwrite < 1.0:
            raise ValueError(f"task.overwrite must be in [0, 1), got {self.overwrite}")
        if self.pairs + self.n_updates > self.n_values:
            raise ValueError(
                f"task.pairs={self.pairs} plus {self.n_updates} updates (task.overwrite="
                f"{self.overwrite}) need that many distinct values, more than task.n_values="
                f"{self.n_values}"
            )
        if self.answer not in ANSWERS:
            raise ValueError(f"task.answer must be one of {ANSWERS}, got {self.answer!r}")
        if self.strata < 0:
            raise ValueError(f"task.strata must be >= 0 (0: uniform queries), got {self.strata}")
        if self.strata and (self.pairs % self.strata or self.n_queries % self.strata):
            raise ValueError(
                f"task.strata={self.strata} must divide both task.pairs={self.pairs} and the "
                f"{self.n_queries} queries (task.queries)"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"name": "lattice_recall", **asdict(self)}


# --------------------------------------------------------------------------- generator


def _distinct(rng: np.random.Generator, n: int, space: int) -> np.ndarray:
    """(n, space): an independent uniform permutation of ``range(space)`` per row."""
    return rng.permuted(np.broadcast_to(np.arange(space), (n, space)), axis=1)


def query_indices(cfg: LatticeConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, Q) store indices of the asked keys: distinct, uniform over the P stored (strata 0)
    or Q/S from each of the S equal slices of the store order, in random order."""
    P, Q = cfg.pairs, cfg.n_queries
    if not cfg.strata:
        return _distinct(rng, n, P)[:, :Q]
    S = cfg.strata
    size, per = P // S, Q // S
    within = rng.permuted(np.broadcast_to(np.arange(size), (n, S, size)), axis=2)[:, :, :per]
    picked = (within + size * np.arange(S)[None, :, None]).reshape(n, Q)
    return rng.permuted(picked, axis=1)


def generate(cfg: LatticeConfig, n: int, rng: np.random.Generator) -> Batch:
    """Draw ``n`` rows (int64 tokens and targets, shape (n, cfg.length)) from ``rng``."""
    P, M, Q, f, B = cfg.pairs, cfg.n_updates, cfg.n_queries, cfg.filler, cfg.block
    W = P + M
    rows = np.arange(n)[:, None]
    key_perm = _distinct(rng, n, cfg.n_keys)
    keys, unstored = key_perm[:, :P], key_perm[:, P:]
    values = cfg.n_keys + _distinct(rng, n, cfg.n_values)[:, :W]  # all distinct in a row
    updated = _distinct(rng, n, P)[:, :M]  # store indices re-written, in update order

    write_keys = np.concatenate([keys, keys[rows, updated]], axis=1)  # (n, W)
    blocks = np.empty((n, W, B), dtype=np.int64)
    if f:
        pick = rng.integers(0, unstored.shape[1], size=(n, W * f))
        blocks[:, :, :f] = unstored[rows, pick].reshape(n, W, f)
    blocks[:, :, f] = write_keys
    blocks[:, :, f + 1] = values

    latest = values[:, :P].copy()  # last write wins
    latest[rows, updated] = values[:, P:]
    asked = query_indices(cfg, n, rng)
    query = np.empty((n, Q, 2), dtype=np.int64)
    query[:, :, 0] = keys[rows, asked]
    query[:, :, 1] = cfg.sep_id

    tokens = np.concatenate([blocks.reshape(n, -1), query.reshape(n, -1)], axis=1)
    targets = np.full(tokens.shape, IGNORE, dtype=np.int64)
    targets[rows, cfg.write_len + 2 * np.arange(Q) + cfg.answer_offset] = latest[rows, asked]
    return Batch(tokens=tokens, targets=targets, key_positions=key_positions(cfg, n))


def key_positions(cfg: LatticeConfig, n: int) -> np.ndarray:
    """(n, P) the positions of the P store-pass key tokens (block i's ``k`` at ``i B + f``):
    where the address-spread regulariser reads the key write addresses."""
    return np.broadcast_to(np.arange(cfg.pairs) * cfg.block + cfg.filler, (n, cfg.pairs)).copy()


def heldout(cfg: LatticeConfig, n: int, seed: int = 0) -> Batch:
    """The held-out evaluation set: drawn from the evaluation seed range."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


# --------------------------------------------------------------------------- reading rows


@dataclass
class QueryInfo:
    """Per query (n, Q), read from the tokens: the asked key, where the answer is read,
    whether the key was written twice before the query pass (``updated``), the index of its
    first write among the write blocks (-1: never written) and its depth stratum (-1: no
    strata)."""

    key: np.ndarray
    answer_pos: np.ndarray
    updated: np.ndarray
    store_index: np.ndarray
    stratum: np.ndarray


# --------------------------------------------------------------------------- oracle


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: LatticeConfig) -> list[str]:
    """Re-derive every target from the tokens alone; return a list of problems.

    Independent of `generate`: it cuts each row into its write blocks and query slots by
    the layout the settings fix, checks every slot holds the right kind of token, that the
    store keys are distinct, that the update pass re-writes distinct stored keys, that every
    value is distinct, that filler never uses a stored key, that the queries ask distinct
    stored keys (Q/S per stratum with strata), and answers each query by replaying the
    writes in order (last write wins). Problems name their row.
    """
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    if tokens.shape != targets.shape:
        return [f"shape mismatch {tokens.shape} vs {targets.shape}"]
    if tokens.ndim != 2 or tokens.shape[1] != cfg.length:
        return [f"shape {tokens.shape}, expected (n, {cfg.length})"]
    P, M, Q, f = cfg.pairs, cfg.n_updates, cfg.n_queries, cfg.filler
    NK, NV = cfg.n_keys, cfg.n_values
    writes, slots = cfg.cut(tokens)
    info = cfg.query_info(tokens)
    problems: list[str] = []
    for r in range(len(tokens)):
        row: list[str] = []
        fill, wk, wv = writes[r, :, :f], writes[r, :, f], writes[r, :, f + 1]
        qk, qs = slots[r, :, 0], slots[r, :, 1]
        if ((wk < 0) | (wk >= NK)).any() or ((fill < 0) | (fill >= NK)).any():
            row.append("a write block's key or filler slot holds a non-key")
        if ((wv < NK) | (wv >= NK + NV)).any():
            row.append("a write block's value slot holds a non-value")
        if (qs != cfg.sep_id).any() or ((qk < 0) | (qk >= NK)).any():
            row.append("a query slot is not (key, SEP)")
        if row:
            problems += [f"row {r}: {p}" for p in row]
            continue
        row += cfg.key_problems(wk, qk)
        if len(np.unique(wv)) != P + M:
            row.append("a value is written twice")
        if f and np.isin(fill, wk[:P]).any():
            row.append("a filler token is a stored key")
        if cfg.strata and not row:
            per = np.bincount(info.stratum[r], minlength=cfg.strata)
            if (per != Q // cfg.strata).any():
                row.append(f"queries per stratum {per.tolist()}, expected {Q // cfg.strata}")
        row += cfg.replay_problems(wk, wv, qk, targets[r])
        problems += [f"row {r}: {p}" for p in row]
    return problems


# --------------------------------------------------------------------------- floors


def floors(cfg: LatticeConfig) -> dict[str, float]:
    """Chance levels computed from the settings.

    * value_marginal: a uniformly guessed value, 1/NV.
    * uniform_pair_no_binding: name one of the P + M values written in the row, uniformly
      (values are distinct): 1/(P + M).
    * best_no_binding: the best strategy that never binds a key to a value. It may still
      match keys with keys, so it can tell an updated query (its key was written twice)
      from an untouched one, and guess among the M update-pass values (1/M) or among the P
      store-pass values (1/P: which of them were overwritten it cannot know without
      binding). Updated keys are drawn uniformly, so a query is updated with probability
      M/P whatever the strata: (M/P)(1/M) + (1 - M/P)(1/P) = 1/P + (P - M)/P^2, and 1/P
      when nothing is updated.
    """
    P, M = cfg.pairs, cfg.n_updates
    best = 1.0 / P + (P - M) / P**2 if M else 1.0 / P
    return {
        "value_marginal": 1.0 / cfg.n_values,
        "uniform_pair_no_binding": 1.0 / (P + M),
        "best_no_binding": best,
    }


# --------------------------------------------------------------------------- adapter


def scores(pred: np.ndarray, tokens: np.ndarray, targets: np.ndarray, cfg: LatticeConfig) -> dict:
    """Accuracy of predictions ``pred`` (shaped like ``targets``), over all queries, over
    the updated and untouched ones, and per depth stratum when ``cfg.strata`` > 0."""
    info = cfg.query_info(tokens)
    rows = np.arange(len(tokens))[:, None]
    hit = np.asarray(pred)[rows, info.answer_pos] == np.asarray(targets)[rows, info.answer_pos]

    def mean(m: np.ndarray) -> float | None:
        return float(hit[m].mean()) if m.any() else None

    out: dict[str, Any] = {
        "accuracy": float(hit.mean()),
        "queries": int(hit.size),
        "accuracy_updated": mean(info.updated),
        "accuracy_untouched": mean(~info.updated),
        "updated_queries": int(info.updated.sum()),
    }
    for s in range(cfg.strata):
        out[f"accuracy_stratum_{s}"] = mean(info.stratum == s)
    return out


@register_task
class LatticeRecallTask(ConfigTask):
    """Capacity and forgetting adapter: batches are pure functions of (seed, step); the
    evaluation reads the held-out set the workflow wrote and splits accuracy by updated /
    untouched queries and by depth stratum."""

    name = "lattice_recall"
    data = "stream"
    layout = "bars"
    marks_keys = True
    config_class = LatticeConfig
    functions = sys.modules[__name__]

    def summary(self) -> str:
        c = self.cfg
        strata = f", {c.strata} depth strata" if c.strata else ""
        return (
            f"P={c.pairs} pairs, {c.n_updates} updated, Q={c.n_queries}, filler {c.filler}, "
            f"{c.n_keys} keys, {c.n_values} values, L={c.length}, answer at "
            f"{'SEP' if c.answer == 'sep' else 'query key'}{strata}"
        )

    def evaluate(
        self,
        model: Any,
        examples: int | None = None,
        headline: Headline = "all",
        batch_tokens: int = 1 << 18,
    ) -> dict[str, Any]:
        """Held-out accuracy (all of the stored set), split by updated / untouched queries
        and, with strata, by depth stratum (`scores`). ``headline`` (an eval option) picks
        which of them is "accuracy", the number tables and figures report: "updated" for the
        forgetting study; the accuracy over all queries is then also "accuracy_all".
        ``batch_tokens``: tokens per forward pass (`recall.eval_rows`; memory, not scores)."""
        from arbench.evaluate import recall

        held = self.held_out()
        batch = recall.eval_rows(held.tokens.shape[1], batch_tokens)
        pred = recall.predict(model, held.tokens, held.targets, batch=batch)
        return with_headline(scores(pred, held.tokens, held.targets, self.cfg), headline)


def with_headline(out: dict[str, Any], headline: str) -> dict[str, Any]:
    """``out`` (`scores`) with ``accuracy`` replaced by ``accuracy_<headline>`` (the overall
    figure kept as ``accuracy_all``); a ValueError naming eval.headline when no held-out query
    is of that kind (``updated`` with task.overwrite 0)."""
    if headline not in ("all", "updated", "untouched"):
        raise ValueError(f"eval.headline must be all, updated or untouched, got {headline!r}")
    if headline == "all":
        return out
    chosen = out[f"accuracy_{headline}"]
    if chosen is None:
        raise ValueError(
            f"eval.headline={headline}: no held-out query asks a {headline} key "
            "(task.overwrite sets how many keys are updated)"
        )
    return {**out, "accuracy_all": out["accuracy"], "accuracy": chosen}
