"""Publish passkey_swar in the Hugging Face layout: parquet shards, card, vocab, statistics.

Layout under one directory: ``data/n{N}/{split}-{i:05d}-of-{n:05d}.parquet`` (int16 list
columns), ``README.md`` with a YAML ``configs:`` block so ``load_dataset(dir, "n256")``
works offline, ``vocab.json``, ``stats.md``, and ``stats/n{N}/{split}.json`` sidecars (one
per generated split, written last, so a split is complete once its sidecar exists).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from arbench.io import atomic_write_text
from arbench.tasks.passkey_swar import oracle
from arbench.tasks.passkey_swar.generator import (
    ANSWER_TYPES,
    SPLIT_SEEDS,
    Params,
    example_seed,
    generate,
    generate_seeds,
    vocab,
)

SPLIT_ORDER = ("train", "validation", "test")
DEFAULT_EXAMPLES = {"train": 100_000, "validation": 1_000, "test": 1_000}
DEFAULT_SHARD_ROWS = 100_000
GAP_CAP = 32  # query-gap histogram: gaps >= GAP_CAP share the last bin
STAT_KEYS = (
    "config",
    "split",
    "examples",
    "mean_length",
    "queries_per_example",
    "valid",
    "expired",
    "stale_share_of_expired",
)

# the per-example products the standard errors need: t tokens, q queries, v valid, e expired,
# s stale answers of one example
MOMENT_KEYS = ("tt", "qq", "vv", "qv", "ee", "qe", "ss", "es")
SE_KEYS = ("mean_length", "queries_per_example", "valid", "expired", "stale_share_of_expired")

Progress = Callable[[str], None] | None


def stderr_progress(msg: str) -> None:
    """Progress line on stderr (stdout stays machine-readable)."""
    print(msg, file=sys.stderr, flush=True)


def config_name(N: int | str) -> str:
    """'n256' for 256 or 'n256'."""
    return N if isinstance(N, str) and N.startswith("n") else f"n{int(N)}"


def config_N(config: str | int) -> int:
    """256 for 'n256' or 256."""
    return int(str(config).lstrip("n"))


def _sort_key(cs: tuple[str, str]) -> tuple[int, int]:
    c, s = cs
    return config_N(c), SPLIT_ORDER.index(s) if s in SPLIT_ORDER else len(SPLIT_ORDER)


# --------------------------------------------------------------------------- statistics


class SplitStats:
    """Accumulates the card's statistics plus histograms from the oracle's parse."""

    def __init__(self, w: int = 16) -> None:
        self.w = w
        self.examples = self.tokens = self.queries = self.valid = 0
        self.expired = self.stale = self.writes = self.first_writes = 0
        self.rewrite_within_w = self.rewrite_gray = self.rewrite_beyond = 0
        self.rewrite_interval_sum = 0
        self.gap = np.zeros(GAP_CAP + 1, dtype=np.int64)
        self.valid_age = np.zeros(w + 1, dtype=np.int64)
        self.stale_age: dict[int, int] = {}  # upper bound 2^k of bucket (2^(k-1), 2^k]
        # per-example sums of squares and products, for each statistic's standard error
        self.moments: dict[str, float] = dict.fromkeys(MOMENT_KEYS, 0.0)

    def add(self, parsed: oracle.Parsed) -> None:
        """Fold one parsed batch in."""
        w = self.w
        self.examples += parsed.n_examples
        self.tokens += int(parsed.lengths.sum())
        self.queries += parsed.q_row.size
        null = parsed.q_expected == oracle.TOK["NULL"]
        self.valid += int((~null & (parsed.q_expected >= 0)).sum())
        self.expired += int(null.sum())
        stale = null & (parsed.q_age > 0)
        self.stale += int(stale.sum())
        self._add_moments(parsed, null, stale)
        self.gap += np.bincount(np.minimum(parsed.q_gap, GAP_CAP), minlength=GAP_CAP + 1)
        va = parsed.q_age[~null & (parsed.q_age > 0)]
        self.valid_age += np.bincount(np.minimum(va, w), minlength=w + 1)
        sa = parsed.q_age[stale]
        if sa.size:
            ub = 2 ** np.ceil(np.log2(sa)).astype(np.int64)
            for b, c in zip(*np.unique(ub, return_counts=True), strict=True):
                self.stale_age[int(b)] = self.stale_age.get(int(b), 0) + int(c)
        iv = parsed.w_interval
        self.writes += iv.size
        self.first_writes += int((iv < 0).sum())
        re = iv[iv > 0]
        self.rewrite_within_w += int((re <= w).sum())
        self.rewrite_gray += int(((re > w) & (re <= 2 * w)).sum())
        self.rewrite_beyond += int((re > 2 * w).sum())
        self.rewrite_interval_sum += int(re.sum())

    def _add_moments(self, parsed: oracle.Parsed, null: np.ndarray, stale: np.ndarray) -> None:
        """Fold in each example's tokens, queries, valid, expired and stale answers."""
        n = parsed.n_examples
        per = {
            "t": parsed.lengths.astype(float),
            "q": np.bincount(parsed.q_row, minlength=n).astype(float),
            "v": np.bincount(parsed.q_row, ~null & (parsed.q_expected >= 0), n).astype(float),
            "e": np.bincount(parsed.q_row, null, minlength=n).astype(float),
            "s": np.bincount(parsed.q_row, stale, minlength=n).astype(float),
        }
        for key in MOMENT_KEYS:
            a, b = key
            self.moments[key] += float(np.dot(per[a], per[b]))

    def standard_errors(self) -> dict[str, float]:
        """Each card statistic's standard error over examples: a mean's s/sqrt(n), a share's
        by linearising the ratio of per-example sums (the examples are the sampling unit;
        queries of one example are not independent). 0.0 where n < 2."""
        n, m = self.examples, self.moments
        if n < 2:
            return dict.fromkeys(SE_KEYS, 0.0)

        def mean_se(total: float, sq: float) -> float:
            var = max(sq - total * total / n, 0.0) / (n - 1)
            return math.sqrt(var / n)

        def ratio_se(y: str, x: str, ys: float, xs: float) -> float:
            if xs <= 0:
                return 0.0
            r = ys / xs
            cross = m[x + y] if x + y in m else m[y + x]
            sq = m[y + y] - 2 * r * cross + r * r * m[x + x]
            return math.sqrt(max(sq, 0.0) / (n * (n - 1))) / (xs / n)

        return {
            "mean_length": mean_se(self.tokens, m["tt"]),
            "queries_per_example": mean_se(self.queries, m["qq"]),
            "valid": ratio_se("v", "q", self.valid, self.queries),
            "expired": ratio_se("e", "q", self.expired, self.queries),
            "stale_share_of_expired": ratio_se("s", "e", self.stale, self.expired),
        }

    def summary(self) -> dict[str, Any]:
        """The card's columns plus histograms, JSON-ready."""
        ex, q = max(self.examples, 1), max(self.queries, 1)
        rewrites = self.writes - self.first_writes
        return {
            "examples": self.examples,
            "mean_length": self.tokens / ex,
            "queries_per_example": self.queries / ex,
            "valid": self.valid / q,
            "expired": self.expired / q,
            "stale_share_of_expired": self.stale / max(self.expired, 1),
            "standard_errors": self.standard_errors(),
            "counts": {
                "tokens": self.tokens,
                "queries": self.queries,
                "valid": self.valid,
                "expired": self.expired,
                "stale": self.stale,
                "never_written": self.expired - self.stale,
            },
            "query_gap_hist": {str(i): int(c) for i, c in enumerate(self.gap)},
            "valid_age_hist": {str(i): int(c) for i, c in enumerate(self.valid_age) if i},
            "stale_age_hist": {
                f"{b // 2 + 1}-{b}": self.stale_age[b] for b in sorted(self.stale_age)
            },
            "key_reuse": {
                "writes": self.writes,
                "distinct_keys_per_example": self.first_writes / ex,
                "writes_per_distinct_key": self.writes / max(self.first_writes, 1),
                "rewrite_share_age_le_w": self.rewrite_within_w / max(rewrites, 1),
                "rewrite_share_gray": self.rewrite_gray / max(rewrites, 1),
                "rewrite_share_age_gt_2w": self.rewrite_beyond / max(rewrites, 1),
                "mean_rewrite_interval": self.rewrite_interval_sum / max(rewrites, 1),
            },
        }


def stats_of_files(paths: Iterable[Path], w: int = 16) -> dict[str, Any]:
    """Statistics of parquet shards measured from their token streams."""
    import pyarrow.parquet as pq

    acc = SplitStats(w)
    for path in paths:
        rows = oracle.batch_rows_for(path.parent.name)
        for rb in pq.ParquetFile(path).iter_batches(batch_size=rows):
            acc.add(oracle.check_table(rb, w=w)[1])
    return acc.summary()


# --------------------------------------------------------------------------- writing


def _shard_name(split: str, i: int, n: int) -> str:
    return f"{split}-{i:05d}-of-{n:05d}.parquet"


def write_split(
    out_dir: str | Path,
    N: int,
    split: str,
    n_examples: int,
    params: Params | None = None,
    *,
    split_seeds: dict[str, int] | None = None,
    shard_rows: int = DEFAULT_SHARD_ROWS,
    progress: Progress = None,
) -> dict[str, Any]:
    """Generate one config/split into out_dir; returns (and writes) its stats sidecar.

    Shards go to a temporary folder first and replace the split's old shards by rename;
    the sidecar ``stats/n{N}/{split}.json`` is written last.
    """
    import pyarrow.parquet as pq

    if n_examples < 1 or shard_rows < 1:
        raise ValueError("n_examples and shard_rows must be >= 1")
    p = params or Params()
    seeds = split_seeds or SPLIT_SEEDS
    root, config = Path(out_dir), config_name(N)
    n_shards = max(1, -(-n_examples // shard_rows))
    tmp = root / f".tmp-{config}-{split}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    acc = SplitStats(p.w)
    row_group = max(1, 2_000_000 // (12 + 4 * N))
    writer, shard, in_shard, done = None, 0, 0, 0
    names = [_shard_name(split, i, n_shards) for i in range(n_shards)]
    for batch in generate(split, N, n_examples, p, split_seeds=seeds):
        table = batch.to_arrow()
        step = oracle.batch_rows_for(config)
        for a in range(0, table.num_rows, step):
            acc.add(oracle.check_table(table.slice(a, step), w=p.w)[1])
        pos = 0
        while pos < table.num_rows:
            if writer is None:
                writer = pq.ParquetWriter(tmp / names[shard], table.schema, compression="zstd")
            take = min(table.num_rows - pos, shard_rows - in_shard)
            writer.write_table(table.slice(pos, take), row_group_size=row_group)
            pos, in_shard = pos + take, in_shard + take
            if in_shard == shard_rows:
                writer.close()
                writer, shard, in_shard = None, shard + 1, 0
        done += len(batch)
        if progress:
            progress(f"{config}/{split}: {done}/{n_examples} examples")
    if writer is not None:
        writer.close()
    dest = root / "data" / config
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob(f"{split}-*.parquet"):
        old.unlink()
    for name in names:
        os.replace(tmp / name, dest / name)
    shutil.rmtree(tmp, ignore_errors=True)
    side = {
        "config": config,
        "split": split,
        "n_writes": N,
        "split_seed": seeds[split],
        "params": p.to_dict(),
        "shards": [f"data/{config}/{n}" for n in names],
        **acc.summary(),
    }
    atomic_write_text(root / "stats" / config / f"{split}.json", json.dumps(side, indent=1) + "\n")
    return side


def present_splits(out_dir: str | Path) -> list[tuple[str, str]]:
    """(config, split) pairs that have parquet shards, in card order."""
    pairs = {
        (p.parent.name, p.name.split("-", 1)[0]) for p in Path(out_dir).glob("data/*/*.parquet")
    }
    return sorted(pairs, key=_sort_key)


def load_stats(out_dir: str | Path, recompute: bool = False, w: int = 16) -> list[dict[str, Any]]:
    """Full statistics per config/split: the sidecar, or measured from the shards."""
    root = Path(out_dir)
    out = []
    for config, split in present_splits(root):
        sp = root / "stats" / config / f"{split}.json"
        if sp.exists() and not recompute:
            s = json.loads(sp.read_text())
        else:
            s = stats_of_files(sorted((root / "data" / config).glob(f"{split}-*.parquet")), w)
            s.update(config=config, split=split)
        out.append(s)
    return out


def stats_rows(out_dir: str | Path, recompute: bool = False) -> list[dict[str, Any]]:
    """The card's table as JSON rows (what the CLI's ``stats`` prints)."""
    return [{k: s[k] for k in STAT_KEYS} for s in load_stats(out_dir, recompute)]


def render_stats_md(stats: list[dict[str, Any]]) -> str:
    """stats.md: the summary table, then per-split histograms and key-reuse figures."""
    lines = [
        "# passkey_swar statistics",
        "",
        "Measured from the token streams by the oracle's parser.",
        "",
        "| config | split | examples | mean length | queries/ex | valid | expired |"
        " stale share of expired |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in stats:
        lines.append(
            f"| {s['config']} | {s['split']} | {s['examples']:,} | {s['mean_length']:.1f} | "
            f"{s['queries_per_example']:.2f} | {s['valid']:.3f} | {s['expired']:.3f} | "
            f"{s['stale_share_of_expired']:.3f} |"
        )
    lines += [
        "",
        "Query gap = writes between a query and the previous query of the same example "
        f"(first query: since the start; last bin is >= {GAP_CAP}). Ages count writes since the "
        "queried key's latest write. Stale = written, then idle for more than 2w writes.",
    ]
    for s in stats:
        kr = s["key_reuse"]
        lines += [
            "",
            f"## {s['config']} / {s['split']}",
            "",
            "query gap: " + _hist_line(s["query_gap_hist"]),
            "",
            "age of valid queries: " + _hist_line(s["valid_age_hist"]),
            "",
            "age of stale queries: " + (_hist_line(s["stale_age_hist"]) or "none"),
            "",
            f"key reuse: {kr['distinct_keys_per_example']:.2f} distinct keys per example, "
            f"{kr['writes_per_distinct_key']:.2f} writes per distinct key; of rewrites "
            f"{kr['rewrite_share_age_le_w']:.3f} come within w writes, "
            f"{kr['rewrite_share_gray']:.3f} in (w, 2w], {kr['rewrite_share_age_gt_2w']:.3f} "
            f"after > 2w; mean rewrite interval {kr['mean_rewrite_interval']:.1f} writes.",
        ]
    return "\n".join(lines) + "\n"


def _hist_line(h: dict[str, int]) -> str:
    total = max(sum(h.values()), 1)
    return ", ".join(f"{k}: {v / total:.3f}" for k, v in h.items() if v)


def render_readme(out_dir: str | Path, stats: list[dict[str, Any]]) -> str:
    """Dataset card with a YAML ``configs:`` block listing each n{N} and its splits."""
    by_cfg: dict[str, list[str]] = {}
    for config, split in present_splits(out_dir):
        by_cfg.setdefault(config, []).append(split)
    yaml = ["---", "pretty_name: passkey_swar", "configs:"]
    for config, splits in by_cfg.items():
        yaml += [f"- config_name: {config}", "  data_files:"]
        for split in splits:
            yaml += [f"  - split: {split}", f"    path: data/{config}/{split}-*.parquet"]
    yaml += ["---", ""]
    table = [
        "| config | split | examples | mean length | queries/ex | valid | expired | stale share |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in stats:
        table.append(
            f"| {s['config']} | {s['split']} | {s['examples']:,} | {s['mean_length']:.0f} | "
            f"{s['queries_per_example']:.1f} | {s['valid']:.3f} | {s['expired']:.3f} | "
            f"{s['stale_share_of_expired']:.3f} |"
        )
    body = f"""# passkey_swar

Synthetic sequences for fixed-state sequence models that pair an item to keep forever
with items to drop after a window. Each example opens with a 4-token passkey, runs a
stream of N key-value writes with queries mixed in, and closes by asking for the passkey.

Layout: `BOS PK p1 p2 p3 p4`, then N items `W k v` each followed by zero or more
`Q k a`, then `PKQ p1 p2 p3 p4 EOS`.

Answers: the age of a key is the number of writes since its latest write (the write
right before a query has age 1). A key of age at most w = 16 is answered with its latest
value (`ar_valid`); a key never written, or of age above 2w = 32, is answered with `NULL`
(`ar_expired`). Keys of age 17..32 are never asked.

Columns: `input_ids` (int16 list), `labels` (int16 list; -100 except each query's answer
and the four recalled passkey tokens, aligned so that labels[t] is the target at position
t), `answer_type` (one string per supervised position), `n_writes`, `seed` (int64;
split_seed * 10^12 + N * 10^6 + index, regenerates the example).

Vocabulary (`vocab.json`): PAD 0, BOS 1, EOS 2, PK 3, PKQ 4, W 5, Q 6, NULL 7, keys
k0..k15 = 8..23, values v0..v15 = 24..39.

## Statistics

{chr(10).join(table)}

Histograms and key-reuse figures: `stats.md`.

## Loading

```python
from datasets import load_dataset
ds = load_dataset("path/to/this/folder", "n256", split="validation")
```
"""
    return "\n".join(yaml) + body


def write_index(out_dir: str | Path, params: Params | None = None) -> list[dict[str, Any]]:
    """(Re)write README.md, vocab.json and stats.md from the splits present."""
    root = Path(out_dir)
    stats = load_stats(root, w=(params or Params()).w)
    atomic_write_text(root / "vocab.json", json.dumps(vocab(params), indent=2) + "\n")
    for name, text in (
        ("stats.md", render_stats_md(stats)),
        ("README.md", render_readme(root, stats)),
    ):
        atomic_write_text(root / name, text)
    return stats


def write_dataset(
    out_dir: str | Path,
    configs: Iterable[int | str],
    splits: Iterable[str],
    examples_per_split: dict[str, int] | int,
    params: Params | None = None,
    *,
    split_seeds: dict[str, int] | None = None,
    shard_rows: int = DEFAULT_SHARD_ROWS,
    progress: Progress = None,
) -> list[dict[str, Any]]:
    """Write every config x split, then the card, vocab and stats; returns the stats."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for c in configs:
        for split in splits:
            n = (
                examples_per_split
                if isinstance(examples_per_split, int)
                else examples_per_split[split]
            )
            write_split(
                out_dir,
                config_N(c),
                split,
                n,
                params,
                split_seeds=split_seeds,
                shard_rows=shard_rows,
                progress=progress,
            )
    return write_index(out_dir, params)


def _list_rows_differ(a: Any, b: Any) -> np.ndarray:
    """Per row: do two Arrow list columns of equal row count differ (length or any value)?"""
    import pyarrow as pa
    import pyarrow.compute as pc

    def flat(col: Any) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        off = col.offsets.to_numpy().astype(np.int64)
        values = col.flatten()
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            values = pc.index_in(values, value_set=pa.array(list(ANSWER_TYPES))).fill_null(-1)
        return values.to_numpy(zero_copy_only=False).astype(np.int64), off - off[0]

    av, ao = flat(a)
    bv, bo = flat(b)
    la, lb = np.diff(ao), np.diff(bo)
    differ = la != lb
    row = np.repeat(np.arange(len(la)), la)
    k = np.arange(len(av)) - ao[row]
    sel = ~differ[row]
    mism = av[sel] != bv[bo[row[sel]] + k[sel]]
    return differ | (np.bincount(row[sel], mism, minlength=len(la)) > 0)


class Regenerated:
    """The oracle's ``extra`` check: rebuild every example from its stored seed with the
    release's params and the N of its config folder, and compare every column. Also keeps
    the seeds seen per (config, split), for `seed_set_problems`."""

    def __init__(self, params: Params) -> None:
        self.params = params
        self.seeds: dict[tuple[str, str], list[np.ndarray]] = {}

    def __call__(self, config: str, split: str, batch: Any) -> list[list[str]]:
        seeds = np.asarray(batch.column("seed").to_numpy(), dtype=np.int64)
        self.seeds.setdefault((config, split), []).append(seeds.copy())
        reasons: list[list[str]] = [[] for _ in seeds]
        digits = config[1:] if config.startswith("n") else ""
        if not digits.isdigit() or not seeds.size:
            return reasons
        want = generate_seeds(seeds, int(digits), self.params).to_arrow()
        for name in ("input_ids", "labels", "answer_type"):
            for i in np.flatnonzero(_list_rows_differ(batch.column(name), want.column(name))):
                reasons[i].append(f"{name} differs from the example regenerated from its seed")
        stored = np.asarray(batch.column("n_writes").to_numpy(), dtype=np.int64)
        for i in np.flatnonzero(stored != int(digits)):
            reasons[i].append("n_writes differs from the example regenerated from its seed")
        return reasons


def seed_set_problems(
    seen: dict[tuple[str, str], list[np.ndarray]],
    planned: dict[tuple[str, str], int],
    split_seeds: dict[str, int],
    files: dict[tuple[str, str], list[str]] | None = None,
) -> list[str]:
    """Each planned (config, split) holds exactly the seeds split_seed*10^12 + N*10^6 + i for
    i < its example count, and nothing else is in the folder: one line per problem, naming
    the split's shards (``files``) when known."""
    out = []

    def named(config: str, split: str) -> str:
        paths = (files or {}).get((config, split))
        return f"{', '.join(paths)} ({config}/{split})" if paths else f"{config}/{split}"

    for (config, split), n in planned.items():
        got = np.concatenate(seen.get((config, split), [np.zeros(0, np.int64)]))
        first = example_seed(split_seeds[split], config_N(config), 0)
        want = np.arange(first, first + n, dtype=np.int64)
        if not got.size:
            out.append(f"{named(config, split)}: no examples read (the release plans {n})")
        elif got.size != n or not np.array_equal(np.unique(got), want):
            foreign = int(np.setdiff1d(got, want).size)
            missing = int(np.setdiff1d(want, got).size)
            out.append(
                f"{named(config, split)}: {got.size} examples ({foreign} seeds not of this split, "
                f"{missing} planned seeds missing); the release plans seeds "
                f"{first}..{first + n - 1}"
            )
    for config, split in sorted(set(seen) - set(planned), key=_sort_key):
        out.append(
            f"{named(config, split)}: not part of the release (it plans "
            f"{', '.join(f'{c}/{s}' for c, s in planned)}); delete data/{config}/{split}-*.parquet"
        )
    return out


def validate(
    out_dir: str | Path,
    params: Params | None = None,
    split_seeds: dict[str, int] | None = None,
    progress: Progress = None,
    planned: dict[tuple[str, str], int] | None = None,
) -> dict[str, Any]:
    """Run the oracle over the whole directory, regenerate every example from its seed and
    compare it, and (given ``planned``: examples per (config, split)) check each split holds
    exactly its planned seeds and nothing else is there; the report as a dict."""
    p = params or Params()
    seeds = split_seeds or SPLIT_SEEDS
    regen = Regenerated(p)
    report = oracle.validate_dir(out_dir, w=p.w, split_seeds=seeds, progress=progress, extra=regen)
    if planned is not None:
        files: dict[tuple[str, str], list[str]] = {}
        for entry in report.checked:
            files.setdefault((entry["config"], entry["split"]), []).append(entry["path"])
        report.errors += seed_set_problems(regen.seeds, planned, seeds, files)
    return report.to_dict()


# --------------------------------------------------------------------------- the workflow's view


def _int_list(minimum: int = 1) -> dict[str, Any]:
    return {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": minimum}}


def _per_split(minimum: int) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(SPLIT_ORDER),
        "additionalProperties": {"type": "integer", "minimum": minimum},
    }


class PasskeySwarRelease:
    """The release as the workflow drives it: every member of the `arbench.tasks.base.Release`
    protocol, which states the contract (``tests/tasks/test_release_protocol.py`` checks each
    one is here). One job per config/split, one job that writes the card, vocabulary and
    statistics, then one validation job whose only output is the oracle's report (so a failed
    validation deletes nothing of the release).

    Settings are the ``releases.<name>`` config block: ``params`` (the card's generation
    knobs), ``split_seeds``, ``train_configs``, ``eval_configs`` and ``examples`` per split.
    Each split is one shard, so the workflow can declare every file a split job writes.
    """

    # files one split job writes (besides its sidecar) and the index job writes, relative to
    # the release folder; {subset} and {split} are the job's wildcards
    split_files: tuple[str, ...] = ("data/{subset}/{split}-00000-of-00001.parquet",)
    index_files: tuple[str, ...] = ("README.md", "vocab.json", "stats.md")

    schema: dict[str, Any] = {
        "type": "object",
        "required": ["params", "split_seeds", "train_configs", "eval_configs", "examples"],
        "additionalProperties": False,
        "properties": {
            "task": {"type": "string"},
            "params": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "w": {"type": "integer", "minimum": 1},
                    "n_keys": {"type": "integer", "minimum": 1},
                    "n_values": {"type": "integer", "minimum": 1},
                    "query_rate": {"type": "number", "exclusiveMinimum": 0},
                    "valid_frac": {"type": "number", "minimum": 0, "maximum": 1},
                    "drift_rate": {"type": "number", "minimum": 0, "maximum": 1},
                    "active_min": {"type": "integer", "minimum": 1},
                    "active_max": {"type": "integer", "minimum": 1},
                },
            },
            "split_seeds": _per_split(0),
            "train_configs": _int_list(),
            "eval_configs": _int_list(),
            "examples": _per_split(1),
        },
    }

    def splits(self, settings: dict[str, Any]) -> list[tuple[str, str]]:
        """(config, split) of every split the release holds, in card order."""
        train = [(config_name(n), "train") for n in settings["train_configs"]]
        held_out = [(config_name(n), s) for n in settings["eval_configs"] for s in SPLIT_ORDER[1:]]
        return train + held_out

    def check(self, settings: dict[str, Any]) -> None:
        """Semantic checks the schema cannot express (raise ValueError)."""
        Params.from_dict(settings["params"])

    def split_settings(self, settings: dict[str, Any], subset: str, split: str) -> dict[str, Any]:
        """What one split's job reads, so a change elsewhere in the block leaves it alone."""
        return {
            "params": settings["params"],
            "split_seeds": {split: settings["split_seeds"][split]},
            "examples": settings["examples"][split],
        }

    def validate_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        """What the index and validation jobs read: params, seeds and the planned splits."""
        keys = ("params", "split_seeds", "train_configs", "eval_configs", "examples")
        return {k: settings[k] for k in keys}

    def runtime_minutes(self, settings: dict[str, Any], subset: str, split: str) -> int:
        """Minutes to ask a scheduler for one split, from its token count (about 0.5 M
        tokens/s, generous)."""
        n = settings["examples"][split]
        return int(10 + n * (12 + 3.75 * config_N(subset)) / 5e5 / 60)

    def write_split(
        self,
        out_dir: Path,
        subset: str,
        split: str,
        settings: dict[str, Any],
        progress: Progress = None,
    ) -> dict[str, Any]:
        """Generate one config/split as one shard (``split_files``; ``shard_rows`` in the
        settings cuts more, outside the workflow); its sidecar stats/{subset}/{split}.json
        comes last."""
        n = int(settings["examples"])
        return write_split(
            out_dir,
            config_N(subset),
            split,
            n,
            Params.from_dict(dict(settings["params"])),
            split_seeds=dict(settings["split_seeds"]),
            shard_rows=int(settings.get("shard_rows", n)),
            progress=progress,
        )

    def write_index(
        self, out_dir: Path, settings: dict[str, Any], progress: Progress = None
    ) -> list[dict[str, Any]]:
        """Write ``index_files`` (README.md, vocab.json, stats.md) from the splits' sidecars."""
        stats = write_index(out_dir, Params.from_dict(dict(settings["params"])))
        if progress:
            progress(f"wrote {', '.join(self.index_files)} over {len(stats)} splits")
        return stats

    def validate(
        self, out_dir: Path, settings: dict[str, Any], progress: Progress = None
    ) -> dict[str, Any]:
        """Run the oracle and the regeneration check over every shard, and check each planned
        split holds exactly its seeds; writes nothing (the caller writes the report)."""
        planned = {(c, s): int(settings["examples"][s]) for c, s in self.splits(settings)}
        return validate(
            out_dir,
            Params.from_dict(dict(settings["params"])),
            dict(settings["split_seeds"]),
            progress=progress,
            planned=planned,
        )
