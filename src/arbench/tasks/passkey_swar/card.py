"""The passkey_swar dataset card and what it reads: the folder's configs and splits in card
order, their statistics measured from the token streams by the oracle's parser (`SplitStats`,
the ``stats/n{N}/{split}.json`` sidecars), and the two files rendered from them, ``stats.md``
and ``README.md`` (the card, with its YAML ``configs:`` block). The writer (`release`) and
the checks (`check`) build on it.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from arbench.tasks.passkey_swar import oracle

# the folder's names (configs n{N}, splits in card order) and the progress callback that the
# writer (`release`) and the checks (`check`) share with the card
SPLIT_ORDER = ("train", "validation", "test")
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


# --------------------------------------------------------------------------- the card


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
