"""Real-text recall: key -> successor bindings mined from an English corpus, as a stream task.

The pairs are facts of the language, not random draws: each key word's value is its most
frequent successor in the corpus, and the filler between the pairs is the corpus itself.
A model can therefore answer a stored pair from what it learned about the language, and
only the update pass (a key re-written with another pair's successor) tells in-context
binding from that prior (see `floors`).

Mining (deterministic; `mine`), from any plain-text English file (wikitext-103 included):
lowercase the text and split it on whitespace; the vocabulary is the ``vocab_words`` most
frequent words (ties by the word itself), word id = frequency rank; a bigram is two words
adjacent in the text, both in the vocabulary (an out-of-vocabulary word breaks adjacency);
a word's successor is its most frequent next word (ties: the lower id) when that bigram
occurs at least ``min_bigram`` times. The keys are the words whose frequency rank, among
the n words that have a successor, lies in ``[floor(rank_lo n), floor(rank_hi n))``, whose
successor is not the word itself and whose successor *word* occurs at least
``min_successor_count`` times in the corpus (the lattice protocol module's filter: on the
King James text at 4,093 words it keeps 3,153 keys, where a filter on the bigram's own count
kept 1,674). A key's weight is its corpus count to the power ``zipf_power``. The filler
stream is the corpus's vocabulary words, in order.

Token ids, with VS = ``vocab_words`` + 1:

* ``[0, VS)``: word ids (keys and filler); id ``VS - 1`` is reserved (never emitted);
* ``[VS, 2 VS)``: values, ``VS + successor id``;
* ``2 VS``: SEP; ``2 VS + 1``: reserved; the vocabulary is ``2 VS + 2``.

A row: P store blocks ``[f filler] k v`` with P distinct keys (drawn without replacement
by Gumbel top-k, then shuffled: training batches with the Zipf weights, or uniformly with
``zipf: false``; the held-out set uniformly unless ``eval_zipf``, as the protocol scores),
the filler of a batch one continuous passage of the corpus stream, at a random offset, read
on block after block and shared by every row of the batch (the protocol's single running
pointer; the held-out set is drawn in batches of `PASSAGE_ROWS` rows); an update
pass of M = round(P * overwrite) distinct stored keys re-written, each with the successor
of another stored pair (uniform over the stored pairs whose successor differs from the
key's own, so the value always changes); then Q distinct stored keys as ``k SEP``. The
answer, the key's latest value, is the target at the query KEY (``answer: "key"``, the
next-token convention) or at the SEP after it (``answer: "sep"``, as the lattice-recall task
reads it: a memory that reads before it writes then reads at the token after the key).

Mined tables are cached in memory, keyed by (corpus path, its sha256, mining settings), so
a corpus is mined once per process, never per batch.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arbench.tasks.base import IGNORE, Batch, ConfigTask, register_task, stream_rng
from arbench.tasks.lattice_recall import ANSWERS, WriteQueryLayout

PASSAGE_ROWS = 16  # held-out rows per filler passage (the paper-scale training batch)
MINING_KEYS = (
    "vocab_words",
    "min_bigram",
    "rank_lo",
    "rank_hi",
    "min_successor_count",
    "zipf_power",
)


@dataclass(frozen=True)
class RealTextConfig(WriteQueryLayout):
    """One real-text setting: the ``corpus`` file and its mining settings (module docstring),
    then the row: ``pairs`` (P), ``queries`` (0: P; capped at P), ``filler`` words before each
    write, the ``overwrite`` fraction re-written, and Zipf-weighted (``zipf``) or uniform keys
    in training and (``eval_zipf``) in the held-out set."""

    corpus: str = ""
    vocab_words: int = 4093
    min_bigram: int = 4
    rank_lo: float = 0.02
    rank_hi: float = 0.95
    min_successor_count: int = 10
    zipf_power: float = 0.75
    zipf: bool = True
    eval_zipf: bool = False
    pairs: int = 64
    queries: int = 0
    filler: int = 0
    overwrite: float = 0.0
    answer: str = "key"

    @property
    def word_span(self) -> int:
        """VS: the word ids, the vocabulary words plus one reserved id."""
        return self.vocab_words + 1

    @property
    def sep_id(self) -> int:
        return 2 * self.word_span

    @property
    def vocab_size(self) -> int:
        return 2 * self.word_span + 2

    def mining(self) -> dict[str, Any]:
        """The settings the mined tables depend on."""
        return {k: getattr(self, k) for k in MINING_KEYS}

    def validate(self) -> None:
        """Semantic checks; one-line ValueErrors naming the key. The corpus file itself is
        read at `mined` (a missing file, or pairs against the keys mined, fail there), so a
        config can name a corpus the workflow has yet to build (rules/corpus.smk)."""
        if not self.corpus:
            raise ValueError("task.corpus must name a plain-text corpus file")
        if self.vocab_words < 2:
            raise ValueError(f"task.vocab_words must be >= 2, got {self.vocab_words}")
        if self.vocab_size > 1 << 15:
            raise ValueError(
                f"task.vocab_words={self.vocab_words} gives {self.vocab_size} token ids, more "
                "than a 16-bit held-out set stores"
            )
        if self.min_bigram < 1:
            raise ValueError(f"task.min_bigram must be >= 1, got {self.min_bigram}")
        if self.min_successor_count < 1:
            raise ValueError(
                f"task.min_successor_count must be >= 1, got {self.min_successor_count}"
            )
        if not 0.0 <= self.rank_lo < self.rank_hi <= 1.0:
            raise ValueError(
                f"task.rank_lo={self.rank_lo} and task.rank_hi={self.rank_hi} must satisfy "
                "0 <= rank_lo < rank_hi <= 1"
            )
        if self.zipf_power < 0:
            raise ValueError(f"task.zipf_power must be >= 0, got {self.zipf_power}")
        if self.pairs < 1:
            raise ValueError(f"task.pairs must be >= 1, got {self.pairs}")
        if self.queries < 0:
            raise ValueError(f"task.queries must be >= 0 (0: all pairs), got {self.queries}")
        if self.filler < 0:
            raise ValueError(f"task.filler must be >= 0, got {self.filler}")
        if not 0.0 <= self.overwrite < 1.0:
            raise ValueError(f"task.overwrite must be in [0, 1), got {self.overwrite}")
        if self.answer not in ANSWERS:
            raise ValueError(f"task.answer must be one of {ANSWERS}, got {self.answer!r}")
        if self.n_updates and self.pairs < 2:
            raise ValueError(
                f"task.overwrite={self.overwrite} needs task.pairs >= 2 (another pair's value)"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"name": "realtext", **asdict(self)}


# --------------------------------------------------------------------------- mining


@dataclass(frozen=True)
class Mined:
    """The tables mined from one corpus: ``words[i]`` is word id i (frequency rank);
    ``counts``, ``successor`` (-1: none) and ``successor_count`` per word id; the ``keys``
    (word ids, ascending), their ``weights`` (count^zipf_power, summing to 1); the
    ``filler`` stream of word ids; the corpus's ``sha256``."""

    words: tuple[str, ...]
    counts: np.ndarray
    successor: np.ndarray
    successor_count: np.ndarray
    keys: np.ndarray
    weights: np.ndarray
    filler: np.ndarray
    sha256: str

    @property
    def key_successor(self) -> np.ndarray:
        return self.successor[self.keys]


def _quantile_index(fraction: float, n: int) -> int:
    """floor(fraction * n), robust to the float error of e.g. 0.95 * 20."""
    return int(math.floor(fraction * n + 1e-9))


def _read_stream(path: Path) -> tuple[list[str], np.ndarray]:
    """The corpus as (distinct words in order of first occurrence, id stream), lowercased
    and whitespace-split, read in chunks of whole lines so no word is cut in two."""
    index: dict[str, int] = {}
    parts: list[np.ndarray] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        while lines := fh.readlines(1 << 24):
            words = "".join(lines).lower().split()
            ids = (index.setdefault(w, len(index)) for w in words)
            parts.append(np.fromiter(ids, dtype=np.int32, count=len(words)))
    stream = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    return list(index), stream


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, read in 16 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def mine(
    path: str | Path,
    vocab_words: int = 4093,
    min_bigram: int = 4,
    rank_lo: float = 0.02,
    rank_hi: float = 0.95,
    min_successor_count: int = 10,
    zipf_power: float = 0.75,
    sha256: str | None = None,
) -> Mined:
    """Mine ``path`` (module docstring); deterministic, uncached (see `mined`)."""
    distinct, stream = _read_stream(Path(path))
    counts_all = np.bincount(stream, minlength=len(distinct))
    order = sorted(range(len(distinct)), key=lambda i: (-counts_all[i], distinct[i]))
    V = min(vocab_words, len(distinct))
    remap = np.full(len(distinct), -1, dtype=np.int32)  # int32: a 500 MB corpus stays small
    remap[order[:V]] = np.arange(V)
    ids = remap[stream]
    a, b = ids[:-1], ids[1:]
    both = (a >= 0) & (b >= 0)
    codes = a[both].astype(np.int64) * V + b[both]
    bigrams = np.bincount(codes, minlength=V * V).reshape(V, V)
    best = bigrams.argmax(axis=1)  # ties: the lower id, the more frequent word
    best_count = bigrams[np.arange(V), best]
    has = best_count >= min_bigram
    successor = np.where(has, best, -1)
    successor_count = np.where(has, best_count, 0)
    ranked = np.nonzero(has)[0]  # words with a successor, by frequency rank
    n = len(ranked)
    band = ranked[_quantile_index(rank_lo, n) : _quantile_index(rank_hi, n)]
    counts = counts_all[order[:V]]
    keep = (successor[band] != band) & (counts[successor[band]] >= min_successor_count)
    keys = band[keep]
    weights = counts[keys].astype(np.float64) ** zipf_power
    weights = weights / weights.sum() if len(keys) else weights
    return Mined(
        words=tuple(distinct[i] for i in order[:V]),
        counts=counts,
        successor=successor,
        successor_count=successor_count,
        keys=keys,
        weights=weights,
        filler=ids[ids >= 0].astype(np.int16),
        sha256=sha256 or file_sha256(path),
    )


_SHA: dict[tuple[str, int, int], str] = {}
_MINED: dict[tuple[Any, ...], Mined] = {}


def mined(cfg: RealTextConfig) -> Mined:
    """The mined tables of ``cfg``'s corpus, mined once per process: cached by (resolved
    path, sha256, mining settings); the sha256 itself is cached by (path, size, mtime), so
    a batch costs one stat of the file. Raises a one-line ValueError when the corpus
    yields fewer keys than ``task.pairs``."""
    path = Path(cfg.corpus).resolve()
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"task.corpus: cannot read {cfg.corpus!r} ({e.strerror})") from None
    stamp = (str(path), st.st_size, st.st_mtime_ns)
    if stamp not in _SHA:
        _SHA[stamp] = file_sha256(path)
    key = (str(path), _SHA[stamp], *sorted(cfg.mining().items()))
    if key not in _MINED:
        _MINED[key] = mine(path, **cfg.mining(), sha256=_SHA[stamp])
    tables = _MINED[key]
    if len(tables.keys) < cfg.pairs:
        raise ValueError(
            f"task.pairs={cfg.pairs} exceeds the {len(tables.keys)} keys mined from "
            f"task.corpus={cfg.corpus!r}"
        )
    need = cfg.filler * (cfg.pairs + cfg.n_updates)
    if need > len(tables.filler):
        raise ValueError(
            f"task.filler={cfg.filler}: a row's passage of {need} words exceeds the corpus's "
            f"{len(tables.filler)} words"
        )
    return tables


# --------------------------------------------------------------------------- generator


def draw_keys(
    weights: np.ndarray, n: int, k: int, rng: np.random.Generator, zipf: bool = True
) -> np.ndarray:
    """(n, k) indices into the keys: distinct per row, drawn without replacement with
    ``weights`` (Gumbel top-k), or uniformly when ``zipf`` is false; rows in random order."""
    logw = np.log(weights) if zipf else np.zeros(len(weights))
    score = logw[None, :] + rng.gumbel(size=(n, len(weights)))
    if k < len(weights):
        top = np.argpartition(-score, k - 1, axis=1)[:, :k]
    else:
        top = np.broadcast_to(np.arange(len(weights)), (n, len(weights)))
    return rng.permuted(top, axis=1)


def _other_pairs(succ: np.ndarray, chosen: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each (row, chosen stored index), another stored index of the row whose successor
    differs from the chosen one's, uniformly among those: rejection, then an exact draw for
    the few left."""
    n, P = succ.shape
    rows = np.arange(n)[:, None]
    own = succ[rows, chosen]
    donor = (chosen + 1 + rng.integers(0, P - 1, size=chosen.shape)) % P
    for _ in range(32):
        bad = succ[rows, donor] == own
        if not bad.any():
            return donor
        redraw = (chosen + 1 + rng.integers(0, P - 1, size=chosen.shape)) % P
        donor = np.where(bad, redraw, donor)
    for r, j in zip(*np.nonzero(succ[rows, donor] == own), strict=True):
        options = np.nonzero(succ[r] != own[r, j])[0]
        if not len(options):
            raise ValueError(
                "task.overwrite: every stored pair of a row has the same successor; raise "
                "task.pairs"
            )
        donor[r, j] = options[rng.integers(0, len(options))]
    return donor


def generate(
    cfg: RealTextConfig, n: int, rng: np.random.Generator, zipf: bool | None = None
) -> Batch:
    """Draw ``n`` rows (int64 tokens and targets, shape (n, cfg.length)) from ``rng``: one
    batch, its rows sharing one filler passage; keys Zipf-weighted when ``zipf`` (default:
    ``cfg.zipf``, the training setting), else uniform."""
    tables = mined(cfg)
    P, M, Q, f, B = cfg.pairs, cfg.n_updates, cfg.n_queries, cfg.filler, cfg.block
    VS, W = cfg.word_span, P + M
    rows = np.arange(n)[:, None]
    weighted = cfg.zipf if zipf is None else zipf
    keys = tables.keys[draw_keys(tables.weights, n, P, rng, weighted)]  # (n, P) word ids
    succ = tables.successor[keys]
    updated = rng.permuted(np.broadcast_to(np.arange(P), (n, P)), axis=1)[:, :M]
    donor = _other_pairs(succ, updated, rng) if M else updated
    write_keys = np.concatenate([keys, keys[rows, updated]], axis=1)
    values = VS + np.concatenate([succ, succ[rows, donor]], axis=1)

    blocks = np.empty((n, W, B), dtype=np.int64)
    if f:  # one passage of W f words, block after block, the same for every row
        start = int(rng.integers(0, len(tables.filler) - f * W + 1))
        blocks[:, :, :f] = tables.filler[start : start + f * W].reshape(W, f)
    blocks[:, :, f] = write_keys
    blocks[:, :, f + 1] = values

    latest = values[:, :P].copy()
    latest[rows, updated] = values[:, P:]
    asked = rng.permuted(np.broadcast_to(np.arange(P), (n, P)), axis=1)[:, :Q]
    query = np.empty((n, Q, 2), dtype=np.int64)
    query[:, :, 0] = keys[rows, asked]
    query[:, :, 1] = cfg.sep_id
    tokens = np.concatenate([blocks.reshape(n, -1), query.reshape(n, -1)], axis=1)
    targets = np.full(tokens.shape, IGNORE, dtype=np.int64)
    targets[rows, cfg.write_len + 2 * np.arange(Q) + cfg.answer_offset] = latest[rows, asked]
    keys_at = np.broadcast_to(np.arange(P) * B + f, (n, P)).copy()  # the store-pass keys
    return Batch(tokens=tokens, targets=targets, key_positions=keys_at)


def heldout(cfg: RealTextConfig, n: int, seed: int = 0) -> Batch:
    """The held-out evaluation set: drawn from the evaluation seed range in batches of
    `PASSAGE_ROWS` rows (each batch one filler passage), keys uniform unless
    ``cfg.eval_zipf`` (the protocol scores real text on uniformly drawn keys)."""
    rng = stream_rng(seed, 0, purpose=1)
    parts = [
        generate(cfg, min(PASSAGE_ROWS, n - i), rng, cfg.eval_zipf)
        for i in range(0, n, PASSAGE_ROWS)
    ]
    if not parts:
        return generate(cfg, 0, rng, cfg.eval_zipf)
    return Batch(
        tokens=np.concatenate([b.tokens for b in parts]),
        targets=np.concatenate([b.targets for b in parts]),
        key_positions=np.concatenate([b.key_positions for b in parts]),
    )


# --------------------------------------------------------------------------- oracle


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: RealTextConfig) -> list[str]:
    """Re-derive every target from the tokens and the mined successor table; return problems.

    Independent of `generate`: it cuts each row into write blocks and query slots by the
    layout, checks that filler slots hold vocabulary words that read, block after block, as
    one continuous passage of the corpus stream, that the store keys are distinct
    mined keys each written with ``VS + successor``, that the update pass re-writes distinct
    stored keys with a different value that is another stored key's successor, that the
    queries ask distinct stored keys, each followed by SEP, and answers each query at its
    key (or its SEP, ``answer: "sep"``) by replaying the writes in order (last write wins).
    Problems name their row.
    """
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    if tokens.shape != targets.shape:
        return [f"shape mismatch {tokens.shape} vs {targets.shape}"]
    if tokens.ndim != 2 or tokens.shape[1] != cfg.length:
        return [f"shape {tokens.shape}, expected (n, {cfg.length})"]
    tables = mined(cfg)
    P, f, VS, V = cfg.pairs, cfg.filler, cfg.word_span, len(tables.words)
    is_key = np.zeros(VS, dtype=bool)
    is_key[tables.keys] = True
    writes, slots = cfg.cut(tokens)
    problems: list[str] = []
    for r in range(len(tokens)):
        row: list[str] = []
        fill, wk, wv = writes[r, :, :f], writes[r, :, f], writes[r, :, f + 1]
        qk, qs = slots[r, :, 0], slots[r, :, 1]
        if ((fill < 0) | (fill >= V)).any():
            row.append("a filler slot holds a non-word")
        if ((wk < 0) | (wk >= VS)).any() or not is_key[np.clip(wk, 0, VS - 1)].all():
            row.append("a write block's key slot holds a word that is not a mined key")
        if ((wv < VS) | (wv >= VS + V)).any():
            row.append("a write block's value slot holds a non-value")
        if (qs != cfg.sep_id).any() or ((qk < 0) | (qk >= VS)).any():
            row.append("a query slot is not (key, SEP)")
        if row:
            problems += [f"row {r}: {p}" for p in row]
            continue
        if f and not _in_stream(fill.reshape(-1), tables.filler):
            row.append("the filler is not one continuous passage of the corpus")
        stored, upd = wk[:P], wk[P:]
        row += cfg.key_problems(wk, qk)
        if (wv[:P] != VS + tables.successor[stored]).any():
            row.append("a stored value is not its key's successor")
        if len(upd) and (wv[P:] == VS + tables.successor[upd]).any():
            row.append("an update re-writes a key with its own successor")
        if not np.isin(wv[P:], wv[:P]).all():
            row.append("an update's value is no stored pair's successor")
        row += cfg.replay_problems(wk, wv, qk, targets[r])
        problems += [f"row {r}: {p}" for p in row]
    return problems


def _in_stream(passage: np.ndarray, stream: np.ndarray) -> bool:
    """Whether ``passage`` occurs as a contiguous run of ``stream``: the offsets where its
    first word occurs, narrowed word by word while more than one is left, then compared
    whole."""
    n = len(passage)
    if n == 0:
        return True
    starts = np.flatnonzero(stream[: len(stream) - n + 1] == passage[0])
    j = 1
    while len(starts) > 1 and j < n:
        starts = starts[stream[starts + j] == passage[j]]
        j += 1
    return any(np.array_equal(stream[s : s + n], passage) for s in starts[:1])


# --------------------------------------------------------------------------- floors


def floors(cfg: RealTextConfig) -> dict[str, float]:
    """Chance levels computed from the settings.

    * value_marginal: a uniformly guessed value among the ``vocab_words`` value ids.
    * best_no_binding: a strategy that binds nothing in context but knows the language,
      answering a key's corpus successor. That is right for every untouched query. For an
      updated one (its key written twice, which key matching sees) it guesses among the M
      update-pass values, right at least 1/M of the time (more when successors repeat).
      A query is updated with probability M/P: (P - M)/P + (M/P)(1/M) = (P - M + 1)/P,
      and 1.0 with no updates: without an update pass the task is solvable from the prior.
    """
    P, M = cfg.pairs, cfg.n_updates
    return {
        "value_marginal": 1.0 / cfg.vocab_words,
        "best_no_binding": (P - M + 1) / P if M else 1.0,
    }


# --------------------------------------------------------------------------- adapter


@register_task
class RealTextTask(ConfigTask):
    """Real-text recall adapter: batches are pure functions of (seed, step) and the mined
    corpus; the evaluation splits accuracy into updated and untouched queries."""

    name = "realtext"
    data = "stream"
    layout = "bars"
    marks_keys = True
    config_class = RealTextConfig
    functions = sys.modules[__name__]

    def summary(self) -> str:
        c = self.cfg
        keys = "Zipf-weighted" if c.zipf else "uniform"
        if c.eval_zipf != c.zipf:
            keys += f" (held out: {'Zipf-weighted' if c.eval_zipf else 'uniform'})"
        return (
            f"{Path(c.corpus).name}: P={c.pairs} {keys} key->successor pairs, "
            f"{c.n_updates} updated, Q={c.n_queries}, filler {c.filler}, L={c.length}"
            + (", answer at SEP" if c.answer == "sep" else "")
        )

    def input_files(self) -> list[str]:
        """The corpus: the held-out set's job waits for the rule that builds it."""
        return [self.cfg.corpus]

    def train_shape(self, train: dict[str, Any]) -> tuple[int, int]:
        """The row's layout alone (the corpus, built by the workflow, need not exist yet)."""
        return self.cfg.length, self.cfg.n_queries

    def eval_shape(self, **options: Any) -> tuple[int, int]:
        return self.cfg.length, self.cfg.n_queries

    def eval_tokens(self, examples: int, **options: Any) -> int:
        """Held-out sequences times the row length, from the settings alone (planning a job
        must not need the corpus, which a rule may still have to build)."""
        return int(examples) * self.cfg.length

    def evaluate(
        self, model: Any, examples: int | None = None, batch_tokens: int = 1 << 18
    ) -> dict[str, Any]:
        """Held-out accuracy at the query keys, split into updated and untouched queries;
        ``batch_tokens``: tokens per forward pass (`recall.eval_rows`; memory, not scores)."""
        from arbench.evaluate import recall

        held = self.held_out()
        batch = recall.eval_rows(held.tokens.shape[1], batch_tokens)
        pred = recall.predict(model, held.tokens, held.targets, batch=batch)
        return scores(pred, held.tokens, held.targets, self.cfg)


def scores(pred: np.ndarray, tokens: np.ndarray, targets: np.ndarray, cfg: RealTextConfig) -> dict:
    """Accuracy over all queries and over the updated and the untouched ones."""
    info = cfg.query_info(tokens)
    rows = np.arange(len(tokens))[:, None]
    hit = np.asarray(pred)[rows, info.answer_pos] == np.asarray(targets)[rows, info.answer_pos]

    def mean(m: np.ndarray) -> float | None:
        return float(hit[m].mean()) if m.any() else None

    return {
        "accuracy": float(hit.mean()),
        "queries": int(hit.size),
        "accuracy_updated": mean(info.updated),
        "accuracy_untouched": mean(~info.updated),
        "updated_queries": int(info.updated.sum()),
    }
