"""Publish passkey_swar in the Hugging Face layout: parquet shards, card, vocab, statistics.

Layout under one directory: ``data/n{N}/{split}-{i:05d}-of-{n:05d}.parquet`` (int16 list
columns), ``README.md`` with a YAML ``configs:`` block so ``load_dataset(dir, "n256")``
works offline, ``vocab.json``, ``stats.md``, and ``stats/n{N}/{split}.json`` sidecars (one
per generated split, written last, so a split is complete once its sidecar exists). The card
and its statistics are `card`'s, the checks `check`'s; this module writes, and holds the
release as the workflow drives it (`PasskeySwarRelease`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arbench.io import atomic_write_text
from arbench.tasks.passkey_swar import oracle
from arbench.tasks.passkey_swar.card import (
    SPLIT_ORDER,
    Progress,
    SplitStats,
    config_N,
    config_name,
    load_stats,
    render_readme,
    render_stats_md,
)
from arbench.tasks.passkey_swar.check import validate
from arbench.tasks.passkey_swar.generator import SPLIT_SEEDS, Params, generate, vocab

DEFAULT_EXAMPLES = {"train": 100_000, "validation": 1_000, "test": 1_000}
DEFAULT_SHARD_ROWS = 100_000


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
