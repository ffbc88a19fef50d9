"""The key-value retrieval benchmark (context-length generalization): data and oracle.

A sequence is a shuffled list of entries ``StartKey k_1..k_kd StartValue v_1..v_vd`` over a
12-token vocabulary (digits 0-9, StartKey = 10, StartValue = 11). It holds ``n`` distinct
keys, each written twice with the same value, and the entries are shuffled. The first
occurrence of a key is unpredictable; the model is scored on the value digits of the second
occurrence only, a pure in-context lookup. Targets follow the project convention
(`arbench.tasks.base`): ``targets[t]`` is the token the model must emit at position ``t``,
so the three value digits of a second occurrence are the targets at the StartValue token and
at the first two value digits.

Long-context mode draws 7-digit keys in *mutant clusters*: a base key and single-digit
mutants of it, at least ``mutant_j`` near-duplicates per cluster, so that matching a key
takes every digit; ``mutant_mix`` of the training sequences are drawn this way and the rest
plainly. Its accuracy-vs-context sweep scores the two kinds apart, several sequences of each
per length (`SWEEP_KINDS`), so a curve never mixes two distributions by chance.

Everything here is a pure function of the generator passed in.
"""

from __future__ import annotations

import resource
import sys
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from arbench.tasks.base import IGNORE, Batch, ConfigTask, Signal, register_task, stream_rng

DIGITS = 10
START_KEY = 10
START_VALUE = 11
VOCAB = 12


@dataclass(frozen=True)
class KVConfig:
    """One kvbench setting: keys per sequence, digits per key and value, and the mutant
    clusters of long-context mode (``mutant_j`` 0: none)."""

    n: int = 8
    key_digits: int = 3
    value_digits: int = 3
    mutant_j: int = 0
    mutant_mix: float = 0.0

    @property
    def entry_len(self) -> int:
        return 2 + self.key_digits + self.value_digits

    @property
    def length(self) -> int:
        """Tokens per sequence: 2n entries."""
        return 2 * self.n * self.entry_len

    @property
    def vocab_size(self) -> int:
        return VOCAB

    def validate(self) -> None:
        """Raise ValueError naming the key when the setting cannot be drawn."""
        if self.n < 1:
            raise ValueError(f"task.n must be >= 1, got {self.n}")
        if self.key_digits < 1 or self.value_digits < 1:
            raise ValueError("task.key_digits and task.value_digits must be >= 1")
        if self.n > DIGITS**self.key_digits:
            raise ValueError(
                f"task.n={self.n} exceeds the {DIGITS**self.key_digits} distinct "
                f"{self.key_digits}-digit keys"
            )
        if not 0.0 <= self.mutant_mix <= 1.0:
            raise ValueError(f"task.mutant_mix must be in [0, 1], got {self.mutant_mix}")
        if self.mutant_j < 0 or self.mutant_j > 1 + self.key_digits * (DIGITS - 1):
            raise ValueError(
                f"task.mutant_j={self.mutant_j}: a {self.key_digits}-digit key has "
                f"{self.key_digits * (DIGITS - 1)} single-digit mutants"
            )


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """Integers -> their ``width`` decimal digits, most significant first (..., width)."""
    powers = DIGITS ** np.arange(width - 1, -1, -1)
    return (values[..., None] // powers) % DIGITS


def _plain_keys(rng: np.random.Generator, n: int, width: int) -> np.ndarray:
    """``n`` distinct keys as integers below 10^width."""
    space = DIGITS**width
    if n * 4 < space:  # rejection is cheap while keys are sparse
        keys = np.unique(rng.integers(0, space, size=2 * n))
        while len(keys) < n:
            keys = np.unique(np.concatenate([keys, rng.integers(0, space, size=n)]))
        return rng.permutation(keys)[:n]
    return rng.permutation(space)[:n]


def _mutant_keys(rng: np.random.Generator, n: int, width: int, j: int) -> np.ndarray:
    """``n`` distinct keys in clusters: a base and at least ``j - 1`` single-digit mutants of
    it (clusters of ``j`` keys, the last one topped up to ``j`` from another base when n is
    not a multiple; fewer only when n < j)."""
    size = max(1, j)
    keys: list[int] = []
    seen: set[int] = set()
    place = DIGITS ** np.arange(width - 1, -1, -1)
    while len(keys) < n:
        base = int(rng.integers(0, DIGITS**width))
        if base in seen:
            continue
        cluster = [base]
        digits = _digits(np.array(base), width)
        # single-digit mutants: position p gets another digit
        options = [(p, d) for p in range(width) for d in range(DIGITS) if d != digits[p]]
        for i in rng.permutation(len(options))[: size - 1]:
            p, d = options[i]
            cluster.append(int(base + (d - digits[p]) * place[p]))
        for k in cluster:
            if k not in seen and len(keys) < n:
                seen.add(k)
                keys.append(k)
    return np.array(keys)


def generate(
    cfg: KVConfig, count: int, rng: np.random.Generator, signal: Signal | None = None
) -> Batch:
    """Draw ``count`` sequences (int64 tokens and targets, shape (count, cfg.length)); a
    signal's ``load`` (the load schedule's rung) replaces the number of keys ``n``."""
    if signal is not None and signal.load is not None:
        cfg = replace(cfg, n=signal.load)
        cfg.validate()
    n, kd, vd, e = cfg.n, cfg.key_digits, cfg.value_digits, cfg.entry_len
    tokens = np.empty((count, 2 * n, e), dtype=np.int64)
    targets = np.full((count, 2 * n, e), IGNORE, dtype=np.int64)
    for row in range(count):
        mutant = cfg.mutant_j > 0 and rng.random() < cfg.mutant_mix
        keys = _mutant_keys(rng, n, kd, cfg.mutant_j) if mutant else _plain_keys(rng, n, kd)
        values = rng.integers(0, DIGITS**vd, size=n)
        order = rng.permutation(2 * n) % n  # entry slot -> key index; each key twice
        entries = tokens[row]
        entries[:, 0] = START_KEY
        entries[:, 1 : 1 + kd] = _digits(keys[order], kd)
        entries[:, 1 + kd] = START_VALUE
        entries[:, 2 + kd :] = _digits(values[order], vd)
        second = np.zeros(2 * n, dtype=bool)
        seen = np.zeros(n, dtype=bool)
        for slot, k in enumerate(order):
            second[slot] = seen[k]
            seen[k] = True
        # the value digits of a second occurrence, each predicted one position earlier
        targets[row, second, 1 + kd : 1 + kd + vd] = entries[second, 2 + kd :]
    return Batch(tokens=tokens.reshape(count, -1), targets=targets.reshape(count, -1))


def heldout(cfg: KVConfig, n: int, seed: int = 0) -> Batch:
    """The held-out set, from the evaluation seed range (never a training batch's)."""
    return generate(cfg, n, stream_rng(seed, 0, purpose=1))


def floors(cfg: KVConfig) -> dict[str, float]:
    """Chance of an exact match by guessing every value digit: 10^-value_digits; with the
    key unread, naming one of the sequence's n values at random: 1/n."""
    return {"value_marginal": float(DIGITS**-cfg.value_digits), "best_no_binding": 1.0 / cfg.n}


def exact_match(pred: np.ndarray, targets: np.ndarray, cfg: KVConfig) -> np.ndarray:
    """Per second occurrence, whether every value digit was predicted: a flat boolean array
    over all second occurrences of the batch (``pred`` shaped like ``targets``)."""
    e = cfg.entry_len
    t = targets.reshape(targets.shape[0], -1, e)
    p = pred.reshape(pred.shape[0], -1, e)
    scored = t != IGNORE
    rows = scored.any(axis=2)
    hit = ((p == t) | ~scored).all(axis=2)
    return hit[rows]


# --------------------------------------------------------------------------- oracle


def oracle_check(tokens: np.ndarray, targets: np.ndarray, cfg: KVConfig) -> list[str]:
    """Re-derive every target from the tokens alone; return a list of problems.

    Independent of `generate`: it parses each sequence entry by entry, checks the layout,
    that every key occurs exactly twice with one value, and that exactly the second
    occurrence's value digits are labelled, each at the position before it.
    """
    problems: list[str] = []
    e, kd = cfg.entry_len, cfg.key_digits
    if tokens.shape != targets.shape or tokens.shape[1:] != (cfg.length,):
        return [f"shape {tokens.shape} / {targets.shape}, expected (count, {cfg.length})"]
    for r in range(tokens.shape[0]):
        seq, tgt = tokens[r].tolist(), targets[r].tolist()
        expected = [IGNORE] * len(seq)
        seen: dict[tuple[int, ...], tuple[int, ...]] = {}
        count: dict[tuple[int, ...], int] = {}
        for i in range(0, len(seq), e):
            ent = seq[i : i + e]
            if ent[0] != START_KEY or ent[1 + kd] != START_VALUE:
                problems.append(f"row {r}: entry at {i} is not StartKey ... StartValue ...")
                break
            key, value = tuple(ent[1 : 1 + kd]), tuple(ent[2 + kd :])
            if any(not 0 <= d < DIGITS for d in key + value):
                problems.append(f"row {r}: entry at {i} has a non-digit")
                break
            count[key] = count.get(key, 0) + 1
            if key in seen:
                if seen[key] != value:
                    problems.append(f"row {r}: key {key} has two values")
                for j, d in enumerate(value):  # value digit j is emitted one position earlier
                    expected[i + kd + 1 + j] = d
            seen[key] = value
        if len(count) != cfg.n or any(c != 2 for c in count.values()):
            problems.append(f"row {r}: {len(count)} keys, counts {sorted(set(count.values()))}")
        if expected != tgt:
            bad = [t for t in range(len(seq)) if expected[t] != tgt[t]]
            problems.append(f"row {r}: targets disagree with the oracle at {bad[:5]}")
    return problems


def mutant_clusters(tokens: np.ndarray, cfg: KVConfig) -> list[int]:
    """Per sequence, the size of the largest set of its keys within one digit of one key
    (the near-duplicates a lookup must tell apart)."""
    e, kd = cfg.entry_len, cfg.key_digits
    out = []
    for seq in tokens:
        keys = {tuple(seq[i + 1 : i + 1 + kd]) for i in range(0, len(seq), e)}
        arr = np.array(sorted(keys))
        near = (arr[:, None, :] != arr[None, :, :]).sum(axis=2) <= 1
        out.append(int(near.sum(axis=1).max()))
    return out


# --------------------------------------------------------------------------- evaluation


# the sweep's sequence kinds of a mutant-cluster task: each kind's mutant_mix and its seed
# stream (the evaluation range, stream (n, index) per kind; a task without mutant clusters
# keeps its one set on stream (n, 0))
SWEEP_KINDS = {"mutant": (1.0, 1), "plain": (0.0, 2)}


def sweep_kinds(cfg: KVConfig) -> tuple[str, ...]:
    """The kinds the sweep scores apart: "mutant" and "plain" where the task draws mutant
    clusters (``mutant_j`` > 0), else none (one set, drawn as the task draws)."""
    return tuple(SWEEP_KINDS) if cfg.mutant_j > 0 else ()


def sweep_set(
    cfg: KVConfig, n: int, examples: int, kind: str | None = None
) -> tuple[KVConfig, Batch]:
    """The held-out sequences at ``n`` keys (the evaluation seed range, one stream per n and
    kind, so adding a length or a kind to the sweep never changes another's set); ``kind``
    (`SWEEP_KINDS`) draws every sequence mutant or every one plain."""
    at = replace(cfg, n=n)
    stream = 0
    if kind is not None:
        if kind not in SWEEP_KINDS:
            raise ValueError(f"sweep kind must be one of {sorted(SWEEP_KINDS)}, got {kind!r}")
        mix, stream = SWEEP_KINDS[kind]
        at = replace(at, mutant_mix=mix)
    at.validate()
    return at, generate(at, examples, stream_rng(n, stream, purpose=1))


def index_set(cfg: KVConfig, entries: int, examples: int) -> tuple[KVConfig, Batch]:
    """The fixed sequences the per-index cross-entropy reads: ``entries`` entries each
    (entries / 2 keys, each twice), from their own seed range."""
    if entries < 2 or entries % 2:
        raise ValueError(f"eval index_entries must be an even number >= 2, got {entries}")
    at = replace(cfg, n=entries // 2)
    at.validate()
    return at, generate(at, examples, stream_rng(0, 0, purpose=3))


def peak_memory_mib(device: Any) -> float:
    """The peak memory so far: CUDA's allocator peak on a GPU, else the process's peak
    resident set (both MiB); a sweep run in ascending lengths reads each length's peak."""
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sweep_examples(cfg: KVConfig, n: int, examples: int, max_tokens: int | None) -> int:
    """Sequences read at ``n`` keys: ``examples``, capped so they hold at most
    ``max_tokens`` tokens (at least one sequence)."""
    if max_tokens is None:
        return int(examples)
    return max(1, min(int(examples), int(max_tokens) // replace(cfg, n=n).length))


def sweep(
    model: Any,
    cfg: KVConfig,
    ns: list[int],
    examples: int,
    batch_tokens: int = 1 << 16,
    tile: int = 4096,
    progress: Any = None,
    max_tokens: int | None = None,
    chunk: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Exact match at each number of keys in ``ns`` (ascending), ``examples`` sequences
    each (at most ``max_tokens`` tokens' worth, `sweep_examples`), batched to about
    ``batch_tokens`` tokens; every set passes the oracle first. A mutant-cluster task scores
    ``examples`` mutant and ``examples`` plain sequences apart (`sweep_kinds`): "kinds"
    gives each kind's exact match and each sequence's, "accuracy" pools both. Also the
    tokens read, seconds, tokens/s and peak memory at each length (every attention path is
    linear in memory; with ``chunk`` a sequence longer than it runs layer by layer,
    `arbench.models.kvbench.KVTransformer.hidden_chunked`)."""
    import torch

    from arbench.evaluate.recall import predict

    device = next(model.parameters()).device
    start_mib = peak_memory_mib(device)  # the model and the process before any sequence
    out: dict[str, dict[str, Any]] = {}
    options: dict[str, Any] = {"tile": tile} if chunk is None else {"tile": tile, "chunk": chunk}
    for n in sorted(set(ns)):
        count = sweep_examples(cfg, n, examples, max_tokens)
        if device.type == "cuda":  # each length's own peak
            torch.cuda.reset_peak_memory_stats(device)
        all_hits, kinds, seconds, tokens = [], {}, 0.0, 0
        for kind in sweep_kinds(cfg) or (None,):
            at, held = sweep_set(cfg, n, count, kind)
            problems = oracle_check(held.tokens, held.targets, at)
            if problems:
                raise RuntimeError(f"kvbench sweep set n={n} fails its oracle: {problems[0]}")
            rows = max(1, batch_tokens // at.length)
            t0 = time.perf_counter()
            pred = predict(model, held.tokens, held.targets, batch=rows, **options)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds += time.perf_counter() - t0
            hits = exact_match(pred, held.targets, at)
            all_hits.append(hits)
            tokens += int(held.tokens.size)
            if kind is not None:
                per_seq = hits.reshape(count, -1).mean(axis=1)  # n second occurrences each
                kinds[kind] = {
                    "accuracy": float(hits.mean()),
                    "second_occurrences": int(hits.size),
                    "examples": count,
                    "per_sequence": [float(a) for a in per_seq],
                }
        hits = np.concatenate(all_hits)
        out[f"n{n}"] = {
            "accuracy": float(hits.mean()),
            "second_occurrences": int(hits.size),
            "examples": count * max(1, len(kinds)),
            **({"kinds": kinds} if kinds else {}),
            "tokens": tokens,
            "length": at.length,
            "seconds": seconds,
            "tokens_per_s": tokens / max(seconds, 1e-9),
            "peak_mib": peak_memory_mib(device),
            "peak_above_start_mib": peak_memory_mib(device) - start_mib,
        }
        if progress:
            row = out[f"n{n}"]
            progress(
                f"n={n} ({at.length:,} tokens/sequence): exact match {row['accuracy']:.3f}, "
                f"{row['tokens_per_s']:,.0f} tokens/s, peak {row['peak_mib']:,.0f} MiB"
            )
    return out


def per_index_ce(model: Any, cfg: KVConfig, entries: int, examples: int) -> dict[str, Any]:
    """Mean cross-entropy of the value digits at each entry index of ``examples`` fixed
    ``entries``-entry sequences, split into first occurrences (unpredictable: log 10 per
    digit at best) and second occurrences (a lookup), NaN where an index has none."""
    import torch
    import torch.nn.functional as F

    at, held = index_set(cfg, entries, examples)
    device = next(model.parameters()).device
    e, kd, vd = at.entry_len, at.key_digits, at.value_digits
    model.eval()
    with torch.no_grad():
        tok = torch.from_numpy(held.tokens).to(device)
        logits = model.logits(model.hidden(tok)[0]).float()
        # value digit j of an entry is emitted at offset kd + 1 + j (one position earlier)
        pos = np.arange(entries)[:, None] * e + kd + 1 + np.arange(vd)[None, :]
        gold = torch.from_numpy(held.tokens[:, pos + 1]).to(device)  # (examples, entries, vd)
        picked = logits[:, torch.from_numpy(pos).to(device)]  # (examples, entries, vd, V)
        ce = F.cross_entropy(picked.permute(0, 3, 1, 2), gold, reduction="none").mean(-1)
    ce = ce.cpu().numpy()
    second = (held.targets.reshape(examples, entries, e) != IGNORE).any(axis=2)
    first_ce = np.where(~second, ce, np.nan)
    second_ce = np.where(second, ce, np.nan)
    with warnings.catch_warnings():  # an index without first (second) occurrences: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            "entries": entries,
            "examples": examples,
            "first": [None if np.isnan(v) else float(v) for v in np.nanmean(first_ce, axis=0)],
            "second": [None if np.isnan(v) else float(v) for v in np.nanmean(second_ce, axis=0)],
        }


# --------------------------------------------------------------------------- adapter


@register_task
class KVBenchTask(ConfigTask):
    """The key-value benchmark as a stream task: batches a pure function of (seed, step); the
    headline is exact match (all value digits) on second occurrences of the held-out set."""

    name = "kvbench"
    data = "stream"
    layout = "kvbench"
    signals = frozenset({"load"})
    config_class = KVConfig
    functions = sys.modules[__name__]

    def summary(self) -> str:
        c = self.cfg
        mutants = f", mutant clusters j={c.mutant_j} in {c.mutant_mix:g}" if c.mutant_j else ""
        return f"key-value lookup, n={c.n} keys ({c.length} tokens){mutants}"

    def evaluate(
        self,
        model: Any,
        examples: int | None = None,
        n: list[int] | None = None,
        lengths: list[int] | None = None,
        index_entries: int = 100,
        index_examples: int = 16,
        batch_tokens: int = 1 << 13,
        tile: int = 512,
        device: str = "cpu",
        max_tokens: int | None = None,
        chunk: int | None = None,
        progress: Any = None,
    ) -> dict[str, Any]:
        """Exact match over the held-out set's second occurrences (the headline, at the
        training n) and the per-digit rate; with ``n`` (keys) or ``lengths`` (tokens, each
        rounded down to whole entries) the accuracy-vs-context sweep, ``examples``
        sequences per length, at most ``max_tokens`` tokens' worth (`sweep`); and the
        per-index cross-entropy on fixed ``index_entries``-entry sequences (0: skipped).
        ``device`` "auto" evaluates on CUDA where it is visible (the long-context sweep);
        ``chunk`` runs sweep sequences longer than it layer by layer, ``chunk`` positions at
        a time (fp32 throughout; memory: `arbench.models.kvbench_memory.eval_bytes`)."""
        from arbench.device import resolve_device
        from arbench.evaluate.recall import predict

        model = model.to(resolve_device(device))

        held = self.held_out()
        if examples is not None:
            held = Batch(held.tokens[:examples], held.targets[:examples])
        pred = predict(model, held.tokens, held.targets, batch=64)
        hits = exact_match(pred, held.targets, self.cfg)
        scored = held.targets != IGNORE
        out: dict[str, Any] = {
            "accuracy": float(hits.mean()),
            "second_occurrences": int(hits.size),
            "digit_accuracy": float((pred == held.targets)[scored].mean()),
        }
        ns = list(n or []) + [self.n_for_length(t) for t in lengths or []]
        if ns:
            count = int(examples or len(held))
            out["per_config"] = sweep(
                model, self.cfg, ns, count, batch_tokens, tile, progress, max_tokens, chunk
            )
        if index_entries:
            out["per_index"] = per_index_ce(model, self.cfg, index_entries, index_examples)
        return out

    def sequence_length(self, signal: Signal | None = None) -> int:
        """Tokens per training sequence under ``signal`` (its load replaces n): what a token
        budget per step (``train.tokens_per_step``) divides."""
        n = self.cfg.n if signal is None or signal.load is None else signal.load
        return replace(self.cfg, n=n).length

    def train_shape(self, train: dict[str, Any]) -> tuple[int, int]:
        """The sequence at the load schedule's last rung (the task's own n without one), and
        its scored value digits, from the settings alone."""
        load = train.get("load")
        n = max(load["values"]) if load else self.cfg.n
        return replace(self.cfg, n=n).length, n * self.cfg.value_digits

    def eval_shape(self, **options: Any) -> tuple[int, int]:
        """The longest sequence the evaluation reads (the sweep's last length, else the
        held-out set's), and its scored value digits: what one evaluation holds at once."""
        ns = [self.cfg.n, *(options.get("n") or [])]
        ns += [self.n_for_length(t) for t in options.get("lengths") or []]
        at = replace(self.cfg, n=max(ns))
        return at.length, at.n * at.value_digits

    def n_for_length(self, tokens: int) -> int:
        """The number of keys whose sequence fills ``tokens`` (whole entries, at least 1)."""
        return max(1, int(tokens) // (2 * self.cfg.entry_len))

    def eval_tokens(self, examples: int, **options: Any) -> int:
        """The held-out set plus every sweep length, ``examples`` sequences each (of each
        kind, `sweep_kinds`)."""
        ns = list(options.get("n") or [])
        ns += [self.n_for_length(t) for t in options.get("lengths") or []]
        cap = options.get("max_tokens")
        kinds = max(1, len(sweep_kinds(self.cfg)))
        swept = kinds * sum(
            sweep_examples(self.cfg, k, examples, cap) * replace(self.cfg, n=k).length
            for k in set(ns)
        )
        return int(examples) * self.cfg.length + swept
