"""Validating a passkey_swar release folder: the oracle over every shard, each example
regenerated from its stored seed and compared column by column (`Regenerated`), and each
planned split holding exactly its seeds (`seed_set_problems`); `validate` runs them all and
writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from arbench.tasks.passkey_swar import oracle
from arbench.tasks.passkey_swar.card import Progress, _sort_key, config_N
from arbench.tasks.passkey_swar.generator import (
    ANSWER_TYPES,
    SPLIT_SEEDS,
    Params,
    example_seed,
    generate_seeds,
)


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
